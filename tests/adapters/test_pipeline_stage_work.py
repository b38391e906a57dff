"""The router carries out a compiled pipeline's stages on moto's Step Functions (issue 30): gates
judged against what GitHub says now (the real GitHub client, over a stand-in of api.github.com),
actions as keyed effects through the router's outbox, webhooks through the real adapter (a
stand-in network and name service), and each task answered once.

Runs go on moto's interpreter (tests/support/step_functions.py); the router's side is
:class:`~squadron.shell.pipelines.PipelineTasks` as the dispatcher calls it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import GitHubHttp, Throttle
from squadron.adapters.webhooks import Webhooks
from squadron.config import parse_files
from squadron.domain.permissions import Caller
from squadron.domain.pipeline_wire import (
    TASK_KIND,
    PipelineTask,
    StageSucceeded,
    execution_name,
    parse_task,
    run_input,
)
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.domain.pipelines.work import Where
from squadron.shell.dispatch import Dispatcher
from squadron.shell.pipeline_facts import GitHubFacts
from squadron.shell.pipelines import PipelineTasks, carry_key
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.pipeline_tasks import outbox_over, pipeline_tasks
from tests.support.step_functions import Stack, step_functions, wait_for
from tests.support.world import World
from tests.unit.pipelines.test_pipeline_config import files_with

REPO = "octo/app"


@dataclass
class PullRequestOnGitHub:
    """api.github.com for one pull request, #7: what a gate reads (labels, files, reviews, checks)."""

    labels: list[str] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    #: Each collaborator's repository permission (anyone else: 404, no access).
    permissions: dict[str, str] = field(default_factory=lambda: {"alice": "write"})
    #: The head's repository (a fork's, or octo/app's own).
    head_repo: str = REPO
    reads: list[str] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.reads.append(f"{request.method} {path}")
        if request.method != "GET":
            return httpx.Response(405, json={"message": "read only"})
        head = "c" * 40
        answers: dict[str, Any] = {
            f"/repos/{REPO}/issues/7": {
                "number": 7,
                "state": "open",
                "labels": [{"name": name} for name in self.labels],
                "pull_request": {"url": "..."},
            },
            f"/repos/{REPO}/pulls/7": {
                "number": 7,
                "state": "open",
                "user": {"login": "dev", "type": "User"},
                "head": {"sha": head, "repo": {"full_name": self.head_repo}},
                "base": {"ref": "main", "repo": {"full_name": REPO}},
                "mergeable_state": "clean",
            },
            f"/repos/{REPO}/pulls/7/files": [{"filename": "src/app.py"}],
            f"/repos/{REPO}/pulls/7/reviews": self.reviews,
            f"/repos/{REPO}/commits/{head}/check-runs": {
                "total_count": len(self.checks),
                "check_runs": self.checks,
            },
            f"/repos/{REPO}/commits/{head}/status": {"state": "success", "statuses": self.statuses},
            **{
                f"/repos/{REPO}/collaborators/{login}/permission": {
                    "permission": {"maintain": "write", "triage": "read"}.get(permission, permission),
                    "role_name": permission,
                }
                for login, permission in self.permissions.items()
            },
        }
        if path not in answers:
            return httpx.Response(404, json={"message": f"no route {path}"})
        return httpx.Response(200, json=answers[path])


class ClientFor:
    def __init__(self, github: PullRequestOnGitHub) -> None:
        self.http = GitHubHttp(
            transport=httpx.MockTransport(github.handle),
            sleep=lambda s: None,
            throttle=Throttle(sleep=lambda s: None, mutation_spacing=0.0),
        )

    def client(self, installation_id: int | None, repo_full_name: str) -> GitHubClient:
        return GitHubClient(
            http=self.http,
            token=lambda: "t",
            installation_id=installation_id or 1,
            repo=repo_full_name,
            caller=Caller.framework(),
        )


@dataclass
class Hooks:
    """The internet as a webhook sees it: a name service and the servers behind the addresses."""

    names: dict[str, list[str]] = field(default_factory=lambda: {"hooks.example.com": ["93.184.216.34"]})
    calls: list[httpx.Request] = field(default_factory=list)
    status: int = 202

    def resolve(self, host: str, port: int) -> list[str]:
        if host not in self.names:
            raise OSError(f"unknown host {host}")
        return self.names[host]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        return httpx.Response(self.status, json={"ok": True})


@dataclass
class Router:
    world: World
    github: PullRequestOnGitHub
    hooks: Hooks
    tasks: PipelineTasks
    dispatch: Dispatcher


def router(stack: Stack, app_github: Any = None) -> Router:
    world = World()
    github = PullRequestOnGitHub()
    hooks = Hooks()

    tasks = pipeline_tasks(
        stack,
        world,
        outbox=outbox_over(world, app_github),
        facts=GitHubFacts(ClientFor(github)),
        webhooks=Webhooks(resolve=hooks.resolve, transport=httpx.MockTransport(hooks.handle)),
        where=lambda repository_id: Where(REPO, 77) if repository_id == 42 else None,
    )
    return Router(world, github, hooks, tasks, Dispatcher(world.router, pipeline_tasks=tasks))


def started(stack: Stack, text: str, name: str = "p") -> str:
    pipelines = parse_files(files_with(text)).config.pipelines
    compiled = compile_pipeline(name, pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, name, compiled.definition).version_arn
    return stack.pipelines.start(
        version, execution_name("d-1", name), run_input(42, 7, {"n": 7})
    ).execution_arn


def drive(
    stack: Stack, r: Router, arn: str, *, most: int = 20, deliveries: int = 1
) -> list[tuple[str, dict[str, Any]]]:
    """Hand each task the run puts on the queue to the router (``deliveries`` times: SQS delivers
    it again) until the run ends; (stage, summary of its last delivery)."""
    handled: list[tuple[str, dict[str, Any]]] = []

    def next_message() -> dict[str, Any] | str | None:
        got = stack.sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=1).get("Messages", [])
        if got:
            stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=got[0]["ReceiptHandle"])
            message: dict[str, Any] = got[0]
            return message
        return "ended" if stack.sfn.describe_execution(executionArn=arn)["status"] != "RUNNING" else None

    for _ in range(most):
        message = wait_for("a task or the run's end", next_message)
        if message == "ended":
            break
        assert isinstance(message, dict)
        for _attempt in range(deliveries):
            summary = r.dispatch.handle(message["Body"], message["MessageId"])
        handled.append((summary["pipeline_task"], summary))
    return handled


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


GATE_ACTION_WEBHOOK = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: approved
        type: gate
        conditions:
          - {check: pr_approvals_met, count: 1}
          - {check: no_changes_requested}
          - {check: ci_status}
      - id: say
        type: action
        action: comment
        config: {message: "Approved: run {{ trigger.n }}"}
      - id: tell
        type: webhook
        request:
          url: "https://hooks.example.com/ci/{{ trigger.n }}"
          body: {pr: "{{ trigger.n }}"}
        expect: {status: 202}
    on_complete: [{type: label, add: shipped}]
"""


def test_gate_then_action_then_webhook_runs_to_success(stack: Stack) -> None:
    r = router(stack)
    r.github.reviews = [{"user": {"login": "alice", "type": "User"}, "state": "APPROVED"}]
    r.github.checks = [{"name": "ci/test", "status": "completed", "conclusion": "success"}]
    arn = started(stack, GATE_ACTION_WEBHOOK)

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held
    assert [stage for stage, _ in handled] == ["approved", "say", "tell", "__complete__"]
    assert all(summary["answered"] for _, summary in handled)
    # the action's comment and the run's on_complete label, through the outbox, once each
    assert [(n, body.split("\n")[0]) for _, n, body, _ in r.world.github.comments] == [(7, "Approved: run 7")]
    assert r.world.github.labelled == [(REPO, 7, ("shipped",))]
    # the webhook went to the address checked, named as the host it was written with
    (call,) = r.hooks.calls
    assert (call.url.host, call.headers["host"], json.loads(call.content)) == (
        "93.184.216.34",
        "hooks.example.com",
        {"pr": 7},
    )
    assert call.extensions["sni_hostname"] == "hooks.example.com"
    # the gate only read GitHub
    assert all(read.startswith("GET ") for read in r.github.reads)


FAILING_GATE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - {id: fix, type: action, action: add_label, config: {label: needs-fix}}
      - id: approved
        type: gate
        conditions: [{check: pr_approvals_met, count: 1}]
        on_fail: {goto: fix, max_iterations: 2, then: escalate}
"""


def test_a_failing_gate_loops_back_max_iterations_then_escalates(stack: Stack) -> None:
    r = router(stack)
    r.github.reviews = [{"user": {"login": "alice", "type": "User"}, "state": "CHANGES_REQUESTED"}]
    arn = started(stack, FAILING_GATE)

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert (held["status"], held["error"]) == ("FAILED", "Squadron.Escalated")
    assert [stage for stage, _ in handled] == [
        "fix",
        "approved",
        "fix",
        "approved",
        "fix",
        "approved",
        "__escalate__",
    ]
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    outputs = [
        json.loads(e["taskSucceededEventDetails"]["output"])
        for e in history
        if e["type"] == "TaskSucceeded" and "passed" in e["taskSucceededEventDetails"]["output"]
    ]
    assert outputs[0] == {"passed": False, "failing": ["pr_approvals_met: #7 has 0 approval(s), needs 1"]}
    # each entry of the action stage is its own decision: the label three times, then the escalation's
    assert [labels for _, _, labels in r.world.github.labelled] == [("needs-fix",)] * 3 + [("needs-human",)]
    assert "escalated to a human" in r.world.github.comments[-1][2]


def test_a_task_delivered_twice_is_carried_out_and_answered_once(stack: Stack) -> None:
    r = router(stack)
    arn = started(
        stack,
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        '      - {id: say, type: action, action: comment, config: {message: "hello"}}\n'
        "      - {id: wait, type: gate, conditions: [{check: label_present, label: go}]}\n",
    )
    (message,) = stack.messages(1)

    first = r.dispatch.handle(message["Body"], message["MessageId"])
    again = r.dispatch.handle(message["Body"], message["MessageId"])  # SQS delivers it again

    assert first["answered"] is True
    assert (again["answered"], again.get("once")) == (False, "answered already")
    assert len(r.world.github.comments) == 1
    (gate,) = stack.messages(1)  # the run went on to the gate
    task = parse_task(gate["Body"])
    answered = [
        e for e in stack.sfn.get_execution_history(executionArn=arn)["events"] if e["type"] == "TaskSucceeded"
    ]
    assert len(answered) == 1
    assert task is not None and task.stage == "wait"


def test_an_answer_lost_after_its_effects_is_sent_by_the_redelivery_without_repeating_them(
    stack: Stack,
) -> None:
    """The router stops after carrying out the comment, before answering (an answer call that
    fails): the redelivered task answers from what was kept, and comments nothing more."""
    r = router(stack)
    arn = started(
        stack,
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        '      - {id: say, type: action, action: comment, config: {message: "hello"}}\n',
    )
    (message,) = stack.messages(1)
    real = r.tasks.answers

    class Down:
        def answer(self, token: str, answer: Any) -> Any:
            raise RuntimeError("Step Functions unreachable")

    r.tasks.answers = Down()
    with pytest.raises(RuntimeError):
        r.dispatch.handle(message["Body"], message["MessageId"])
    r.tasks.answers = real
    again = r.dispatch.handle(message["Body"], message["MessageId"])

    assert again["answered"] is True
    assert len(r.world.github.comments) == 1
    assert stack.finished(arn)["status"] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("names", "reason"),
    [
        ({"hooks.example.com": ["169.254.169.254"]}, "resolves to 169.254.169.254 is a private"),
        # a hostile DNS answer mixing a public address with the metadata service's
        ({"hooks.example.com": ["93.184.216.34", "169.254.169.254"]}, "169.254.169.254"),
        ({"hooks.example.com": ["::ffff:127.0.0.1"]}, "::ffff:127.0.0.1"),
        ({}, "does not resolve"),
    ],
)
def test_a_webhook_to_an_internal_address_fails_the_stage_with_the_reason(
    stack: Stack, names: dict[str, list[str]], reason: str
) -> None:
    r = router(stack)
    r.hooks.names = names
    arn = started(
        stack,
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        "      - {id: tell, type: webhook, request: {url: 'https://hooks.example.com/x'}}\n",
    )

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert (held["status"], held["error"]) == ("FAILED", "Squadron.Failed")
    assert [stage for stage, _ in handled] == ["tell"]
    assert r.hooks.calls == []  # nothing was sent anywhere
    (failed,) = [
        e["taskFailedEventDetails"]
        for e in stack.sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskFailed"
    ]
    assert failed["error"] == "Squadron.StageFailed"
    assert re.search(re.escape(reason), failed["cause"]), failed["cause"]


def test_an_agent_stage_is_refused_with_the_reason_where_no_agent_stages_are_wired(stack: Stack) -> None:
    r = router(stack)
    arn = started(
        stack,
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        "      - {id: build, type: agent, agent: test-coverage}\n",
    )
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "FAILED"
    (failed,) = [
        e["taskFailedEventDetails"]
        for e in stack.sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskFailed"
    ]
    assert failed["error"] == "Squadron.StageRejected"
    assert "no agent stages are wired" in failed["cause"]


def test_a_marker_planted_in_run_data_is_posted_inert(stack: Stack) -> None:
    """The trigger's data (what a person wrote in a pull request, say) is templated into the run's
    closing comment: the App posts it through its own client, and the hidden effect marker it
    carries is escaped — it cannot pass for one of the framework's."""
    fake = FakeGitHub(
        issues={REPO: {7: {"number": 7, "state": "open", "labels": [], "title": "t", "body": ""}}}
    )
    private, _ = app_private_key()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    app = AppGitHub(GitHubApp(app_id=42, http=http, private_key=lambda: private), bot_login="squadron[bot]")
    r = router(stack, app)
    pipelines = parse_files(
        files_with(
            "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
            "      - {id: g, type: gate, conditions: [{check: label_present, label: go}]}\n"
            '    on_error: [{type: comment, body: "failed: {{ trigger.title }}"}]\n'
        )
    ).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, "p", compiled.definition).version_arn
    planted = "<!-- squadron:effect 0123456789abcdef01234567 -->"
    arn = stack.pipelines.start(
        version, execution_name("d-1", "p"), run_input(42, 7, {"title": planted})
    ).execution_arn

    handled = drive(stack, r, arn)

    assert [stage for stage, _ in handled] == ["g", "__fail__"]
    assert fake.issues is not None
    (posted,) = fake.issues[REPO][7]["comments_made"]
    assert "failed: &lt;!-- squadron:effect 0123456789abcdef01234567" in posted
    assert planted not in posted
    assert posted.count("<!--") == 1  # the App's own marker of this effect, last


#: An action stage and a webhook stage, each with a timeout its extension may give more time to,
#: then an action the run ends with (which reads the first stage's outputs).
LATE_STAGES = {
    "an action stage": """
      - id: first
        type: action
        action: comment
        config: {message: "Deployed {{ trigger.n }}"}
        timeout: 1s
        on_timeout: {extend: 1h, max_extensions: 1, then: fail}""",
    "a webhook stage": """
      - id: first
        type: webhook
        request: {url: "https://hooks.example.com/deploy/{{ trigger.n }}"}
        expect: {status: 202}
        timeout: 1s
        on_timeout: {extend: 1h, max_extensions: 1, then: fail}""",
}
LATE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:STAGE
      - {id: last, type: action, action: add_label, config: {label: done}}
"""


class StopsOnceAnswered:
    """The registry, and a router that stops right after its late answer was sent, as it keeps
    that answer for the stage's next entry (the message is delivered again)."""

    def __init__(self, registry: Any) -> None:
        self.record_write = registry.record_write
        self.stopped = False

    def __call__(self, scope: str, key: str, result: Any) -> None:
        if not self.stopped and isinstance(result, dict) and "from" in result:
            self.stopped = True
            raise RuntimeError("the router stopped after the answer was sent")
        self.record_write(scope, key, result)


@pytest.mark.parametrize("stops", [False, True], ids=["", "the router stops after the late answer"])
@pytest.mark.parametrize("stage", list(LATE_STAGES.values()), ids=list(LATE_STAGES))
def test_a_stage_carried_out_after_its_timeout_ran_out_is_not_carried_out_again_by_its_extension(
    stack: Stack, stage: str, stops: bool
) -> None:
    """The router reached the stage's task only after its timeout ran out (a backlog): what it
    carried out then (the comment, the webhook's call) is answered to a task that is over, and
    the stage's extension enters it again. That entry takes the earlier answer: nothing is
    carried out twice, and the run goes on from there (also when the router stopped right after
    the late answer, and the task was delivered again)."""
    r = router(stack)
    arn = started(stack, LATE.replace("STAGE", stage))
    (first,) = stack.messages(1)

    def extended() -> bool:
        history = stack.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        return any(e.get("stateEnteredEventDetails", {}).get("name") == "first.extended" for e in history)

    wait_for("the stage's timeout to run out", extended)
    if stops:
        r.world.registry.record_write = StopsOnceAnswered(r.world.registry)  # type: ignore[method-assign, assignment]
        with pytest.raises(RuntimeError, match="stopped after the answer"):
            r.dispatch.handle(first["Body"], first["MessageId"])
    late = r.dispatch.handle(first["Body"], first["MessageId"])
    assert (late["answered"], late["gone"]) == (False, "TaskTimedOut")  # carried out, answered too late

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held
    assert [stage for stage, _ in handled] == ["first", "last"]
    assert handled[0][1]["answered"] is True
    # what the world got: the stage's effect once
    if "webhook" in stage:
        assert [call.url.path for call in r.hooks.calls] == ["/deploy/7"]
    else:
        assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments] == ["Deployed 7"]
    assert r.world.github.labelled == [(REPO, 7, ("done",))]


# (why, the stage's type and step, what the stage's carry holds, the entry asking, carried)
CARRIES: list[tuple[str, str, str, dict[str, str] | None, str, bool]] = [
    ("none kept: the entry carries its work out", "action", "stage", None, "e2", False),
    ("kept, not taken: this entry takes it", "action", "stage", {"from": "e1"}, "e2", True),
    ("a webhook's, not taken: taken", "webhook", "stage", {"from": "e1"}, "e2", True),
    (
        "taken by this entry (delivered again): taken again",
        "action",
        "stage",
        {"from": "e1", "taken": "e2"},
        "e2",
        True,
    ),
    (
        "taken by an earlier entry (a loop back): not",
        "action",
        "stage",
        {"from": "e1", "taken": "e2"},
        "e3",
        False,
    ),
    ("a gate's: gates are judged again", "gate", "stage", {"from": "e1"}, "e2", False),
    ("a notification's: not a stage's work", "action", "notify", {"from": "e1"}, "e2", False),
]


def stage_task(stage_type: str, step: str, minute: int) -> PipelineTask:
    """A task of stage ``first`` of one run, entered at ``minute`` (one entry of the stage)."""
    body = {
        "kind": TASK_KIND,
        "repository_id": 42,
        "issue_number": 7,
        "pipeline": "p",
        "definition": "ab" * 32,
        "execution_arn": "arn:aws:states:us-east-1:123456789012:execution:squadron-dev_42-p:run-1",
        "stage": "first",
        "stage_type": stage_type,
        "entered_at": f"2026-11-27T19:{minute:02d}:00+00:00",
        "task_token": "t" * 40,
        "step": step,
    }
    task = parse_task(json.dumps(body))
    assert task is not None
    return task


@pytest.mark.parametrize(
    ("stage_type", "step", "kept", "asking", "carried"), [c[1:] for c in CARRIES], ids=[c[0] for c in CARRIES]
)
def test_which_entry_takes_an_answer_found_gone(
    stage_type: str, step: str, kept: dict[str, str] | None, asking: str, carried: bool
) -> None:
    """An answer found gone (the stage's timeout ran out first) is taken by the stage's next entry
    (its extension) once: by that entry again when it is delivered again, never by a later one."""
    world = World()
    tasks = PipelineTasks(cast(Any, None), prefix="squadron-dev", claims=world.registry)
    entries = {
        name: stage_task(stage_type, step, minute) for minute, name in enumerate(("e1", "e2", "e3"), 1)
    }
    scope, carry = "pipeline-42", carry_key(entries["e1"])
    if kept is not None:
        world.registry.claim_write(scope, carry, world.now)
        recorded = {field: entries[name].entry for field, name in kept.items()}
        world.registry.record_write(scope, carry, {"answer": {"output": {"status": 202}}, **recorded})

    got = tasks._carried(entries[asking], world.registry, scope)

    assert got == (StageSucceeded(output={"status": 202}) if carried else None)
    if carried:
        held = world.registry.writes[(scope, carry)].result
        assert held is not None and held["taken"] == entries[asking].entry
    if stage_type == "gate" or step != "stage":
        assert world.registry.calls["claim_write"] == (1 if kept is not None else 0)  # nothing asked
