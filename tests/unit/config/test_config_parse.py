"""The .squadron parser: the reference config, defaults, overrides and every kind of error."""

from __future__ import annotations

from pathlib import Path

import pytest

from squadron.config import (
    FRAMEWORK_TOOLS,
    HOST_TOOLS,
    ConfigError,
    Problem,
    load_directory,
    parse_files,
    read_directory,
)
from squadron.domain.repo_config.types import format_duration, parse_duration, path_matches
from squadron.errors import ConfigurationError

REPO_ROOT = Path(__file__).resolve().parents[3]
REFERENCE = REPO_ROOT / ".squadron"

AGENT_OK = """---
name: {name}
description: A test agent.
tools: [read_issue, comment]
---
Work on issue #{{issue_number}} of {{repo_full_name}}.
"""


def reference_files() -> dict[str, str]:
    return read_directory(REFERENCE)


def problems_of(files: dict[str, str]) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        parse_files(files)
    return list(caught.value.problems)


# --- the reference configuration ---------------------------------------------------------------


def test_reference_squadron_loads_completely() -> None:
    config = load_directory(REFERENCE, root=".squadron")

    assert set(config.config.roles) == {
        "pm",
        "feat-dev",
        "bug-fix",
        "pr-review",
        "security-review",
        "retrospective",
    }
    assert {name for name, agent in config.agents.items() if agent.source != "built-in"} == set(
        config.config.roles
    )
    assert config.defaults == ()
    assert [rule.pattern for rule in config.approval_flows.branch_rules] == ["main"]
    main = config.approval_flows.rules_for("main")[0]
    assert main.merge_policy is not None and main.merge_policy.require_human is True
    infra = main.protected_paths[0] if main.protected_paths else None
    assert infra is not None and infra.matches("infra/constructs/router.py")
    assert config.approval_flows.rules_for("feat/issue-3") == []


def test_reference_roles_resolve() -> None:
    config = load_directory(REFERENCE, root=".squadron")

    pm = config.role("pm")
    security = config.role("security-review")
    feat = config.role("feat-dev")

    assert (pm.kind, pm.lifecycle, pm.model) == ("pm", "ephemeral", "claude-sonnet-4.5")
    assert pm.limits.max_tool_calls == 60 and pm.limits.max_active_duration == 15 * 60
    assert pm.agent.host_tools == []
    assert security.provider.type == "byok" and security.model == "claude-opus-4"
    assert feat.max_concurrent == 4 and "bash" in feat.agent.host_tools
    assert "{wake_reason}" in feat.wake_prompt
    assert config.branch_for("feat-dev", 38) == "feat/issue-38"
    assert config.branch_for("feat-dev", 38, ["infra"]) == "infra/issue-38"
    assert config.branch_for("bug-fix", 7) == "fix/issue-7"


# --- defaults ----------------------------------------------------------------------------------


def test_no_squadron_directory_means_documented_defaults() -> None:
    config = parse_files({})

    assert config.uses_defaults_only
    assert config.defaults == ("config.yaml", "workflows/approval-flows.yaml")
    assert set(config.agents) == {
        "pm",
        "feat-dev",
        "bug-fix",
        "pr-review",
        "security-review",
        "retrospective",
    }
    assert all(agent.source == "built-in" for agent in config.agents.values())
    assert config.config.bot_login == "squadron[bot]"
    assert config.config.max_issue_depth == 3
    assert config.role("feat-dev").limits.max_tool_calls == 200
    assert config.role("pm").lifecycle == "ephemeral"
    assert [r.role for r in config.approval_flows.default.required_reviews] == ["agent:pr-review"]
    assert config.branch_for("bug-fix", 5) == "fix/issue-5"


def test_defaults_merge_under_a_partial_config() -> None:
    files = {
        "config.yaml": "project: {name: Demo}\nroles:\n  feat-dev: {model: gpt-5}\n  docs: {kind: dev}\n"
    }
    files["agents/docs.md"] = AGENT_OK.format(name="docs")

    config = parse_files(files)

    assert config.config.project.name == "Demo"
    assert config.role("feat-dev").model == "gpt-5"
    assert config.role("feat-dev").kind == "dev"  # kept from the default role
    assert config.role("docs").lifecycle == "persistent"
    assert config.agents["docs"].source == ".squadron/agents/docs.md"
    assert "bug-fix" in config.config.roles
    assert config.defaults == ("workflows/approval-flows.yaml",)


def test_null_removes_a_default_role_and_what_defaults_say_about_it() -> None:
    config = parse_files({"config.yaml": "roles:\n  pr-review: null\n  bug-fix: null\n"})

    assert set(config.config.roles) == {"pm", "feat-dev", "security-review", "retrospective"}
    assert "bug-fix" not in config.config.branch_naming.roles
    assert config.config.labels["bug"].role is None
    assert config.approval_flows.default.required_reviews == []


@pytest.mark.parametrize(
    ("overrides", "role", "expected"),
    [
        ("", "feat-dev", {"max_tool_calls": 200, "max_active_duration": 7200}),
        ("    feat-dev: {max_tool_calls: 20}\n", "feat-dev", {"max_tool_calls": 20, "max_turns": 50}),
        ("    feat-dev: {max_active_duration: 30m}\n", "feat-dev", {"max_active_duration": 1800}),
        ("    feat-dev: {max_sleep_duration: 1d2h}\n", "feat-dev", {"max_sleep_duration": 93600}),
        ("    feat-dev: {max_tool_calls: 20}\n", "bug-fix", {"max_tool_calls": 200}),
        ("", "pm", {"max_tool_calls": 60, "max_active_duration": 900}),
    ],
    ids=[
        "defaults",
        "tool-calls",
        "duration-string",
        "compound-duration",
        "other-role-untouched",
        "pm-default",
    ],
)
def test_per_role_breaker_overrides(overrides: str, role: str, expected: dict[str, int]) -> None:
    text = "circuit_breakers:\n  roles:\n" + overrides if overrides else ""
    limits = parse_files({"config.yaml": text}).role(role).limits

    assert {key: getattr(limits, key) for key in expected} == expected


def test_default_breaker_limits_merge_key_by_key() -> None:
    text = "circuit_breakers:\n  defaults: {max_turns: 10}\n  roles:\n    feat-dev: {max_tool_calls: 5}\n"
    limits = parse_files({"config.yaml": text}).role("feat-dev").limits

    assert (limits.max_turns, limits.max_tool_calls, limits.max_iterations) == (10, 5, 5)


# --- errors: file, line, key path --------------------------------------------------------------

CONFIG_CASES = [
    pytest.param(
        "roles:\n  feat-dev:\n    kind: dev\n    lifecycle: forever\n",
        3 + 1,
        "roles.feat-dev.lifecycle",
        "Input should be 'persistent' or 'ephemeral' (got 'forever')",
        id="bad-enum",
    ),
    pytest.param(
        "roles:\n  feat-dev:\n    lifecylce: persistent\n",
        3,
        "roles.feat-dev.lifecylce",
        "unknown key 'lifecylce' (did you mean 'lifecycle'?)",
        id="typo-key",
    ),
    pytest.param(
        "project:\n  name: x\nmax_issue_depth: deep\n",
        3,
        "max_issue_depth",
        "Input should be a valid integer, unable to parse string as an integer (got 'deep')",
        id="wrong-type",
    ),
    pytest.param(
        "bot_loggin: me\n",
        1,
        "bot_loggin",
        "unknown key 'bot_loggin' (did you mean 'bot_login'?)",
        id="top-typo",
    ),
    pytest.param(
        "circuit_breakers:\n  defaults:\n    max_active_duration: 2 hours\n",
        3,
        "circuit_breakers.defaults.max_active_duration",
        "expected seconds or a duration like '30m', '2h' or '1h30m' (got '2 hours')",
        id="bad-duration",
    ),
    pytest.param(
        "labels:\n  feature:\n    role: feat-devv\n",
        3,
        "labels.feature.role",
        "unknown role 'feat-devv' (did you mean 'feat-dev'?)",
        id="dangling-label-role",
    ),
    pytest.param(
        "circuit_breakers:\n  roles:\n    qa: {max_turns: 3}\n",
        3,
        "circuit_breakers.roles.qa",
        "unknown role 'qa'",
        id="dangling-breaker-role",
    ),
    pytest.param(
        "roles:\n  docs:\n    kind: dev\n",
        2,
        "roles.docs",
        "no agent definition 'docs' (agents/docs.md)",
        id="missing-agent-definition",
    ),
    pytest.param(
        "roles:\n  security-review:\n    provider: {type: byok, provider_type: openai, base_url: https://x.test,\n"
        "      api_key_secret: squadron/byok/s, api_key: sk-123}\n",
        3,
        "roles.security-review.provider",
        "'api_key' is not allowed: never put a key in config; name its secret in api_key_secret",
        id="inline-api-key",
    ),
    pytest.param(
        "roles:\n  security-review:\n    provider: {type: byok, provider_type: openai, base_url: https://x.test,\n"
        "      api_key_secret: prod/openai-key}\n",
        4,
        "roles.security-review.provider.api_key_secret",
        "'prod/openai-key' is not under squadron/byok/: agent tasks may read only the secrets there; "
        "store the key as squadron/byok/<name> and name that (or its ARN)",
        id="byok-key-outside-the-readable-prefix",
    ),
    pytest.param(
        "branch_naming:\n  roles:\n    feat-dev: feat/{issue}\n",
        3,
        "branch_naming.roles.feat-dev",
        "unknown placeholder {issue}; branch templates may use {issue_number}, {role}",
        id="bad-branch-template",
    ),
    pytest.param(
        "roles:\n  pm: {kind: pm}\n  pm2: {kind: pm, agent: pm}\n",
        1,
        "roles",
        "exactly one role must be of kind pm (found 2)",
        id="two-pms",
    ),
    pytest.param(
        "escalation:\n  notify: [human_group:oncall]\n",
        2,
        "escalation.notify.0",
        "unknown human group 'oncall' (define it under human_groups in config.yaml)",
        id="dangling-human-group",
    ),
    pytest.param(
        "project:\n  name: a\nproject:\n  name: b\n",
        3,
        "project",
        "duplicate key (first written on line 1)",
        id="duplicate-key",
    ),
    pytest.param(
        "roles:\n  feat-dev: [1,\n",
        3,
        "",
        "YAML syntax error: while parsing a flow node did not find expected node content",
        id="yaml-syntax",
    ),
]


@pytest.mark.parametrize(("text", "line", "key_path", "message"), CONFIG_CASES)
def test_config_errors_name_file_line_and_key(text: str, line: int, key_path: str, message: str) -> None:
    problems = problems_of({"config.yaml": text})

    assert Problem(".squadron/config.yaml", line, key_path, message) in problems, problems


def test_problem_renders_file_line_key_and_message() -> None:
    problems = problems_of({"config.yaml": "roles:\n  feat-dev:\n    kind: dev\n    lifecycle: forever\n"})

    assert str(problems[0]) == (
        ".squadron/config.yaml:4: roles.feat-dev.lifecycle: Input should be 'persistent' or 'ephemeral' (got 'forever')"
    )


def agent_file(front: str, body: str = "Hello {project_name}.\n") -> str:
    return f"---\n{front}---\n{body}"


AGENT_CASES = [
    pytest.param(
        agent_file("name: pm\ndescription: d\ntools: [read_issue, comentt]\n"),
        4,
        "tools.1",
        "unknown tool 'comentt'; framework tools are: " + ", ".join(sorted(FRAMEWORK_TOOLS)),
        id="unknown-tool",
    ),
    pytest.param(
        agent_file("name: pm\ndescription: d\ntools: [bash]\n"),
        4,
        "tools.0",
        "'bash' is a CLI host tool: opt into it explicitly under host_tools",
        id="host-tool-not-opted-in",
    ),
    pytest.param(
        agent_file("name: pm\ndescription: d\nhost_tools: [sh]\n"),
        4,
        "host_tools.0",
        "unknown host tool 'sh'; host tools are: " + ", ".join(sorted(HOST_TOOLS)),
        id="unknown-host-tool",
    ),
    pytest.param(
        agent_file("name: pm\ndescription: d\n", "Line one.\nYou work on {project}.\n"),
        6,
        "",
        "unknown placeholder {project}",
        id="unknown-placeholder",
    ),
    pytest.param(
        agent_file("name: pm\ndescription: d\nwake_prompt: Woken by {wake_reasons}\n"),
        4,
        "wake_prompt",
        "unknown placeholder {wake_reasons}",
        id="unknown-wake-placeholder",
    ),
    pytest.param(
        agent_file("name: pm\ndescription: d\nlifecycle: forever\n"),
        4,
        "lifecycle",
        "Input should be 'persistent' or 'ephemeral' (got 'forever')",
        id="bad-lifecycle",
    ),
    pytest.param(
        agent_file("name: pmm\ndescription: d\n"),
        2,
        "name",
        "must match the file name ('pm')",
        id="name-mismatch",
    ),
    pytest.param(agent_file("name: pm\n"), 2, "description", "required key is missing", id="missing-key"),
    pytest.param(
        "no front matter\n", 1, "", "an agent file starts with YAML front matter", id="no-front-matter"
    ),
    pytest.param(
        agent_file("name: pm\ndescription: [d\n"), 4, "", "YAML syntax error", id="front-matter-syntax"
    ),
]


@pytest.mark.parametrize(("text", "line", "key_path", "message"), AGENT_CASES)
def test_agent_errors_name_file_line_and_key(text: str, line: int, key_path: str, message: str) -> None:
    problems = problems_of({"agents/pm.md": text})

    matching = [
        p for p in problems if (p.file, p.line, p.key_path) == (".squadron/agents/pm.md", line, key_path)
    ]
    assert any(p.message.startswith(message) for p in matching), problems


FLOW_CASES = [
    pytest.param(
        "default:\n  required_reviews:\n    - role: agent:sec-review\n",
        3,
        "default.required_reviews.0.role",
        "unknown role 'sec-review'",
        id="dangling-review-role",
    ),
    pytest.param(
        "default:\n  required_reviews:\n    - role: agent:feat-dev\n",
        3,
        "default.required_reviews.0.role",
        "role 'feat-dev' is a dev role; reviews need a review role",
        id="dev-role-cannot-review",
    ),
    pytest.param(
        "branch_rules:\n  - pattern: main\n    merge_policy: {method: fast-forward}\n",
        3,
        "branch_rules.0.merge_policy.method",
        "Input should be 'merge', 'squash' or 'rebase' (got 'fast-forward')",
        id="bad-merge-method",
    ),
    pytest.param(
        "branch_rules:\n  - pattern: main\n    protected_paths:\n      - paths: [infra/**]\n"
        "        required_reviews: [{role: human_group:infra}]\n",
        5,
        "branch_rules.0.protected_paths.0.required_reviews.0.role",
        "unknown human group 'infra'",
        id="dangling-human-group",
    ),
    pytest.param(
        "default:\n  escalation:\n    on_timeout: {hours: 4, notify: [agent:pm]}\n",
        3,
        "default.escalation.on_timeout.notify.0",
        "'agent:pm': only humans are notified",
        id="agent-notified",
    ),
    pytest.param(
        "default:\n  required_reviews:\n    - role: pr-review\n",
        3,
        "default.required_reviews.0.role",
        "expected 'agent:<role>', 'human_group:<group>' or 'user:<login>'",
        id="principal-without-prefix",
    ),
    pytest.param(
        "branch_rules:\n  - pattern: main\n    protected_paths:\n      - paths: [a/**]\n",
        4,
        "branch_rules.0.protected_paths.0",
        "a protected path must add required_reviews or require_human",
        id="protected-path-adds-nothing",
    ),
    pytest.param(
        "default:\n  merge_policy:\n    auto_merge: maybe\n",
        3,
        "default.merge_policy.auto_merge",
        "Input should be a valid boolean",
        id="wrong-type",
    ),
]


@pytest.mark.parametrize(("text", "line", "key_path", "message"), FLOW_CASES)
def test_approval_flow_errors_name_file_line_and_key(
    text: str, line: int, key_path: str, message: str
) -> None:
    problems = problems_of({"workflows/approval-flows.yaml": text})

    file = ".squadron/workflows/approval-flows.yaml"
    matching = [p for p in problems if (p.file, p.line, p.key_path) == (file, line, key_path)]
    assert any(p.message.startswith(message) for p in matching), problems


def test_every_problem_of_every_file_is_collected() -> None:
    files = reference_files()
    files["config.yaml"] = files["config.yaml"].replace("max_turns: 50", "max_turns: lots")
    files["agents/pm.md"] = files["agents/pm.md"].replace("{max_issue_depth}", "{depth}")
    files["workflows/approval-flows.yaml"] = files["workflows/approval-flows.yaml"].replace(
        "method: squash", "method: ff", 1
    )

    problems = problems_of(files)

    assert {p.file for p in problems} == {
        ".squadron/config.yaml",
        ".squadron/agents/pm.md",
        ".squadron/workflows/approval-flows.yaml",
    }
    assert all(p.line is not None for p in problems)


def test_unknown_configuration_file_is_named() -> None:
    problems = problems_of({"workflows/approval-flow.yaml": "default: {}\n"})

    assert problems == [
        Problem(
            ".squadron/workflows/approval-flow.yaml",
            None,
            "",
            "unknown configuration file; did you mean .squadron/workflows/approval-flows.yaml?",
        )
    ]


def test_config_error_is_a_squadron_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"1 configuration problem\n.squadron/config.yaml:1"):
        parse_files({"config.yaml": "nope: 1\n"})


def test_file_that_is_not_a_mapping() -> None:
    assert problems_of({"config.yaml": "- a\n- b\n"}) == [
        Problem(".squadron/config.yaml", 1, "", "the file must hold a mapping of keys to values")
    ]


# --- value types -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90), ("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1h30m", 5400)],
    ids=["int", "digits", "seconds", "minutes", "hours", "days", "compound"],
)
def test_durations(value: int | str, seconds: int) -> None:
    assert parse_duration(value) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("infra/**", "infra/constructs/router.py", True),
        ("infra/**", "layers/infra/x.py", False),
        ("**/auth/**", "src/app/auth/token.py", True),
        ("**/auth/**", "auth/token.py", True),
        ("*.lock", "deep/dir/poetry.lock", True),
        (".squadron/**", ".squadron/config.yaml", True),
        ("functions/*/handler.py", "functions/ingress/handler.py", True),
        ("functions/*/handler.py", "functions/a/b/handler.py", False),
    ],
    ids=[
        "tree",
        "not-nested",
        "any-depth",
        "at-root",
        "basename",
        "dotdir",
        "one-segment",
        "not-two-segments",
    ],
)
def test_protected_path_globs(glob: str, path: str, matches: bool) -> None:
    assert path_matches(glob, path) is matches
