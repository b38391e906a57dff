"""``pipelines:`` in .squadron/config.yaml (issue 30, items 1 and 6): the reference's files load
unchanged; every broken or hostile pipeline is refused by ``squadron validate`` with its line and
column, all problems in one pass, and a pipeline past a bound is refused, never run away."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from squadron.cli import main
from squadron.config import ConfigError, parse_files
from squadron.config.parse.pipelines import CUSTOM_GATES_PROBLEM
from squadron.domain.pipelines.checks import COMMAND_PROBLEM
from squadron.domain.pipelines.conditions import PrApprovalsMetCheck
from squadron.domain.pipelines.limits import (
    LIMITS,
    MAX_EXPANDED_STAGES,
    MAX_GATE_CONDITIONS,
    MAX_NESTING_DEPTH,
    MAX_ON_EVENTS,
    MAX_PARALLEL_BRANCHES,
    MAX_PIPELINES,
    MAX_STAGES,
)
from squadron.domain.pipelines.models import (
    GateStage,
    MergePrStage,
    OnFail,
)
from squadron.domain.pipelines.types import EVENT_NAMES

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]

#: Roles and an agent the reference's examples name beyond the built-in ones.
ROLES = "roles:\n  test-coverage: {kind: review}\nhuman_groups:\n  maintainers: {members: [octocat]}\n"
AGENTS = {
    "agents/test-coverage.md": "---\nname: test-coverage\ndescription: Tests.\n---\nReview {issue_number}.\n"
}


def files_with(pipelines_yaml: str) -> dict[str, str]:
    return {"config.yaml": ROLES + textwrap.dedent(pipelines_yaml), **AGENTS}


def problems_of(pipelines_yaml: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_files(files_with(pipelines_yaml))
    return [str(problem).removeprefix(".squadron/") for problem in caught.value.problems]


# --- the reference's files load unchanged -------------------------------------------------------


@pytest.mark.parametrize("name", ["pr-lifecycle.yaml", "issue-to-merge.yaml"])
def test_the_reference_complete_examples_load_unchanged(name: str) -> None:
    text = (HERE / "reference" / name).read_text(encoding="utf-8")

    config = parse_files({"config.yaml": ROLES + text, **AGENTS}).config

    assert len(config.pipelines) == 1
    pipeline = next(iter(config.pipelines.values()))
    assert pipeline.trigger is not None and pipeline.stages


def test_the_pr_lifecycle_example_is_typed() -> None:
    text = (HERE / "reference" / "pr-lifecycle.yaml").read_text(encoding="utf-8")
    pipeline = parse_files({"config.yaml": ROLES + text, **AGENTS}).config.pipelines["pr-lifecycle"]

    gate = pipeline.stages[3]
    merge = pipeline.stages[4]
    assert [type(stage).__name__ for stage in pipeline.stages] == [
        "AgentStage",
        "AgentStage",
        "AgentStage",
        "GateStage",
        "MergePrStage",
    ]
    assert isinstance(gate, GateStage) and gate.conditions is not None
    assert isinstance(gate.conditions[0], PrApprovalsMetCheck) and gate.conditions[0].count == 1
    assert gate.on_fail == OnFail(goto="code-review", max_iterations=3, then="escalate")
    assert gate.timeout == 48 * 3600
    assert isinstance(merge, MergePrStage) and merge.config.method == "squash" and merge.config.delete_branch
    assert pipeline.trigger is not None and pipeline.trigger.conditions.base_branch == "main"
    assert set(pipeline.on_events) == {
        "pull_request.synchronize",
        "pull_request_review.submitted",
        "check_suite.completed",
        "pull_request.closed",
    }


#: The reference's example of each stage type (docs/reference/pipeline-configuration.md), as written.
STAGE_EXAMPLES = {
    "human": """
        - id: human-approval
          type: human
          human:
            description: "Review and approve deployment to production"
            wait_for: approval
            from: maintainers
            count: 1
            auto_assign: true
            notify:
              on_enter: "Pipeline is waiting for your approval."
              reminder:
                interval: 24h
                message: "Reminder: deployment approval is still pending."
                max_reminders: 3
          timeout: 72h
          on_timeout:
            notify:
              target: maintainers
              message: "Human approval timed out after 72h"
            then: escalate
    """,
    "parallel": """
        - id: parallel-reviews
          type: parallel
          join: all  # or "any"
          branches:
            - id: security-review
              type: agent
              agent: security-review
              action: "Review security aspects"
            - id: code-review
              type: agent
              agent: pr-review
              action: "Review code quality"
            - id: notify-deploy
              type: pipeline
              pipeline: deploy-notification
    """,
    "delay": """
        - id: cool-down
          type: delay
          duration: 5m
          poll:
            check: ci_status
            interval: 30s
    """,
    "action": """
        - id: auto-merge
          type: action
          action: merge_pr
          config:
            method: squash
            delete_branch: true
          on_error:
            retry: 1
            then: escalate
    """,
    "webhook": """
        - id: notify-slack
          type: webhook
          request:
            url: "https://hooks.slack.com/services/{{ context.slack_webhook }}"
            method: POST
            headers:
              Content-Type: application/json
            body:
              text: "Pipeline {{ context.pipeline_name }} completed"
          expect:
            status: 200
          on_error:
            retry: 2
            then: fail
    """,
    "pipeline": """
        - id: deploy
          type: pipeline
          pipeline: deploy-notification
          context:
            environment: staging
    """,
    "gate": """
        - id: approval-gate
          type: gate
          conditions:
            - check: pr_approvals_met
              count: 1
            - check: no_changes_requested
            - check: ci_status
              workflows: ["CI"]
            - check: file_exists
              paths: [README.md]
          on_pass: __complete__
          timeout: 48h
    """,
}


@pytest.mark.parametrize("kind", sorted(STAGE_EXAMPLES))
def test_the_reference_stage_examples_load(kind: str) -> None:
    stage = textwrap.indent(textwrap.dedent(STAGE_EXAMPLES[kind]).strip(), "      ")
    text = (
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        f"{stage}\n"
        "  deploy-notification:\n    stages:\n      - {id: say, type: action, action: comment, config: {message: hi}}\n"
    )

    config = parse_files(files_with(text)).config

    assert config.pipelines["p"].stages[0].type == kind


# --- broken and hostile pipelines: each problem at its line and column ---------------------------

HEAD = "pipelines:\n  p:\n    trigger: {event: issues.labeled}\n    stages:\n"
# ROLES is 4 lines: a stage written right after HEAD starts at line 9.

CASES: list[tuple[str, str, list[str]]] = [
    (
        "an unknown stage type",
        HEAD + "      - {id: a, type: sleep}\n",
        [
            "config.yaml:9:17: pipelines.p.stages.0.type: unknown type 'sleep': one of agent, gate, human, "
            "parallel, delay, action, webhook, pipeline"
        ],
    ),
    (
        "an unknown role, with a suggestion",
        HEAD + "      - {id: a, type: agent, agent: feat-dve}\n",
        [
            "config.yaml:9:30: pipelines.p.stages.0.agent: unknown role 'feat-dve' (did you mean 'feat-dev'?) (a key of roles)"
        ],
    ),
    (
        "a misspelt key of a stage",
        HEAD + "      - {id: a, type: agent, agent: feat-dev, timout: 5m}\n",
        ["config.yaml:9:47: pipelines.p.stages.0.timout: unknown key 'timout' (did you mean 'timeout'?)"],
    ),
    (
        "duplicate stage ids and a bad id",
        HEAD
        + "      - {id: a, type: agent, agent: feat-dev}\n      - {id: a, type: agent, agent: feat-dev}\n"
        + "      - {id: 9lives, type: agent, agent: feat-dev}\n",
        [
            "config.yaml:10:10: pipelines.p.stages.1.id: duplicate stage id 'a' (first at pipelines.p.stages.0.id)",
            "config.yaml:11:10: pipelines.p.stages.2.id: an id is a letter, then letters, digits, '_' and '-' (got '9lives')",
        ],
    ),
    (
        "a stage named after a transition word",
        HEAD + "      - {id: escalate, type: agent, agent: feat-dev}\n",
        [
            "config.yaml:9:10: pipelines.p.stages.0.id: 'escalate' is a reserved word of transitions "
            "(cancel, complete, current, escalate, fail): name the stage otherwise"
        ],
    ),
    (
        "every kind of stage reference to a missing stage",
        HEAD
        + "      - id: a\n"
        + "        type: agent\n"
        + "        agent: feat-dev\n"
        + "        on_complete: gate1\n"
        + "        on_error: {retry: 1, then: fixit}\n"
        + "        condition: {labels_include: x}\n"
        + "        skip_to: nowhere\n"
        + "      - id: gate\n"
        + "        type: gate\n"
        + "        conditions: [{check: no_changes_requested}]\n"
        + "        on_pass: {goto: merge2}\n"
        + "        on_fail: {goto: aa, max_iterations: 2}\n"
        + "      - id: merge\n"
        + "        type: action\n"
        + "        action: merge_pr\n"
        + "        on_conflict: fixer\n"
        + "    on_events:\n"
        + "      pull_request.synchronize:\n"
        + "        action: invalidate_and_restart\n"
        + "        invalidate: [a, b]\n"
        + "        restart_from: c\n",
        [
            "config.yaml:12:9: pipelines.p.stages.0.on_complete: unknown stage 'gate1' (did you mean 'gate'?): the pipeline's stages are a, gate, merge",
            "config.yaml:13:30: pipelines.p.stages.0.on_error.then: unknown stage 'fixit': the pipeline's stages are a, gate, merge",
            "config.yaml:15:9: pipelines.p.stages.0.skip_to: unknown stage 'nowhere': the pipeline's stages are a, gate, merge",
            "config.yaml:19:19: pipelines.p.stages.1.on_pass.goto: unknown stage 'merge2' (did you mean 'merge'?): the pipeline's stages are a, gate, merge",
            "config.yaml:20:19: pipelines.p.stages.1.on_fail.goto: unknown stage 'aa': the pipeline's stages are a, gate, merge",
            "config.yaml:24:9: pipelines.p.stages.2.on_conflict: unknown stage 'fixer': the pipeline's stages are a, gate, merge",
            "config.yaml:28:25: pipelines.p.on_events.pull_request.synchronize.invalidate.1: unknown stage 'b': the pipeline's stages are a, gate, merge",
            "config.yaml:29:9: pipelines.p.on_events.pull_request.synchronize.restart_from: unknown stage 'c': the pipeline's stages are a, gate, merge",
        ],
    ),
    (
        "an unknown gate check, and a check's unknown field",
        HEAD
        + "      - id: g\n        type: gate\n        conditions:\n          - check: pr_approval\n"
        + "          - {check: label_present, label: ok, labels: [a]}\n",
        [
            "config.yaml:12:13: pipelines.p.stages.0.conditions.0.check: unknown check 'pr_approval' (did you mean 'pr_approvals_met'?): one of command, "
            "file_exists, pr_approvals_met, ci_status, label_present, no_changes_requested, human_approved, branch_up_to_date",
            "config.yaml:13:47: pipelines.p.stages.0.conditions.1.labels: unknown key 'labels' (did you mean 'label'?)",
        ],
    ),
    (
        "an event the App does not receive, as trigger and as reactive handler",
        "pipelines:\n  p:\n    trigger: {event: push}\n    on_events:\n      pull_request.unlabeled: {action: cancel}\n"
        "    stages:\n      - {id: a, type: agent, agent: feat-dev}\n",
        [
            "config.yaml:7:15: pipelines.p.trigger.event: unknown event 'push': only the events the App receives can "
            "start or steer a pipeline (listed in docs/pipelines.md)",
            "config.yaml:9:7: pipelines.p.on_events.pull_request.unlabeled: unknown event 'pull_request.unlabeled' "
            "(did you mean 'pull_request.labeled'?): only the events the App receives can start or steer a pipeline "
            "(listed in docs/pipelines.md)",
        ],
    ),
    (
        "a sub-pipeline that does not exist, and one with a trigger",
        HEAD
        + "      - {id: a, type: pipeline, pipeline: reviw}\n      - {id: b, type: pipeline, pipeline: q}\n"
        + "  q:\n    trigger: {event: issues.opened}\n    stages: [{id: x, type: agent, agent: feat-dev}]\n",
        [
            "config.yaml:9:33: pipelines.p.stages.0.pipeline: unknown pipeline 'reviw'",
            "config.yaml:10:33: pipelines.p.stages.1.pipeline: pipeline 'q' has a trigger: a sub-pipeline has none (it runs only when called)",
        ],
    ),
    (
        "a cycle of sub-pipelines",
        HEAD
        + "      - {id: a, type: pipeline, pipeline: q}\n"
        + "  q:\n    stages:\n      - {id: x, type: parallel, branches: [{id: y, type: pipeline, pipeline: r}]}\n"
        + "  r:\n    stages: [{id: z, type: pipeline, pipeline: q}]\n",
        [
            "config.yaml:14:38: pipelines.r.stages.0.pipeline: sub-pipeline cycle: q -> r -> q (a pipeline cannot run itself)",
        ],
    ),
    (
        "a template that does not parse, and one reading an unknown name",
        HEAD
        + "      - id: a\n        type: agent\n        agent: feat-dev\n        action: 'Fix #{{ context.issue_number }'\n"
        + "      - id: b\n        type: agent\n        agent: feat-dev\n"
        + "        context: {who: '{{ secrets.token }}'}\n",
        [
            "config.yaml:12:9: pipelines.p.stages.0.action: template does not parse: unexpected '}'",
            "config.yaml:16:19: pipelines.p.stages.1.context.who: template unknown name 'secrets': a template reads "
            "context, trigger, stages, branches (and null)",
        ],
    ),
    (
        "hostile templates: a Python attribute, a call, a statement",
        HEAD
        + "      - id: a\n        type: agent\n        agent: feat-dev\n"
        + "        action: '{{ context.__class__.__mro__ }}'\n"
        + '        condition: "{{ context.items() }}"\n'
        + "        skip_to: b\n"
        + "      - id: b\n        type: agent\n        agent: feat-dev\n"
        + "        action: '{% for i in range(99999999) %}x{% endfor %}'\n",
        [
            "config.yaml:12:9: pipelines.p.stages.0.action: template '__mro__' is not readable: a template reads data, not Python attributes",
            "config.yaml:13:9: pipelines.p.stages.0.condition: template a template calls nothing: use a filter (value | default('x'))",
            "config.yaml:18:9: pipelines.p.stages.1.action: template {% %} statements are not supported: a value holds {{ expression }}s only",
        ],
    ),
    (
        "a condition that cannot evaluate",
        HEAD
        + "      - id: a\n        type: agent\n        agent: feat-dev\n"
        + "        condition: {labels_include: bug, paths_match: ['src/**']}\n",
        [
            "config.yaml:12:9: pipelines.p.stages.0.condition: a condition is one key of any, all, labels_include, "
            "paths_match, expr (combine with any/all), or a string '{{ expression }}'"
        ],
    ),
    (
        "custom gate checks (Python modules) are refused with the reason",
        "custom_gates:\n  my_check: mypackage.gates.MyCheck\n",
        [f"config.yaml:5: custom_gates: {CUSTOM_GATES_PROBLEM}"],
    ),
    (
        "webhooks only to https and public addresses",
        HEAD
        + "      - {id: a, type: webhook, request: {url: 'http://example.com/x'}}\n"
        + "      - {id: b, type: webhook, request: {url: 'https://169.254.169.254/latest/meta-data'}}\n"
        + "      - {id: c, type: webhook, request: {url: 'https://10.0.0.8/'}}\n"
        + "      - {id: d, type: webhook, request: {url: 'https://{{ context.host }}/'}}\n"
        + "      - {id: e, type: webhook, request: {url: 'https://2852039166/'}}\n",
        [
            "config.yaml:9:42: pipelines.p.stages.0.request.url: a webhook address is https:// (got 'http://example.com/x')",
            "config.yaml:10:42: pipelines.p.stages.1.request.url: a webhook may not call '169.254.169.254': a private, "
            "loopback, link-local or metadata address",
            "config.yaml:11:42: pipelines.p.stages.2.request.url: a webhook may not call '10.0.0.8': a private, "
            "loopback, link-local or metadata address",
            "config.yaml:12:42: pipelines.p.stages.3.request.url: a webhook address names its host literally "
            "(templates only after the host)",
            "config.yaml:13:42: pipelines.p.stages.4.request.url: a webhook address writes an IP address in dotted "
            "decimal (got '2852039166')",
        ],
    ),
    (
        "a loop of transitions with no bound",
        HEAD
        + "      - {id: a, type: agent, agent: feat-dev}\n"
        + "      - {id: b, type: agent, agent: pr-review, on_complete: a}\n",
        [
            "config.yaml:10:48: pipelines.p.stages.1.on_complete: the stages loop (a -> b -> a) with no bound: loop "
            "back through a gate's on_fail (goto, max_iterations) so the run cannot go round forever"
        ],
    ),
    (
        "expected outputs an agent cannot report, or named twice",
        HEAD
        + "      - {id: a, type: agent, agent: feat-dev, expected_outputs: ['pr number', ok]}\n"
        + "      - {id: b, type: webhook, request: {url: 'https://example.com/'}, expected_outputs: ['9x']}\n"
        + "      - {id: c, type: agent, agent: feat-dev, expected_outputs: [ok, ok]}\n",
        [
            "config.yaml:9:66: pipelines.p.stages.0.expected_outputs.0: an output name is a letter, then letters, "
            "digits, '_' and '-' (got 'pr number'): the keys an agent can report",
            "config.yaml:10:91: pipelines.p.stages.1.expected_outputs.0: an output name is a letter, then letters, "
            "digits, '_' and '-' (got '9x'): the keys an agent can report",
            "config.yaml:11:47: pipelines.p.stages.2.expected_outputs: 'ok' is named twice",
        ],
    ),
    (
        "file_exists paths that leave the repository, or are globs; a command check",
        HEAD
        + "      - id: g\n        type: gate\n        conditions:\n"
        + "          - {check: file_exists, paths: ['../../collaborators/x', 'docs/./a', '/etc/passwd', 'a%2e', 'src/*.py']}\n"
        + "      - id: h\n        type: gate\n        conditions:\n"
        + "          - {check: file_exists, paths: [README.md]}\n"
        + "          - {check: command, run: make test}\n",
        [
            "config.yaml:12:42: pipelines.p.stages.0.conditions.0.paths.0: a path is names joined by '/', without an "
            "empty, '.' or '..' part (got '../../collaborators/x'): it is read inside the repository only",
            "config.yaml:12:67: pipelines.p.stages.0.conditions.0.paths.1: a path is names joined by '/', without an "
            "empty, '.' or '..' part (got 'docs/./a'): it is read inside the repository only",
            "config.yaml:12:79: pipelines.p.stages.0.conditions.0.paths.2: a path is relative to the repository's "
            "root, without a leading '/' (got '/etc/passwd')",
            "config.yaml:12:94: pipelines.p.stages.0.conditions.0.paths.3: a path of the repository may not hold "
            "'%' (an escape in the address it is read at) (got 'a%2e')",
            "config.yaml:12:102: pipelines.p.stages.0.conditions.0.paths.4: a path of the repository may not hold "
            "'*' (a glob: file_exists names paths) (got 'src/*.py')",
            f"config.yaml:17:14: pipelines.p.stages.1.conditions.1.check: {COMMAND_PROBLEM}",
        ],
    ),
    (
        "an unknown human group",
        HEAD + "      - {id: h, type: human, human: {from: maintainer}}\n",
        [
            "config.yaml:9:38: pipelines.p.stages.0.human.from: unknown human group 'maintainer' "
            "(did you mean 'maintainers'?) (define it under human_groups)"
        ],
    ),
]


@pytest.mark.parametrize(("name", "pipelines_yaml", "expected"), CASES, ids=[case[0] for case in CASES])
def test_broken_pipelines_are_refused_at_their_line(
    name: str, pipelines_yaml: str, expected: list[str]
) -> None:
    assert problems_of(pipelines_yaml) == expected


# --- bounds (issue 30, item 6) -------------------------------------------------------------------


def _agent_stages(count: int, prefix: str = "s") -> str:
    return "".join(f"      - {{id: {prefix}{i}, type: agent, agent: feat-dev}}\n" for i in range(count))


def _chain(length: int) -> str:
    """Pipelines p0 -> p1 -> ... -> p<length>: p0 triggered, each calling the next."""
    parts = ["pipelines:\n"]
    for i in range(length + 1):
        trigger = "    trigger: {event: issues.opened}\n" if i == 0 else ""
        stage = (
            f"      - {{id: call, type: pipeline, pipeline: p{i + 1}}}\n"
            if i < length
            else "      - {id: work, type: agent, agent: feat-dev}\n"
        )
        parts.append(f"  p{i}:\n{trigger}    stages:\n{stage}")
    return "".join(parts)


def _wide(pipelines: int, stages: int) -> str:
    """A triggered pipeline calling ``pipelines`` sub-pipelines of ``stages`` stages each."""
    calls = "".join(f"      - {{id: c{i}, type: pipeline, pipeline: sub{i}}}\n" for i in range(pipelines))
    subs = "".join(f"  sub{i}:\n    stages:\n{_agent_stages(stages)}" for i in range(pipelines))
    return f"pipelines:\n  top:\n    trigger: {{event: issues.opened}}\n    stages:\n{calls}{subs}"


BOUNDS: list[tuple[str, str, str]] = [
    (
        "MAX_PIPELINES",
        "pipelines:\n"
        + "".join(
            f"  p{i}:\n    stages: [{{id: a, type: agent, agent: feat-dev}}]\n"
            for i in range(MAX_PIPELINES + 1)
        ),
        f"config.yaml:5:1: pipelines: {MAX_PIPELINES + 1} pipelines, over the limit of {MAX_PIPELINES} (MAX_PIPELINES)",
    ),
    (
        "MAX_STAGES",
        HEAD + _agent_stages(MAX_STAGES + 1),
        f"config.yaml:8:5: pipelines.p.stages: {MAX_STAGES + 1} stages, over the limit of {MAX_STAGES} (MAX_STAGES)",
    ),
    (
        "MAX_PARALLEL_BRANCHES",
        HEAD
        + "      - id: fan\n        type: parallel\n        branches:\n"
        + "".join(f"          - {{id: b{i}, agent: feat-dev}}\n" for i in range(MAX_PARALLEL_BRANCHES + 1)),
        f"config.yaml:11:9: pipelines.p.stages.0.branches: {MAX_PARALLEL_BRANCHES + 1} branches, over the limit of "
        f"{MAX_PARALLEL_BRANCHES} (MAX_PARALLEL_BRANCHES)",
    ),
    (
        "MAX_GATE_CONDITIONS",
        HEAD
        + "      - id: g\n        type: gate\n        conditions:\n"
        + "".join("          - {check: no_changes_requested}\n" for _ in range(MAX_GATE_CONDITIONS + 1)),
        f"config.yaml:11:9: pipelines.p.stages.0.conditions: {MAX_GATE_CONDITIONS + 1} gate conditions, over the "
        f"limit of {MAX_GATE_CONDITIONS} (MAX_GATE_CONDITIONS)",
    ),
    (
        "MAX_ON_EVENTS",
        "pipelines:\n  p:\n    on_events:\n"
        + "".join(
            f"      {event}: {{action: cancel}}\n" for event in sorted(EVENT_NAMES)[: MAX_ON_EVENTS + 1]
        )
        + "    stages: [{id: a, type: agent, agent: feat-dev}]\n",
        f"config.yaml:7:5: pipelines.p.on_events: {MAX_ON_EVENTS + 1} event handlers, over the limit of "
        f"{MAX_ON_EVENTS} (MAX_ON_EVENTS)",
    ),
    (
        "MAX_NESTING_DEPTH",
        _chain(MAX_NESTING_DEPTH + 1),
        f"config.yaml:9:36: pipelines.p0.stages.0.pipeline: sub-pipelines nest {MAX_NESTING_DEPTH + 1} levels deep "
        f"from here, over the limit of {MAX_NESTING_DEPTH} (MAX_NESTING_DEPTH)",
    ),
    (
        "MAX_EXPANDED_STAGES",
        _wide(8, 30),
        f"config.yaml:6:3: pipelines.top: runs 248 stages once its sub-pipelines are expanded, over the limit of "
        f"{MAX_EXPANDED_STAGES} (MAX_EXPANDED_STAGES)",
    ),
    (
        "MAX_RETRIES",
        HEAD + "      - {id: a, type: agent, agent: feat-dev, on_error: {retry: 6}}\n",
        "config.yaml:9:58: pipelines.p.stages.0.on_error.retry: 6 retries, over the limit of 5 (MAX_RETRIES)",
    ),
    (
        "MAX_ITERATIONS",
        HEAD
        + "      - {id: a, type: agent, agent: feat-dev}\n"
        + "      - {id: g, type: gate, any_of: [{check: ci_status}], on_fail: {goto: a, max_iterations: 11}}\n",
        "config.yaml:10:78: pipelines.p.stages.1.on_fail.max_iterations: 11 iterations, over the limit of 10 (MAX_ITERATIONS)",
    ),
    (
        "MAX_EXTENSIONS",
        HEAD + "      - {id: a, type: agent, agent: feat-dev, on_timeout: {extend: 1d, max_extensions: 6}}\n",
        "config.yaml:9:72: pipelines.p.stages.0.on_timeout.max_extensions: 6 extensions, over the limit of 5 (MAX_EXTENSIONS)",
    ),
    (
        "MAX_REMINDERS",
        HEAD
        + "      - {id: h, type: human, human: {notify: {reminder: {interval: 1h, max_reminders: 11}}}}\n",
        "config.yaml:9:72: pipelines.p.stages.0.human.notify.reminder.max_reminders: 11 reminders, over the limit of 10 (MAX_REMINDERS)",
    ),
    (
        "MIN_REMINDER_INTERVAL",
        HEAD + "      - {id: h, type: human, human: {notify: {reminder: {interval: 59m}}}}\n",
        "config.yaml:9:58: pipelines.p.stages.0.human.notify.reminder.interval: 59m is under the floor of 1h (MIN_REMINDER_INTERVAL)",
    ),
    (
        "MAX_HUMAN_COUNT",
        HEAD + "      - {id: h, type: human, human: {count: 11}}\n",
        "config.yaml:9:38: pipelines.p.stages.0.human.count: 11 completions, over the limit of 10 (MAX_HUMAN_COUNT)",
    ),
    (
        "MAX_STAGE_TIMEOUT",
        HEAD + "      - {id: a, type: agent, agent: feat-dev, timeout: 8d}\n",
        "config.yaml:9:47: pipelines.p.stages.0.timeout: 8d is over the limit of 7d (MAX_STAGE_TIMEOUT)",
    ),
    (
        "MIN_DURATION",
        HEAD + "      - {id: d, type: delay, duration: 0s}\n",
        "config.yaml:9:30: pipelines.p.stages.0.duration: 0s is under the floor of 1s (MIN_DURATION)",
    ),
    (
        "MIN_POLL_INTERVAL",
        HEAD + "      - {id: d, type: delay, duration: 1h, poll: {check: ci_status, interval: 1s}}\n",
        "config.yaml:9:69: pipelines.p.stages.0.poll.interval: 1s is under the floor of 10s (MIN_POLL_INTERVAL)",
    ),
    (
        "MAX_RUN_TIME",
        "pipelines:\n  p:\n    timeout: 31d\n    stages: [{id: a, type: agent, agent: feat-dev}]\n",
        "config.yaml:7:5: pipelines.p.timeout: 31d is over the limit of 30d (MAX_RUN_TIME)",
    ),
    (
        "MAX_ID_LENGTH",
        HEAD + f"      - {{id: {'a' * 65}, type: agent, agent: feat-dev}}\n",
        "config.yaml:9:10: pipelines.p.stages.0.id: an id is at most 64 characters (MAX_ID_LENGTH); this one has 65",
    ),
    (
        "MAX_EXPECTED_OUTPUTS",
        HEAD
        + "      - {id: a, type: agent, agent: feat-dev, expected_outputs: ["
        + ", ".join(f"o{i}" for i in range(21))
        + "]}\n",
        "config.yaml:9:47: pipelines.p.stages.0.expected_outputs: 21 expected outputs, over the limit of 20 "
        "(MAX_EXPECTED_OUTPUTS)",
    ),
    (
        "MAX_OUTPUT_NAME_LENGTH",
        HEAD
        + f"      - {{id: a, type: webhook, request: {{url: 'https://example.com/'}}, expected_outputs: [{'o' * 65}]}}\n",
        "config.yaml:9:91: pipelines.p.stages.0.expected_outputs.0: an output name is at most 64 characters "
        "(MAX_OUTPUT_NAME_LENGTH); this one has 65",
    ),
    (
        "MAX_PATH_LENGTH",
        HEAD + f"      - {{id: g, type: gate, conditions: [{{check: file_exists, paths: [{'a' * 513}]}}]}}\n",
        "config.yaml:9:71: pipelines.p.stages.0.conditions.0.paths.0: a path is at most 512 characters "
        "(MAX_PATH_LENGTH); this one has 513",
    ),
    (
        "MAX_GATE_PATHS",
        HEAD
        + "      - id: g\n        type: gate\n        conditions:\n"
        + "".join(f"          - {{check: file_exists, paths: [a{i}, b{i}, c{i}]}}\n" for i in range(7)),
        "config.yaml:11:9: pipelines.p.stages.0.conditions: its file_exists checks name 21 paths, over the "
        "limit of 20 (MAX_GATE_PATHS)",
    ),
    (
        "MAX_TEMPLATE_CHARS",
        HEAD
        + f"      - {{id: a, type: agent, agent: feat-dev, action: '{{{{ context.x }}}}{'x' * 2000}'}}\n",
        "config.yaml:9:47: pipelines.p.stages.0.action: template is 2015 characters, over the limit of 2000 for a "
        "template (MAX_TEMPLATE_CHARS)",
    ),
    (
        "MAX_TEMPLATE_NESTING",
        HEAD
        + f"      - {{id: a, type: agent, agent: feat-dev, action: '{{{{ {'(' * 20}1{')' * 20} }}}}'}}\n",
        "config.yaml:9:47: pipelines.p.stages.0.action: template nested more than 16 levels deep (MAX_TEMPLATE_NESTING)",
    ),
    (
        "MAX_CONDITION_DEPTH",
        HEAD
        + "      - id: a\n        type: agent\n        agent: feat-dev\n        skip_to: b\n"
        + "        condition: {any: [{all: [{any: [{all: [{any: [{labels_include: x}]}]}]}]}]}\n"
        + "      - {id: b, type: agent, agent: feat-dev}\n",
        "config.yaml:13:48: pipelines.p.stages.0.condition.any.0.all.0.any.0.all.0: conditions nest more than 4 levels "
        "deep (MAX_CONDITION_DEPTH)",
    ),
]


@pytest.mark.parametrize(("bound", "pipelines_yaml", "expected"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_each_bound_is_refused_at_its_line(bound: str, pipelines_yaml: str, expected: str) -> None:
    assert expected in problems_of(pipelines_yaml)


@pytest.mark.parametrize(
    ("bound", "pipelines_yaml"),
    [
        ("MAX_STAGES", HEAD + _agent_stages(MAX_STAGES)),
        ("MAX_NESTING_DEPTH", _chain(MAX_NESTING_DEPTH)),
        ("MAX_EXPANDED_STAGES", _wide(8, 24)),
    ],
)
def test_at_a_bound_is_still_accepted(bound: str, pipelines_yaml: str) -> None:
    assert parse_files(files_with(pipelines_yaml)).config.pipelines


def test_every_bound_has_a_test_and_a_line_in_the_docs() -> None:
    tested = {b[0] for b in BOUNDS}
    documented = (REPO_ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8")

    untested = (
        set(LIMITS)
        - tested
        - {"DEFAULT_RUN_TIME", "MAX_CONDITION_ITEMS", "MAX_LIFECYCLE_ACTIONS", "MAX_RENDERED_CHARS"}
    )
    assert untested == set()
    for name, value in LIMITS.items():
        assert f"| `{name}` | {value} |" in documented, name


# --- squadron validate, end to end ----------------------------------------------------------------


def test_validate_reports_every_pipeline_problem_with_line_and_column(tmp_path: Path) -> None:
    squadron = tmp_path / ".squadron"
    squadron.mkdir()
    (squadron / "config.yaml").write_text(
        ROLES
        + HEAD
        + "      - {id: a, type: agent, agent: nobody, on_complete: b}\n"
        + "      - {id: g, type: gate, conditions: [{check: magic}]}\n"
        + "      - {id: w, type: webhook, request: {url: 'https://127.0.0.1/'}}\n",
        encoding="utf-8",
    )
    (squadron / "agents").mkdir()
    (squadron / "agents" / "test-coverage.md").write_text(AGENTS["agents/test-coverage.md"], encoding="utf-8")
    out = io.StringIO()

    status = main(["validate", str(squadron)], out=out)

    lines = out.getvalue().splitlines()
    assert status != 0
    assert lines == [
        f"{squadron}/config.yaml:9:30: pipelines.p.stages.0.agent: unknown role 'nobody' (a key of roles)",
        f"{squadron}/config.yaml:9:45: pipelines.p.stages.0.on_complete: unknown stage 'b': the pipeline's stages are a, g, w",
        f"{squadron}/config.yaml:10:43: pipelines.p.stages.1.conditions.0.check: unknown check 'magic': one of command, "
        "file_exists, pr_approvals_met, ci_status, label_present, no_changes_requested, human_approved, branch_up_to_date",
        f"{squadron}/config.yaml:11:42: pipelines.p.stages.2.request.url: a webhook may not call '127.0.0.1': a "
        "private, loopback, link-local or metadata address",
        f"4 problems in {squadron}",
    ]


def test_validate_accepts_the_reference_pipeline_and_says_so(tmp_path: Path) -> None:
    squadron = tmp_path / ".squadron"
    (squadron / "agents").mkdir(parents=True)
    (squadron / "config.yaml").write_text(
        ROLES + (HERE / "reference" / "pr-lifecycle.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (squadron / "agents" / "test-coverage.md").write_text(AGENTS["agents/test-coverage.md"], encoding="utf-8")
    out = io.StringIO()

    status = main(["validate", str(squadron)], out=out)

    assert status == 0, out.getvalue()
    assert ("  pipelines: 1 (pr-lifecycle: 5 stages, on pull_request.opened)") in out.getvalue().splitlines()


def test_a_bare_on_fail_is_bounded_like_the_reference_object_form() -> None:
    pipelines = parse_files(
        files_with(
            HEAD
            + "      - {id: a, type: agent, agent: feat-dev}\n"
            + "      - {id: g, type: gate, any_of: [{check: ci_status}], on_fail: a}\n"
        )
    ).config.pipelines
    gate = pipelines["p"].stages[1]

    assert isinstance(gate, GateStage)
    assert gate.fail_transition() == OnFail(goto="a", max_iterations=3, then="escalate")


def test_a_list_past_its_bound_is_refused_by_its_count_alone() -> None:
    """A thousand broken stages are one problem, found before any of them is validated."""
    broken = "".join(
        f"      - {{id: s{i}, type: agent, agent: nobody, action: '{{{{ x }}}}'}}\n" for i in range(1000)
    )

    assert problems_of(HEAD + broken) == [
        f"config.yaml:8:5: pipelines.p.stages: 1000 stages, over the limit of {MAX_STAGES} (MAX_STAGES)"
    ]
