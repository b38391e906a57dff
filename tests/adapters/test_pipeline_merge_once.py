"""A pipeline's ``merge_pr`` and the merge gate's own merge on CI success: exactly one merge
(issue 30).

With the approval flow's ``auto_merge`` on, the merge gate merges as soon as the flow is met, on
whichever event of the pull request comes first: a CI result the router judges, or the run's
``merge`` stage asking it. Each order, and a merge GitHub applies and then answers 502, ends with
one merge applied on GitHub and the run's ``merge`` stage succeeded (docs/pipelines.md, "whether
the merge happens").

The run goes on moto's Step Functions interpreter; the router's side is the real router
(:class:`~squadron.shell.router.RouterService`, a check run's event judged by the real merge gate)
and :class:`~squadron.shell.pipelines.PipelineTasks`, whose outbox holds the same gate; GitHub is
the sandbox (a merge of a merged pull request is refused 405 "Pull Request is not mergeable").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squadron.config.parse import parse_files
from squadron.local.sandbox import ApiFault
from squadron.shell.merge_gate import MergeGate
from tests.adapters.test_merge_queue import BOT, FILES, REPO, Sandbox, merge_run
from tests.adapters.test_pipeline_stage_work import Router, drive
from tests.support.events import Events
from tests.support.git_remote import IDENTITY
from tests.support.sandbox_app import Scripted, app_on, app_sandbox
from tests.support.step_functions import Stack, step_functions
from tests.support.world import World

#: auto_merge on, no review required, the ``ci`` check required: met once CI passes.
ON_CI = parse_files(
    {
        "config.yaml": "version: 1\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  required_reviews: []\n  required_status_checks: [ci]\n"
            "  merge_policy: {method: squash, auto_merge: true, delete_branch: false}\n"
        ),
    }
)

PIPELINE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - {id: merge, type: action, action: merge_pr, config: {method: squash}}
"""


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    github = app_sandbox(tmp_path / "sandbox")
    github.add_repository(REPO, FILES, permissions={"alice": "write"})
    faults = Scripted()
    github.api_fault = faults
    with app_on(github) as app:
        (tmp_path / "work").mkdir()
        yield Sandbox(github, app, faults, tmp_path / "work", [])


@dataclass
class Play:
    """One pull request, its run's ``merge`` stage, the router and GitHub's merges."""

    stack: Stack
    sandbox: Sandbox
    pr: dict[str, Any]
    arn: str
    router: Router
    events: Events
    #: What GitHub answered each merge request (status), in order.
    merge_answers: list[int]
    #: The merges GitHub applied (its git store's merge commits).
    applied: list[str]
    #: What happens on GitHub right before the next merge request is handled (one each).
    before_merge: list[Callable[[], None]]

    @property
    def number(self) -> int:
        return int(self.pr["number"])

    def ci_passes(self) -> None:
        """CI's check run succeeds on the head: the sandbox records it, the router judges its event."""
        head = str(self.pr["head"]["sha"])
        self.sandbox.client("ci-bot").create_check_run(
            name="ci", head_sha=head, status="completed", conclusion="success"
        )
        event = self.events.check("feat/issue-1", "success", (self.number,), sha=head)
        self.router.world.router.process(event)

    def run_asks(self) -> list[str]:
        """The run's tasks handed to the router until the run ends; the stages handled."""
        return [stage for stage, _ in drive(self.stack, self.router, self.arn)]

    def merge_fails(self, fault: ApiFault) -> None:
        path = ("PUT", f"/repos/{REPO}/pulls/{self.number}/merge")
        self.sandbox.faults.wanted.setdefault(path, []).append(fault)


def play(stack: Stack, sandbox: Sandbox) -> Play:
    pr = sandbox.pull_request()
    repo = sandbox.github.repos[REPO]
    applied: list[str] = []
    store_merge = repo.store.merge

    def merge(*args: Any, **kwargs: Any) -> str:
        sha: str = store_merge(*args, **kwargs)
        applied.append(sha)
        return sha

    repo.store.merge = merge  # type: ignore[method-assign]
    answers: list[int] = []
    handle = sandbox.github.handle

    before_merge: list[Callable[[], None]] = []

    def answered(method: str, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, Any]:
        merging = method == "PUT" and path.split("?", maxsplit=1)[0].endswith(f"/pulls/{pr['number']}/merge")
        if merging and before_merge:
            before_merge.pop(0)()
        status, answer = handle(method, path, body, headers)
        if merging:
            answers.append(status)
        return status, answer

    sandbox.github.handle = answered  # type: ignore[method-assign,assignment]
    gate = MergeGate(client=lambda _i, _r: sandbox.client(), config_for=lambda _r: ON_CI, bot_login=BOT)
    world = World()
    world.router.merge_gate = gate
    router, arn = merge_run(stack, world, lambda: gate, PIPELINE, pr["number"])
    events = Events(repo_id=42, full_name=REPO)
    return Play(stack, sandbox, pr, arn, router, events, answers, applied, before_merge)


def gate_first(p: Play) -> None:
    p.ci_passes()  # the gate merges on CI's success
    assert p.sandbox.github.repos[REPO].pulls[p.number]["merged"]
    assert p.run_asks() == ["merge"]  # then the run's merge_pr asks: the gate finds it merged


def run_first(p: Play) -> None:
    assert p.run_asks() == ["merge"]  # merge_pr asks before CI: the flow waits on it
    assert not p.sandbox.github.repos[REPO].pulls[p.number]["merged"]
    p.ci_passes()  # CI's success: the gate merges


def run_merges_then_ci_again(p: Play) -> None:
    p.ci_passes()  # the gate merges on CI's success
    p.ci_passes()  # a re-run of CI: the gate finds it merged
    assert p.run_asks() == ["merge"]


def lost_answer_of_the_runs_merge(p: Play) -> None:
    p.sandbox.client("ci-bot").create_check_run(
        name="ci", head_sha=str(p.pr["head"]["sha"]), status="completed", conclusion="success"
    )
    p.merge_fails("502")  # GitHub applies merge_pr's merge, then answers 502
    assert p.run_asks() == ["merge"]
    p.ci_passes()  # CI's event after: the gate finds it merged


def lost_answer_of_the_gates_merge(p: Play) -> None:
    p.merge_fails("502")  # GitHub applies the gate's merge on CI, then answers 502
    p.ci_passes()
    assert p.run_asks() == ["merge"]


def both_at_once(p: Play) -> None:
    p.sandbox.client("ci-bot").create_check_run(
        name="ci", head_sha=str(p.pr["head"]["sha"]), status="completed", conclusion="success"
    )
    # merge_pr's judgement passed; before its merge reaches GitHub, CI's event is judged and merged
    p.before_merge.append(p.ci_passes)
    assert p.run_asks() == ["merge"]
    assert p.merge_answers == [200, 405], p.merge_answers  # the run's merge refused: merged already


def dropped_answer_then_the_run_asks(p: Play) -> None:
    p.merge_fails("drop")  # applied, the connection dropped before the answer
    p.ci_passes()
    assert p.run_asks() == ["merge"]


CASES: list[tuple[str, Callable[[Play], None]]] = [
    ("the gate merges on CI first, then merge_pr asks", gate_first),
    ("merge_pr asks first (CI pending), then CI's event merges", run_first),
    ("the gate merges on CI, CI runs again, then merge_pr asks", run_merges_then_ci_again),
    ("CI's merge lands between merge_pr's judgement and its merge", both_at_once),
    ("merge_pr's merge is applied and answered 502, then CI's event", lost_answer_of_the_runs_merge),
    (
        "the gate's merge on CI is applied and answered 502, then merge_pr asks",
        lost_answer_of_the_gates_merge,
    ),
    (
        "the gate's merge on CI is applied and its answer dropped, then merge_pr asks",
        dropped_answer_then_the_run_asks,
    ),
]


@pytest.mark.parametrize("order", [order for _, order in CASES], ids=[why for why, _ in CASES])
def test_a_pull_request_is_merged_once_whichever_asks_first(
    stack: Stack, sandbox: Sandbox, order: Callable[[Play], None]
) -> None:
    p = play(stack, sandbox)

    order(p)

    merged = sandbox.github.repos[REPO].pulls[p.number]
    assert merged["merged"] and merged["merged_by"]["login"] == BOT
    assert len(p.applied) == 1, p.merge_answers  # one merge applied on GitHub
    assert not any(p.sandbox.faults.wanted.values())  # each lost answer was played
    assert p.merge_answers.count(200) + p.merge_answers.count(502) <= 1, p.merge_answers
    ended = stack.finished(p.arn)
    assert ended["status"] == "SUCCEEDED", ended
    history = stack.sfn.get_execution_history(executionArn=p.arn)["events"]
    types = [e["type"] for e in history]
    assert "TaskFailed" not in types
    (output,) = [e["taskSucceededEventDetails"]["output"] for e in history if e["type"] == "TaskSucceeded"]
    assert json.loads(output)["merge"] == "asked", output
