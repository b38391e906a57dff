"""Labels in a pipeline run on moto's Step Functions interpreter (issue 30): a ``remove_label`` action
and a lifecycle ``label: {remove}`` taken off through the App's own client (once, however GitHub
answers), a human stage waiting for a label on a pull request (``pull_request.labeled``), and a
human stage whose timeout is extended, which is not announced again.

The router's side is built as in tests/adapters/test_pipeline_human_stages.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.config import parse_files
from squadron.domain.pipeline_wire import RUN_ESCALATED, execution_name, run_input
from squadron.domain.pipelines.compile import compile_pipeline
from tests.adapters.test_pipeline_human_stages import (
    EVENTS,
    deliver,
    handle,
    next_task,
    pipeline,
    succeeded,
    waiting_router,
)
from tests.adapters.test_pipeline_stage_work import REPO, drive, router, started
from tests.support.events import BOT
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.step_functions import Stack, step_functions
from tests.unit.pipelines.test_pipeline_config import files_with


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


@dataclass
class LabelsOnGitHub:
    """Issue #7's labels as GitHub keeps them; a label removal is applied, and the first one is
    then answered 502 (GitHub under load); a label not there is 404."""

    labels: set[str] = field(default_factory=lambda: {"in-review", "blocked", "keep"})
    fake: FakeGitHub = field(default_factory=FakeGitHub)
    removals: list[tuple[str, str]] = field(default_factory=list)
    failed_once: bool = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        m = re.fullmatch(rf"/repos/{REPO}/issues/7/labels/(?P<name>[^/]+)", request.url.path)
        if request.method != "DELETE" or m is None:
            return self.fake.handle(request)
        name = m["name"]
        self.removals.append((name, request.headers["authorization"]))
        if name not in self.labels:
            return httpx.Response(404, json={"message": "Label does not exist"})
        self.labels.discard(name)
        if not self.failed_once:
            self.failed_once = True
            return httpx.Response(502, json={"message": "Server Error"})
        return httpx.Response(200, json=[{"name": label} for label in sorted(self.labels)])


REMOVING = (
    "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
    '      - {id: unblock, type: action, action: remove_label, config: {label: "{{ trigger.label }}"}}\n'
    "      - {id: gone, type: action, action: remove_label, config: {label: never-there}}\n"
    "    on_complete: [{type: label, remove: in-review}]\n"
)


def test_remove_label_takes_the_label_off_with_the_apps_client_once_though_github_answers_502(
    stack: Stack,
) -> None:
    github = LabelsOnGitHub()
    private, _ = app_private_key()
    http = GitHubHttp(transport=httpx.MockTransport(github.handle), sleep=lambda s: None)
    app = AppGitHub(GitHubApp(app_id=42, http=http, private_key=lambda: private), bot_login=BOT)
    r = router(stack, app)
    pipelines = parse_files(files_with(REMOVING)).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, "p", compiled.definition).version_arn
    data = {"n": 7, "label": "blocked"}
    arn = stack.pipelines.start(version, execution_name("d-1", "p"), run_input(42, 7, data)).execution_arn

    handled = drive(stack, r, arn)

    assert [stage for stage, _ in handled] == ["unblock", "gone", "__complete__"]
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert succeeded(stack, arn) == [{"unlabelled": "blocked"}, {"unlabelled": "never-there"}, {"done": 1}]
    # What the run named is off, the rest kept; a label not there (or gone after a 502) is no error.
    assert github.labels == {"keep"}
    assert [name for name, _ in github.removals] == ["blocked", "blocked", "never-there", "in-review"]
    # Each with the installation's token, as the App: never an agent's or a person's.
    assert {auth for _, auth in github.removals} == {"Bearer ghs_77"}  # installation 77's token


LABEL_WAIT = "{wait_for: label, from: maintainers, notify: {on_enter: please}}"


def test_a_label_on_the_pull_request_answers_a_stage_waiting_for_one_only_from_a_member_with_write(
    stack: Stack,
) -> None:
    r = waiting_router(stack)
    arn = started(stack, pipeline(LABEL_WAIT))
    _, message = next_task(stack)
    handle(r, message)

    for refused in (
        EVENTS.pr_labeled(7, "feat/x", "ship", by="mallory"),  # a stranger
        EVENTS.pr_labeled(7, "feat/x", "ship", by="dave"),  # a writer outside the group
        EVENTS.pr_labeled(7, "feat/x", "ship", by="carol"),  # a member who only reads
        EVENTS.pr_labeled(7, "feat/x", "ship", by=BOT),  # the App itself
        EVENTS.pr_labeled(8, "feat/y", "ship", by="alice"),  # another pull request
    ):
        summary = deliver(r, refused)
        assert all(not w.get("answered") for w in summary.get("waiting", {}).get("waits", [])), summary
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert len(r.world.registry.open_waits(42, 7)) == 1

    answered = deliver(r, EVENTS.pr_labeled(7, "feat/x", "ship", by="alice"))

    assert answered["waiting"]["waits"][0]["answered"] is True
    assert drive(stack, r, arn)[0][0] == "said"
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert r.world.github.comments[-1][2] == "by alice"


EXTENDED = (
    "        timeout: 1s\n"
    "        on_timeout: {extend: 1s, max_extensions: 2, notify: {target: maintainers, message: late}, "
    "then: escalate}\n"
)


def test_an_extended_human_stage_is_not_announced_again_and_keeps_who_counted(stack: Stack) -> None:
    """The stage times out twice and is extended each time (entered again): its entry comment and
    assignment are said once; the extensions say only the timeout's note; who approved before the
    timeout still counts, and the earlier entries' waits are closed (one wait open at a time)."""
    r = waiting_router(stack)
    ask = (
        "{description: Ship it?, from: maintainers, count: 2, auto_assign: true, notify: {on_enter: please}}"
    )
    arn = started(stack, pipeline(ask, more=EXTENDED))
    _, message = next_task(stack)
    handle(r, message)
    deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))  # one of two, then it times out

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert (held["status"], held["error"]) == ("FAILED", RUN_ESCALATED)
    stages = [stage for stage, _ in handled]
    assert stages == ["ask.notify-ext", "ask", "ask.notify-ext", "ask", "ask.notify-end", "__escalate__"]
    said = [body for _, _, body, _ in r.world.github.comments]
    assert sum("waits for 2 approvals" in body for body in said) == 1, said
    assert sum(body.endswith("please") for body in said) == 1, said
    assert (
        said.count(
            "Pipeline `p`: stage `ask` timed out; its time is extended. (for the human group `maintainers`) late"
        )
        == 2
    )
    assert len(r.world.github.assigned) == 1
    # alice's approval was carried into each extension's wait; only the last entry's wait was open
    waits = sorted(r.world.registry.human_waits.values(), key=lambda w: w.opened_at)
    assert len(waits) == 3 and [w.sent for w in waits] == [True, True, False]
    assert waits[2].carried == ("alice",) and waits[2].extends == waits[1].entry


def test_an_approval_before_the_timeout_and_one_after_the_extension_answer_the_extended_stage(
    stack: Stack,
) -> None:
    r = waiting_router(stack)
    ask = "{from: maintainers, count: 2, notify: {on_enter: please}}"
    arn = started(
        stack,
        pipeline(ask, more="        timeout: 1s\n        on_timeout: {extend: 1h, max_extensions: 1}\n"),
    )
    _, message = next_task(stack)
    handle(r, message)
    deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))
    extension, message = next_task(stack)  # it timed out: the stage entered again
    assert extension.stage == "ask"
    assert handle(r, message)["outcome"] == "waiting"

    answered = deliver(r, EVENTS.review(7, "feat/x", "approved", by="bob"))

    assert answered["waiting"]["waits"] == [
        {"stage": "ask", "answered": True, "gone": None, "wait_for": "approval", "from": "maintainers",
         "by": ["alice", "bob"]}
    ]  # fmt: skip
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert r.world.github.comments[-1][2] == "by alice, bob"
    assert sum(body.endswith("please") for _, _, body, _ in r.world.github.comments) == 1


#: (why, the stage's count, who approved before the timeout, who approved after it, before the
#: extension's entry reached the router)
LATE_ANSWERS = [
    ("the one approval needed comes late", 1, (), ("alice",)),
    ("one approval before the timeout, the second late", 2, ("alice",), ("bob",)),
]


@pytest.mark.parametrize(
    ("count", "before", "late"), [c[1:] for c in LATE_ANSWERS], ids=[c[0] for c in LATE_ANSWERS]
)
def test_an_answer_between_the_timeout_and_the_extensions_entry_answers_the_extension(
    stack: Stack, count: int, before: tuple[str, ...], late: tuple[str, ...]
) -> None:
    """The stage timed out and its extension enters it again; the approval that completes it comes
    in between (its own entry's task is over: "gone"). It counts for the extension, which is
    answered at once and says nothing again."""
    r = waiting_router(stack)
    ask = f"{{from: maintainers, count: {count}, auto_assign: true, notify: {{on_enter: please}}}}"
    arn = started(
        stack,
        pipeline(ask, more="        timeout: 1s\n        on_timeout: {extend: 1h, max_extensions: 1}\n"),
    )
    _, message = next_task(stack)
    handle(r, message)
    for login in before:
        deliver(r, EVENTS.review(7, "feat/x", "approved", by=login))
    extension, message = next_task(stack)  # it timed out: the stage's entry again, not handled yet
    assert extension.stage == "ask"

    for login in late:
        answered = deliver(r, EVENTS.review(7, "feat/x", "approved", by=login))
        (wait,) = answered["waiting"]["waits"]
        assert wait["answered"] is False and wait["gone"], wait  # its own entry's task is over

    entry = handle(r, message)

    assert entry["outcome"] == "passed"
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    everyone = sorted((*before, *late))
    assert r.world.github.comments[-1][2] == f"by {', '.join(everyone)}"
    said = [body for _, _, body, _ in r.world.github.comments]
    assert sum(body.endswith("please") for body in said) == 1, said  # announced once
    assert len(r.world.github.assigned) == 1
    assert r.world.registry.open_waits(42, 7) == []  # each entry's wait closed
