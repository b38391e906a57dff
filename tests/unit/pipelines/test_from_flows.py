"""Approval flows as pipelines (issue 30, item 3): each construct of workflows/approval-flows.yaml
→ its gate (or the note that says why there is none), the compiled state machine, and the round
trip: what ``squadron validate --migrate`` prints loads and validates as ``pipelines:``."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from squadron.config import parse_files
from squadron.config.migration import migration, migration_text
from squadron.domain.pipelines.compile import MAX_DEFINITION_BYTES, compile_pipeline
from squadron.domain.pipelines.flow_notes import DEFAULT_NAME
from squadron.domain.pipelines.from_flows import Migration, merge_governance, pipeline_name
from squadron.domain.pipelines.limits import MAX_PIPELINES
from squadron.domain.repo_config.models import ApprovalFlowsFile
from tests.unit.pipelines.test_compile import QUEUE

CONFIG = textwrap.dedent(
    """\
    human_groups:
      maintainers: {members: [octocat]}
      infra: {members: [hubot]}
    """
)


def files(flows: str, config: str = CONFIG) -> dict[str, str]:
    return {"config.yaml": config, "workflows/approval-flows.yaml": textwrap.dedent(flows)}


def migrated(flows: str) -> Migration:
    return migration(parse_files(files(flows)))


def stages(m: Migration, name: str = DEFAULT_NAME) -> dict[str, dict[str, Any]]:
    return {stage["id"]: stage for stage in m.pipelines[name]["stages"]}


def notes(m: Migration) -> list[str]:
    return [f"{'.'.join(str(p) for p in note.path)}: {note.message}" for note in m.notes]


def asl(m: Migration, name: str = DEFAULT_NAME) -> dict[str, dict[str, Any]]:
    compiled = compile_pipeline(name, m.models(), queue_url=QUEUE, repository_id=42, children={})
    assert len(compiled.text.encode()) <= MAX_DEFINITION_BYTES
    states: dict[str, dict[str, Any]] = compiled.definition["States"]
    return states


# --- the table: construct → gate, note, state machine -------------------------------------------


def _agent_review(m: Migration) -> None:
    assert stages(m)["approval"]["conditions"] == [
        {"check": "no_changes_requested"},
        {"check": "ci_status", "workflows": ["squadron/security-review"]},
    ]
    states = asl(m)
    assert states["approval"]["Type"] == "Task"
    # a gate that passes completes the run: auto_merge is off, a person merges
    assert states["approval.ran"]["Choices"][0]["Next"] == "__complete__"
    assert "merge" not in states
    assert any("auto_merge is off: a person merges" in n for n in notes(m))


def _human_group(m: Migration) -> None:
    assert {"check": "human_approved", "count": 2} in stages(m)["approval"]["conditions"]
    assert any(
        n.startswith(
            "default.required_reviews.0.role: human_group:maintainers: human_approved counts the approval of anyone with write access"
        )
        for n in notes(m)
    )


def _optional_review(m: Migration) -> None:
    assert stages(m)["approval"]["conditions"] == [{"check": "no_changes_requested"}]
    assert (
        "default.required_reviews.0.required: agent:pr-review is not required: nothing gates on it"
        in " ".join(notes(m))
    )


def _status_checks(m: Migration) -> None:
    assert {"check": "ci_status", "workflows": ["ci", "lint"]} in stages(m)["approval"]["conditions"]


def _status_checks_not_required(m: Migration) -> None:
    assert all(c.get("workflows") != ["ci"] for c in stages(m)["approval"]["conditions"])
    assert any("require_ci_pass is false: ci gate nothing" in n for n in notes(m))


def _many_status_checks(m: Migration) -> None:
    ci = [
        c
        for c in stages(m)["approval"]["conditions"]
        if c["check"] == "ci_status" and c["workflows"][0].startswith("ci-")
    ]
    assert [len(c["workflows"]) for c in ci] == [20, 5]


def _many_reviews(m: Migration) -> None:
    gates = stages(m)
    assert len(gates["approval"]["conditions"]) == 20 and len(gates["approval-2"]["conditions"]) == 6
    states = asl(m)
    assert states["approval.ran"]["Choices"][0]["Next"] == "approval-2"


def _auto_merge(m: Migration) -> None:
    merge = stages(m)["merge"]
    assert merge == {
        "id": "merge",
        "type": "action",
        "action": "merge_pr",
        "config": {"method": "rebase", "delete_branch": False},
    }
    states = asl(m)
    assert states["approval.ran"]["Choices"][0]["Next"] == "merge"
    assert states["merge"]["Type"] == "Task"


def _require_human(m: Migration) -> None:
    assert {"check": "human_approved", "count": 1} in stages(m)["approval"]["conditions"]
    assert "merge" not in stages(m)
    assert any("require_human: a person merges" in n for n in notes(m))


def _protected_path(m: Migration) -> None:
    gate = stages(m)["protected-1"]
    assert gate["condition"] == {"paths_match": ["infra/**", "cdk.json"]}
    assert gate["skip_to"] == "merge"
    assert gate["conditions"] == [{"check": "ci_status", "workflows": ["squadron/security-review"]}]
    states = asl(m)
    # the router answers skipped when no changed file matches: on to the merge
    skipped, passed = states["protected-1.ran"]["Choices"]
    assert skipped["And"][0] == {"Variable": "$.data.stages.protected_11.skipped", "IsPresent": True}
    assert skipped["Next"] == "merge" and passed["Next"] == "merge"
    assert states["protected-1.ran"]["Default"] == "__fail__"  # a failed gate, no on_fail: the run fails


def _protected_path_needs_a_person(m: Migration) -> None:
    gates = stages(m)
    assert gates["protected-1"]["conditions"] == [{"check": "human_approved", "count": 1}]
    hand_over = gates["hand-over"]
    assert hand_over["condition"] == {"paths_match": [".squadron/**"]}
    assert hand_over["on_pass"] == "__complete__" and hand_over["skip_to"] == "merge"
    states = asl(m)
    assert states["hand-over.ran"]["Choices"][1]["Next"] == "__complete__"  # touched: a person merges


def _many_globs(m: Migration) -> None:
    condition = stages(m)["protected-1"]["condition"]
    assert [len(item["paths_match"]) for item in condition["any"]] == [20, 20, 5]


def _on_timeout(m: Migration) -> None:
    gate = stages(m)["approval"]
    assert gate["timeout"] == "1d"
    assert gate["on_timeout"]["then"] == "escalate"
    assert gate["on_timeout"]["notify"]["target"] == "maintainers"
    assert m.pipelines[DEFAULT_NAME]["on_error"] == [{"type": "label", "add": "stuck"}]
    states = asl(m)
    assert states["approval"]["TimeoutSeconds"] == 86400
    assert {c["Next"] for c in states["approval"]["Catch"]} >= {"approval.notify-end"}
    said = " ".join(notes(m))
    assert "notify user:octocat, human_group:infra: a gate's on_timeout tells one human group" in said
    assert "assign octocat: no pipeline action assigns people" in said
    assert "label 'stuck': an escalated run adds 'needs-human'" in said


def _long_timeout(m: Migration) -> None:
    assert stages(m)["approval"]["timeout"] == "7d"
    assert any("over a stage's longest timeout (7d, MAX_STAGE_TIMEOUT)" in n for n in notes(m))


def _fix_rounds(m: Migration) -> None:
    said = " ".join(notes(m))
    assert "on_ci_failure (max_retries 2): the dev agent's fix rounds are no gate" in said
    assert "on_review_rejection (max_retries 1)" in said


def _literal_branch(m: Migration) -> None:
    main = m.pipelines["approval-main"]
    assert main["trigger"] == {"event": "pull_request.opened", "conditions": {"base_branch": "main"}}
    assert main["description"] == "Main is reviewed twice."
    # main's flow is the default's combined with its rule: both reviews, the stricter policy
    assert [c.get("workflows") for c in stages(m, "approval-main")["approval"]["conditions"]] == [
        None,
        ["squadron/pr-review"],
        ["squadron/security-review"],
        None,
    ]
    default = stages(m)["approval"]
    assert default["condition"] == {"expr": "trigger.base_branch not in ['main']"}
    assert default["skip_to"] == "__complete__"
    states = asl(m)
    assert states["approval.ran"]["Choices"][0]["Next"] == "__complete__"


def _glob_branch(m: Migration) -> None:
    assert list(m.pipelines) == [DEFAULT_NAME]
    assert any(
        n.startswith("branch_rules.0.pattern: pattern 'release/*' names no one branch") for n in notes(m)
    )


def _too_many_branches(m: Migration) -> None:
    assert len(m.pipelines) == MAX_PIPELINES
    refused = [n for n in notes(m) if "a repository holds at most 20 pipelines (MAX_PIPELINES)" in n]
    assert len(refused) == 25 - (MAX_PIPELINES - 1)


def _review_of_unusual_branch(m: Migration) -> None:
    assert "approval-it-s" in m.pipelines
    assert any("cannot be spelt in an expression" in n for n in notes(m))
    assert "condition" not in stages(m)["approval"]


def _hostile_texts(m: Migration) -> None:
    (name,) = [name for name in m.pipelines if name != DEFAULT_NAME]
    assert name == "approval-main-evil-true-pipelines"
    pipeline = m.pipelines[name]
    # the branch and the description stay data: the exact text, never keys of the YAML printed
    assert pipeline["trigger"]["conditions"] == {"base_branch": "main\n# evil: true\npipelines: {}"}
    assert pipeline["description"] == "x\n  evil: {{ context.__class__ }}\n# hi"
    assert any("cannot be spelt in an expression" in n for n in notes(m))


def _path_adding_nothing(m: Migration) -> None:
    assert list(stages(m)) == ["approval"]  # no gate for a path whose reviews are all optional
    assert "default.protected_paths.0: adds no required review: no gate" in notes(m)


CASES: list[tuple[str, str, Callable[[Migration], None]]] = [
    (
        "agent review → ci_status on squadron/<role>",
        "default: {required_reviews: [{role: agent:security-review}]}",
        _agent_review,
    ),
    (
        "human group review → human_approved (with the note on membership)",
        "default: {required_reviews: [{role: human_group:maintainers, min_approvals: 2}]}",
        _human_group,
    ),
    (
        "a review not required → no check, a note",
        "default: {required_reviews: [{role: agent:pr-review, required: false}]}",
        _optional_review,
    ),
    ("required status checks → ci_status", "default: {required_status_checks: [ci, lint]}", _status_checks),
    (
        "require_ci_pass false → no ci_status, a note",
        "default: {required_status_checks: [ci], merge_policy: {require_ci_pass: false}}",
        _status_checks_not_required,
    ),
    (
        "25 status checks → ci_status checks of at most 20 workflows",
        "default: {required_status_checks: [" + ", ".join(f"ci-{i}" for i in range(25)) + "]}",
        _many_status_checks,
    ),
    (
        "25 agent reviews → gates of at most 20 conditions, in a row",
        "roles:\n"
        + "".join(f"  r{i}: {{kind: review, agent: pr-review}}\n" for i in range(25))
        + "default: {required_reviews: ["
        + ", ".join(f"{{role: 'agent:r{i}'}}" for i in range(25))
        + "]}",
        _many_reviews,
    ),
    (
        "auto_merge → merge_pr with the flow's method",
        "default: {merge_policy: {auto_merge: true, method: rebase, delete_branch: false}}",
        _auto_merge,
    ),
    (
        "require_human → human_approved, no merge_pr",
        "default: {merge_policy: {require_human: true, auto_merge: true}}",
        _require_human,
    ),
    (
        "a protected path → a gate on paths_match, skipped to the next",
        """
        default:
          merge_policy: {auto_merge: true}
          protected_paths:
            - paths: ["infra/**", cdk.json]
              required_reviews: [{role: agent:security-review}]
        """,
        _protected_path,
    ),
    (
        "a protected path that needs a person → its gate, and a hand-over before merge_pr",
        """
        default:
          merge_policy: {auto_merge: true}
          protected_paths:
            - paths: [".squadron/**"]
              require_human: true
        """,
        _protected_path_needs_a_person,
    ),
    (
        "a protected path whose reviews are all optional → no gate, a note",
        """
        default:
          protected_paths:
            - paths: ["docs/**"]
              required_reviews: [{role: agent:security-review, required: false}]
        """,
        _path_adding_nothing,
    ),
    (
        "45 globs → any of paths_match of at most 20",
        "default:\n  protected_paths:\n    - paths: ["
        + ", ".join(f"'d{i}/**'" for i in range(45))
        + "]\n      require_human: true\n",
        _many_globs,
    ),
    (
        "escalation.on_timeout → each gate's timeout, notify, escalate; the rest noted",
        """
        default:
          escalation:
            on_timeout: {hours: 24, notify: [human_group:maintainers, user:octocat, human_group:infra], label: stuck, assign: [octocat]}
        """,
        _on_timeout,
    ),
    ("a wait over 7d → 7d, noted", "default: {escalation: {on_timeout: {hours: 400}}}", _long_timeout),
    (
        "fix rounds (on_ci_failure, on_review_rejection) → noted",
        "default: {escalation: {on_ci_failure: {max_retries: 2}, on_review_rejection: {max_retries: 1}}}",
        _fix_rounds,
    ),
    (
        "a rule naming one branch → its own pipeline; the default skips that branch",
        """
        branch_rules:
          - pattern: main
            description: Main is reviewed twice.
            required_reviews: [{role: agent:security-review}]
            merge_policy: {require_human: true}
        """,
        _literal_branch,
    ),
    (
        "a rule with a glob → noted, no pipeline",
        "branch_rules: [{pattern: 'release/*', required_status_checks: [ci]}]",
        _glob_branch,
    ),
    (
        "25 branch rules → as many pipelines as a repository holds, the rest noted",
        "branch_rules:\n"
        + "".join(f"  - {{pattern: b{i}, required_status_checks: [ci]}}\n" for i in range(25)),
        _too_many_branches,
    ),
    (
        "a branch whose name a quote is in → its pipeline; the default does not skip it (noted)",
        """branch_rules: [{pattern: "it's", required_status_checks: [ci]}]""",
        _review_of_unusual_branch,
    ),
    (
        "a pattern and a description that try to write YAML or templates → kept as data",
        """
        branch_rules:
          - pattern: "main\\n# evil: true\\npipelines: {}"
            description: "x\\n  evil: {{ context.__class__ }}\\n# hi"
            required_status_checks: [ci]
        """,
        _hostile_texts,
    ),
]


def _split(flows: str) -> tuple[str, str]:
    """A case's roles (they live in config.yaml) apart from its flows."""
    text = textwrap.dedent(flows)
    if not text.startswith("roles:"):
        return CONFIG, text
    roles, _, rest = text.partition("default:")
    return CONFIG + roles, "default:" + rest


@pytest.mark.parametrize(("construct", "flows", "check"), CASES, ids=[c[0] for c in CASES])
def test_each_approval_flow_construct_becomes_its_gate(
    construct: str, flows: str, check: Callable[[Migration], None]
) -> None:
    config, flows_text = _split(flows)
    parsed = parse_files(files(flows_text, config))
    m = migration(parsed)

    check(m)
    for name in m.pipelines:  # every pipeline given compiles within Step Functions' size
        asl(m, name)


@pytest.mark.parametrize(("construct", "flows", "check"), CASES, ids=[c[0] for c in CASES])
def test_what_migrate_prints_loads_and_validates_as_pipelines(
    construct: str, flows: str, check: Callable[[Migration], None]
) -> None:
    config, flows_text = _split(flows)
    parsed = parse_files(files(flows_text, config))
    printed = migration_text(parsed, files(flows_text, config), root=".squadron")

    pasted = parse_files(files(flows_text, config + printed))

    assert dict(pasted.config.pipelines) == migration(parsed).models()
    assert yaml.safe_load(printed)["pipelines"] == migration(parsed).pipelines


def test_the_documented_default_flow_is_one_gate_and_no_merge() -> None:
    m = migration(parse_files({}))

    assert list(m.pipelines) == [DEFAULT_NAME]
    assert stages(m)["approval"]["conditions"] == [
        {"check": "no_changes_requested"},
        {"check": "ci_status", "workflows": ["squadron/pr-review"]},
    ]
    assert m.pipelines[DEFAULT_NAME]["on_events"]["pull_request.synchronize"] == {
        "action": "invalidate_and_restart",
        "invalidate": ["approval"],
        "restart_from": "approval",
    }


def test_the_names_never_collide_with_the_repository_s_own() -> None:
    config = CONFIG + (
        "pipelines:\n  approval-default:\n    trigger: {event: pull_request.opened}\n"
        "    stages: [{id: s, type: delay, duration: 1m}]\n"
        "  approval-main:\n    stages: [{id: s, type: delay, duration: 1m}]\n"
    )
    m = migration(parse_files(files("branch_rules: [{pattern: main, required_status_checks: [ci]}]", config)))

    names = sorted(m.pipelines)
    assert len(names) == 2 and not {"approval-default", "approval-main"} & set(names)
    assert all(name.startswith(("approval-default-", "approval-main-")) for name in names)


@pytest.mark.parametrize(
    ("branch", "taken", "name"),
    [
        ("main", (), "approval-main"),
        ("release/1.0", (), "approval-release-1-0"),
        (
            "main",
            ("approval-main",),
            "approval-main-" + __import__("hashlib").sha256(b"main").hexdigest()[:8],
        ),
        (
            "x" * 200,
            (),
            "approval-" + "x" * 46 + "-" + __import__("hashlib").sha256(b"x" * 200).hexdigest()[:8],
        ),
        ("///", (), "approval-branch"),
    ],
)
def test_pipeline_names_follow_the_id_pattern(branch: str, taken: tuple[str, ...], name: str) -> None:
    assert pipeline_name(branch, taken) == name
    assert len(name) <= 64


# --- which governs merging ---------------------------------------------------------------------

MERGING = textwrap.dedent(
    """\
    pipelines:
      ship:
        trigger: {event: pull_request.opened, conditions: {base_branch: main}}
        stages:
          - {id: merge, type: action, action: merge_pr, config: {method: squash}}
      anywhere:
        trigger: {event: pull_request.opened}
        stages:
          - id: both
            type: parallel
            branches:
              - {id: m, type: action, action: merge_pr}
      quiet:
        trigger: {event: pull_request.opened}
        stages:
          - {id: say, type: action, action: comment, config: {message: hi}}
    """
)


@pytest.mark.parametrize(
    ("flows_file", "expected"),
    [
        (
            True,
            [
                (
                    ("pipelines", "ship", "stages", 0),
                    "merge_pr (method squash) asks the merge gate, which also applies the approval flow of "
                    "'main' (default + rule 'main' + rule 'ma*')",
                ),
                (
                    ("pipelines", "anywhere", "stages", 0, "branches", 0),
                    "merge_pr (the flow's method) asks the merge gate, which also applies the approval flow "
                    "of the PR's base branch (default + its branch rules)",
                ),
            ],
        ),
        (
            False,
            [
                (
                    ("pipelines", "ship", "stages", 0),
                    "merge_pr (method squash) asks the merge gate, which also applies the documented default "
                    "approval flow (no workflows/approval-flows.yaml)",
                ),
                (
                    ("pipelines", "anywhere", "stages", 0, "branches", 0),
                    "merge_pr (the flow's method) asks the merge gate, which also applies the documented "
                    "default approval flow (no workflows/approval-flows.yaml)",
                ),
            ],
        ),
    ],
)
def test_a_pipeline_that_merges_is_told_the_approval_flow_still_applies(
    flows_file: bool, expected: list[tuple[tuple[str | int, ...], str]]
) -> None:
    flows = ApprovalFlowsFile.model_validate(
        {"branch_rules": [{"pattern": "main"}, {"pattern": "ma*"}, {"pattern": "dev"}]}
    )
    pipelines = parse_files(files("{}", CONFIG + MERGING)).config.pipelines

    found = merge_governance(pipelines, flows, flows_file=flows_file)

    assert [(path, message.split(": both govern")[0]) for path, message in found] == expected
    assert all("both govern merging" in message for _, message in found)
