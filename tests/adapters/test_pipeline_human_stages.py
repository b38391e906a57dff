"""A pipeline's human stage, run for real on moto's Step Functions interpreter (issue 30, item 2):
the router keeps the stage waiting (its entry comment and assignment once), and the webhooks that
answer it — through the dispatcher, as the router's queue hands them over — complete it only when
a member of the stage's group with write access acts, each person once; its reminders and its
timeout are the state machine's own, carried out by the router.

The router's side is :class:`~squadron.shell.pipelines.PipelineTasks` with
:class:`~squadron.shell.human_stages.HumanStages` (tests/adapters/test_pipeline_stage_work.py
builds the rest: the registry and GitHub stand-ins, the outbox).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.config import parse_files
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import RUN_ESCALATED, PipelineTask, execution_name, parse_task, run_input
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.shell.human_stages import HumanStages
from tests.adapters.test_pipeline_stage_work import REPO, Router, drive, router, started
from tests.support.events import BOT, Events
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.step_functions import Stack, step_functions, wait_for
from tests.unit.pipelines.test_pipeline_config import files_with

#: The repository's human groups: carol is a member who only reads the repository.
GROUPS = {"maintainers": ("alice", "bob", "carol")}


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def waiting_router(stack: Stack, app_github: Any = None) -> Router:
    r = router(stack, app_github)
    r.world.github.permissions.update({"carol": "read", "dave": "write", "renovate[bot]": "write"})
    r.tasks.humans = HumanStages(
        stack.pipelines,
        r.world.registry,
        groups=lambda where: GROUPS,
        permission=r.world.github.permission,
        bot_login=BOT,
    )
    return r


EVENTS = Events(repo_id=42, full_name=REPO, installation_id=77)


def deliver(r: Router, event: EventEnvelope) -> dict[str, Any]:
    """``event`` as the router's queue hands it over (a webhook's envelope)."""
    return r.dispatch.handle(event.model_dump_json(), event.delivery_id)


def next_task(stack: Stack) -> tuple[PipelineTask, dict[str, Any]]:
    (message,) = stack.messages(1)
    task = parse_task(message["Body"])
    assert task is not None
    return task, message


def handle(r: Router, message: dict[str, Any]) -> dict[str, Any]:
    return r.dispatch.handle(message["Body"], message["MessageId"])


def succeeded(stack: Stack, arn: str) -> list[dict[str, Any]]:
    """The stage answers the run took (TaskSucceeded), oldest first."""
    events = stack.sfn.get_execution_history(executionArn=arn)["events"]
    return [
        json.loads(e["taskSucceededEventDetails"]["output"]) for e in events if e["type"] == "TaskSucceeded"
    ]


def pipeline(human: str, *, more: str = "", after: str = "") -> str:
    return (
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        f"      - id: ask\n        type: human\n        human: {human}\n{more}"
        + (
            after
            or "      - {id: said, type: action, action: comment, config: {message: \"by {{ stages.ask.by | join(', ') }}\"}}\n"
        )
    )


APPROVAL = (
    '{description: "Ship it?", from: maintainers, notify: {on_enter: "Please look at #{{ trigger.n }}"}}'
)


def test_entry_notifies_once_and_an_approval_by_a_member_moves_the_run_on(stack: Stack) -> None:
    r = waiting_router(stack)
    arn = started(stack, pipeline(APPROVAL))
    task, message = next_task(stack)
    assert (task.stage, task.stage_type) == ("ask", "human")

    first = handle(r, message)
    again = handle(r, message)  # SQS delivers the task again

    assert (first["answered"], first["outcome"]) == (False, "waiting")
    assert again.get("once") == "waiting already"
    (comment,) = r.world.github.comments
    assert comment[1] == 7 and comment[2].split("\n\n") == [
        "Pipeline `p`: stage `ask` waits for an approval from the human group `maintainers` "
        "(@alice, @bob, @carol).",
        "Ship it?",
        "Please look at #7",
    ]
    assert r.world.github.assigned == [(REPO, 7, ("alice", "bob", "carol"))]
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"

    approved = deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))

    assert approved["waiting"]["waits"] == [
        {
            "stage": "ask",
            "answered": True,
            "gone": None,
            "wait_for": "approval",
            "from": "maintainers",
            "by": ["alice"],
        }
    ]
    handled = drive(stack, r, arn)
    assert [stage for stage, _ in handled] == ["said"]
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED"
    assert json.loads(held["output"])["data"]["stages"]["ask"] == {
        "wait_for": "approval",
        "from": "maintainers",
        "by": ["alice"],
    }
    assert r.world.github.comments[-1][2] == "by alice"
    assert len(r.world.github.comments) == 2 and len(r.world.github.assigned) == 1


STRANGERS: list[tuple[str, EventEnvelope]] = [
    ("a stranger's approval", EVENTS.review(7, "feat/x", "approved", by="mallory")),
    ("a writer outside the group", EVENTS.review(7, "feat/x", "approved", by="dave")),
    ("a member who only reads", EVENTS.review(7, "feat/x", "approved", by="carol")),
    ("a member's comment, not an approval", EVENTS.comment(7, "approved, ship it", by="alice", on_pr=True)),
    ("a member's changes requested", EVENTS.review(7, "feat/x", "changes_requested", by="alice")),
    ("an approval of another pull request", EVENTS.review(8, "feat/x", "approved", by="alice")),
]


@pytest.mark.parametrize(("case", "event"), STRANGERS, ids=[c for c, _ in STRANGERS])
def test_what_is_no_approval_by_a_member_leaves_the_stage_waiting(
    stack: Stack, case: str, event: EventEnvelope
) -> None:
    r = waiting_router(stack)
    arn = started(stack, pipeline(APPROVAL))
    _, message = next_task(stack)
    handle(r, message)

    got = deliver(r, event)

    assert all(not each.get("answered") for each in got.get("waiting", {}).get("waits", []))
    assert succeeded(stack, arn) == []
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert [w.counted for w in r.world.registry.open_waits(42, 7)] == [()]
    # The stage still waits for a member: one approval by one completes it.
    deliver(r, EVENTS.review(7, "feat/x", "approved", by="bob"))
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"


def test_two_approvals_count_two_people_and_a_redelivered_one_counts_nobody_twice(stack: Stack) -> None:
    r = waiting_router(stack)
    arn = started(stack, pipeline("{from: maintainers, count: 2}"))
    _, message = next_task(stack)
    handle(r, message)
    by_alice = EVENTS.review(7, "feat/x", "approved", by="alice")

    deliver(r, by_alice)
    deliver(r, by_alice)  # the same delivery, redelivered
    deliver(r, EVENTS.review(7, "feat/x", "approved", by="ALICE"))  # alice again, another review

    assert [w.counted for w in r.world.registry.open_waits(42, 7)] == [("alice",)]
    assert succeeded(stack, arn) == []

    done = deliver(r, EVENTS.review(7, "feat/x", "approved", by="bob"))
    late = deliver(r, EVENTS.review(7, "feat/x", "approved", by="bob"))  # redelivered once answered

    assert done["waiting"]["waits"][0]["by"] == ["alice", "bob"]
    assert "waiting" not in late  # no wait is open: nothing is counted or answered again
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert succeeded(stack, arn)[0] == {"wait_for": "approval", "from": "maintainers", "by": ["alice", "bob"]}


def test_a_comment_wait_ignores_strangers_bots_and_the_app(stack: Stack) -> None:
    r = waiting_router(stack)
    arn = started(stack, pipeline("{from: maintainers, wait_for: comment, auto_assign: false}"))
    _, message = next_task(stack)
    handle(r, message)
    assert r.world.github.assigned == [] and r.world.github.comments == []  # no on_enter: nothing said

    for event in (
        EVENTS.comment(7, "/approve", by="mallory", on_pr=True),
        EVENTS.comment(7, "LGTM", by="renovate[bot]", on_pr=True),
        EVENTS.comment(7, "approved by the framework", by=BOT, on_pr=True),
    ):
        deliver(r, event)
    assert succeeded(stack, arn) == []

    deliver(r, EVENTS.comment(7, "fine by me", by="bob", on_pr=True))
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert succeeded(stack, arn)[0]["by"] == ["bob"]


def test_a_human_stage_that_times_out_notifies_the_group_and_escalates(stack: Stack) -> None:
    r = waiting_router(stack)
    arn = started(
        stack,
        pipeline(
            APPROVAL,
            more="        timeout: 1s\n"
            "        on_timeout: {notify: {target: maintainers, message: too late}, then: escalate}\n",
        ),
    )
    _, message = next_task(stack)
    handle(r, message)  # nobody answers: it times out

    handled = drive(stack, r, arn)

    assert [stage for stage, _ in handled] == ["ask.notify-end", "__escalate__"]
    held = stack.finished(arn)
    assert (held["status"], held["error"]) == ("FAILED", RUN_ESCALATED)
    said = [body for _, _, body, _ in r.world.github.comments]
    assert said[0].startswith("Pipeline `p`: stage `ask` waits for an approval")
    assert said[1] == "Pipeline `p`: stage `ask` timed out. (for the human group `maintainers`) too late"
    assert "escalated to a human" in said[2]
    assert r.world.github.labelled == [(REPO, 7, ("needs-human",))]
    # A member's approval after the timeout answers a task that is over: harmless, and the wait closes.
    late = deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))
    assert late["waiting"]["waits"][0]["answered"] is False
    assert late["waiting"]["waits"][0]["gone"] in {"InvalidToken", "TaskTimedOut"}
    assert r.world.registry.open_waits(42, 7) == []


@pytest.fixture
def hours_pass_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's interpreter with a test clock: a ``Wait`` state waits a second per hour (a reminder's
    interval is at least an hour); task timeouts are untouched."""
    original = WaitFunction._wait_interval

    def faster(self: Any, env: Any, wait_seconds: int) -> None:
        original(self, env, max(1, wait_seconds // 3600))

    monkeypatch.setattr(WaitFunction, "_wait_interval", faster)


@pytest.mark.usefixtures("hours_pass_in_seconds")
def test_a_waiting_stage_is_reminded_naming_its_group_then_answered(stack: Stack) -> None:
    r = waiting_router(stack)
    arn = started(
        stack,
        pipeline(
            "{from: maintainers, notify: {on_enter: please, reminder: {interval: 1h, max_reminders: 1, "
            'message: "still needed"}}}'
        ),
    )
    task, message = next_task(stack)
    assert task.stage == "ask"
    handle(r, message)

    remind, message = next_task(stack)  # an hour later, by the state machine's own Wait
    assert (remind.stage, remind.step) == ("ask.remind", "remind")
    assert handle(r, message)["answered"] is True

    assert [body for _, _, body, _ in r.world.github.comments][1] == (
        "Pipeline `p`: stage `ask` is still waiting. (for the human group `maintainers`) still needed"
    )
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))
    handled = drive(stack, r, arn)
    assert [stage for stage, _ in handled] == ["said"]
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert r.world.github.comments[-1][2] == "by alice"
    assert len(r.world.github.comments) == 3  # entry, one reminder (max_reminders), the next stage's


def test_the_entry_comment_is_posted_inert_and_the_group_assigned_on_github(stack: Stack) -> None:
    """The entry comment quotes the run's data (what a person wrote in a pull request): the App
    posts it through its own client, and a hidden effect marker it carries is escaped."""
    fake = FakeGitHub(
        issues={REPO: {7: {"number": 7, "state": "open", "labels": [], "title": "t", "body": ""}}}
    )
    private, _ = app_private_key()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    app = AppGitHub(GitHubApp(app_id=42, http=http, private_key=lambda: private), bot_login=BOT)
    r = waiting_router(stack, app)
    planted = "<!-- squadron:effect 0123456789abcdef01234567 -->"
    pipelines = parse_files(
        files_with(pipeline('{from: maintainers, notify: {on_enter: "{{ trigger.title }}"}}'))
    ).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, "p", compiled.definition).version_arn
    stack.pipelines.start(version, execution_name("d-1", "p"), run_input(42, 7, {"title": planted}))
    _, message = next_task(stack)

    handle(r, message)

    assert fake.issues is not None
    (posted,) = fake.issues[REPO][7]["comments_made"]
    assert "&lt;!-- squadron:effect 0123456789abcdef01234567" in posted and planted not in posted
    assert posted.count("<!--") == 1  # the App's own marker of this effect
    (assigned,) = [
        q for q in fake.requests if q.method == "POST" and q.url.path.endswith("/issues/7/assignees")
    ]
    assert json.loads(assigned.content) == {"assignees": ["alice", "bob", "carol"]}


def test_without_waits_a_human_stage_is_still_refused_with_the_reason(stack: Stack) -> None:
    r = router(stack)
    arn = started(stack, pipeline(APPROVAL))
    drive(stack, r, arn)
    events = stack.sfn.get_execution_history(executionArn=arn)["events"]
    (failed,) = [e["taskFailedEventDetails"] for e in events if e["type"] == "TaskFailed"]
    assert failed["error"] == "Squadron.StageRejected" and "keeps no human waits" in failed["cause"]
    wait_for("the run's end", lambda: stack.sfn.describe_execution(executionArn=arn)["status"] != "RUNNING")


def test_an_answer_lost_on_its_way_is_kept_and_sent_by_the_redelivered_approval(stack: Stack) -> None:
    """Step Functions is unreachable when the approval completes the wait: the answer was kept
    before it was sent, so the redelivered event sends that answer (nobody is counted again)."""
    r = waiting_router(stack)
    arn = started(stack, pipeline("{from: maintainers}"))
    _, message = next_task(stack)
    handle(r, message)
    real = r.tasks.humans.answers if r.tasks.humans is not None else None

    class Down:
        def answer(self, token: str, answer: Any) -> Any:
            raise RuntimeError("Step Functions unreachable")

    assert r.tasks.humans is not None
    r.tasks.humans.answers = Down()
    approval = EVENTS.review(7, "feat/x", "approved", by="alice")
    with pytest.raises(RuntimeError):
        deliver(r, approval)
    (kept,) = r.world.registry.open_waits(42, 7)
    assert kept.answer == {"wait_for": "approval", "from": "maintainers", "by": ["alice"]}

    r.tasks.humans.answers = real
    again = deliver(r, approval)

    assert again["waiting"]["waits"][0]["answered"] is True
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert len(succeeded(stack, arn)) == 2  # the human stage once, then the comment stage
    assert r.world.registry.open_waits(42, 7) == []
