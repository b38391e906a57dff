"""Exactly-once effects over at-least-once delivery: fail at any point, replay, nothing repeats.

For each scenario (an event sequence that makes the router comment, label, close, open
needs-human issues, file blocker issues and start and stop tasks) a reference run without
faults records what GitHub saw. Then, for every point k of the run — each call outside the
router's own memory: the decision's commit, each GitHub call, each task launch or stop,
each command put on the queue, marking the decision done — and in both ways a call can
fail (``before``: it did not happen; ``after``: it happened and the answer was lost, as
when a Lambda times out), the run is repeated with that one fault and the failed delivery
is retried as SQS would retry it. GitHub must end up with exactly the reference's comments
and issues (none twice, none lost), the same labels and closed issues, and the registry
with the same agents in the same states. The domain events committed for the bus must be
exactly the reference's: each once, under the same id, none lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.approval import GateResult
from squadron.domain.commands import ReportConflict
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import Decision, Write
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.outbox import EXECUTION_LEASE, Claim
from squadron.domain.routing import RoutingPolicy
from squadron.shell.merge_gate import GateOutcome
from squadron.shell.router import RouterService
from tests.support.events import T0, Events, recover
from tests.support.fake_registry import FakeLauncher, FakeRegistry, FakeRouterGitHub

A38 = "1-38-feat-dev"
Mode = Literal["before", "after"]


class Crash(Exception):
    """The injected fault: the call failed (``before``) or its answer was lost (``after``)."""


@dataclass
class Faults:
    """Counts the calls that leave the router; crashes once at call ``at``."""

    at: int | None = None
    mode: Mode = "before"
    calls: int = 0
    log: list[str] = field(default_factory=list)

    def step(self, what: str, call: Callable[[], Any]) -> Any:
        self.calls += 1
        self.log.append(what)
        hit = self.calls == self.at
        if hit and self.mode == "before":
            raise Crash(what)
        result = call()
        if hit:
            raise Crash(what)
        return result


class FlakyGitHub(FakeRouterGitHub):
    def __init__(self, faults: Faults) -> None:
        super().__init__({"alice": "write", "bob": "admin"})
        self.faults = faults

    def comment(self, *args: Any, **kwargs: Any) -> None:
        self.faults.step("comment", lambda: super(FlakyGitHub, self).comment(*args, **kwargs))

    def close_issue(self, *args: Any, **kwargs: Any) -> None:
        self.faults.step("close", lambda: super(FlakyGitHub, self).close_issue(*args, **kwargs))

    def add_labels(self, *args: Any, **kwargs: Any) -> None:
        self.faults.step("label", lambda: super(FlakyGitHub, self).add_labels(*args, **kwargs))

    def create_issue(self, *args: Any, **kwargs: Any) -> int:
        number: int = self.faults.step(
            "create issue", lambda: super(FlakyGitHub, self).create_issue(*args, **kwargs)
        )
        return number


class FlakyLauncher(FakeLauncher):
    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    def launch(self, agent_id: str, purpose: str, token: str, secret: str) -> str:
        arn: str = self.faults.step(
            "launch", lambda: super(FlakyLauncher, self).launch(agent_id, purpose, token, secret)
        )
        return arn

    def stop(self, task_arn: str, reason: str) -> None:
        self.faults.step("stop", lambda: super(FlakyLauncher, self).stop(task_arn, reason))


class FlakyRegistry(FakeRegistry):
    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        self.faults.step("commit", lambda: super(FlakyRegistry, self).commit(writes, decision, events))

    def change_verdict(self, repo_id: int, pr_number: int, previous: str | None, event: DomainEvent) -> bool:
        changed: bool = self.faults.step(
            "verdict", lambda: super(FlakyRegistry, self).change_verdict(repo_id, pr_number, previous, event)
        )
        return changed

    def finish_decision(self, key: str, at: datetime) -> None:
        self.faults.step("finish", lambda: super(FlakyRegistry, self).finish_decision(key, at))

    def claim_decision(self, key: str, owner: str, now: datetime) -> Claim | None:
        claim: Claim | None = self.faults.step(
            "claim", lambda: super(FlakyRegistry, self).claim_decision(key, owner, now)
        )
        return claim

    def settle_effect(self, key: str, owner: str, index: int) -> bool:
        settled: bool = self.faults.step(
            "settle", lambda: super(FlakyRegistry, self).settle_effect(key, owner, index)
        )
        return settled


class WaitingGate:
    """The merge gate: every judgement says "waiting" (its verdict event is reported once per PR)."""

    def __init__(self) -> None:
        self.judged: list[int] = []

    def evaluate(
        self, installation_id: int | None, repo: str, pr_number: int, *args: object, **kw: object
    ) -> GateOutcome:
        self.judged.append(pr_number)
        result = GateResult("waiting", ("a review",), merge=False, method="squash", delete_branch=False)
        return GateOutcome(pr_number, result)


@dataclass
class FifoQueue:
    """events.fifo: a message with a deduplication id seen before is dropped."""

    faults: Faults
    waiting: list[EventEnvelope] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def send(self, envelope: EventEnvelope) -> str:
        def put() -> str:
            if envelope.delivery_id not in self.seen:
                self.seen.add(envelope.delivery_id)
                self.waiting.append(envelope)
            return envelope.delivery_id

        sent: str = self.faults.step("send", put)
        return sent


@dataclass
class Run:
    faults: Faults
    events: Events = field(default_factory=Events)

    def __post_init__(self) -> None:
        self.registry = FlakyRegistry(self.faults)
        self.github = FlakyGitHub(self.faults)
        self.launcher = FlakyLauncher(self.faults)
        self.queue = FifoQueue(self.faults)
        self.now = T0
        self.router = RouterService(
            registry=self.registry,
            launcher=self.launcher,
            github=self.github,
            policies=lambda _event: RoutingPolicy(),
            clock=self._clock,
            queue=self.queue,
            merge_gate=WaitingGate(),
        )

    def _clock(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def deliver(self, envelope: EventEnvelope) -> None:
        """Process ``envelope`` as the queue would: retried after a failure until it succeeds."""
        first = True
        for _ in range(5):
            try:
                self.router.process(envelope, first_receive=first)
                break
            except Crash:
                first = False
                # SQS hands the record over again a visibility timeout later: longer than a claim.
                self.now += EXECUTION_LEASE
        else:  # pragma: no cover - a delivery that never succeeds is a failure of its own
            raise AssertionError(f"{envelope.delivery_id} never succeeded")
        while self.queue.waiting:
            self.deliver(self.queue.waiting.pop(0))

    def agent(self, agent_id: str) -> Any:
        return self.registry.get_agent(agent_id)

    def what_github_saw(self) -> dict[str, object]:
        return {
            "comments": Counter((repo, number, author) for repo, number, _, author in self.github.comments),
            "issues": Counter(str(issue["title"]) for issue in self.github.created),
            "labels": {(repo, number, labels) for repo, number, labels in self.github.labelled},
            "closed": {(repo, number) for repo, number, _ in self.github.closed},
        }

    def published(self) -> list[tuple[str, str, str | None]]:
        """The committed domain events (what the stream carries to the bus), by id."""
        return sorted((e.id, e.detail_type, e.agent) for e in self.registry.events.values())

    def agents(self) -> dict[str, AgentStatus]:
        return {agent_id: agent.status for agent_id, agent in self.registry.agents.items()}


Step = Callable[[Run], EventEnvelope]


def _conflict(sha: str, n: int) -> Step:
    def make(run: Run) -> EventEnvelope:
        command = ReportConflict(issue_number=38, pr_number=101, head_sha=sha, base="main")
        return command_envelope(
            command,
            repository={"id": 1, "full_name": "octo/repo"},
            installation_id=77,
            delivery_id=f"conflict-{n}",
            now=run.now,
        )

    return make


def _idle(run: Run) -> None:
    """The dev agent's task ended its turn (outside the router: the test plays the task)."""
    record = run.registry.agents[A38]
    if record.status is AgentStatus.CREATED:
        record = record.transition(AgentStatus.ACTIVE, now=record.updated_at)
    run.registry.agents[A38] = record.updated(now=record.updated_at, task_arn=None)


def _failing_check(n: int) -> Step:
    return lambda r: r.events.check("feat/issue-38", "failure", prs=(101,), sha=f"s{n}")


def _after_idle(step: Step) -> Step:
    def make(run: Run) -> EventEnvelope:
        _idle(run)
        return step(run)

    return make


SCENARIOS: list[tuple[str, list[Step]]] = [
    (
        "two deaths escalate: label, comment, needs-human issue, task stopped",
        [
            lambda r: r.events.assigned(38),
            lambda r: recover(r.events, r.agent(A38), "relaunch"),
            lambda r: recover(r.events, r.agent(A38), "relaunch"),
        ],
    ),
    (
        "a sleeper past its limit is escalated",
        [
            lambda r: r.events.assigned(38),
            lambda r: r.events.register_blocker(38, 42, agent_id=A38, sleep=True),
            lambda r: recover(r.events, r.agent(A38), "escalate"),
        ],
    ),
    (
        "a merge conflict the agent could not resolve files a blocker issue for humans",
        [
            lambda r: r.events.assigned(38),
            lambda r: r.events.pr(101, "feat/issue-38", "Closes #38"),
            _conflict("c" * 40, 1),
            _after_idle(_conflict("c" * 40, 2)),
        ],
    ),
    (
        "a merged pull request completes the agent and closes its issue",
        [
            lambda r: r.events.assigned(38),
            lambda r: r.events.pr(101, "feat/issue-38", "Closes #38"),
            lambda r: r.events.pr_closed(101, "feat/issue-38", merged=True, body="Closes #38"),
        ],
    ),
    (
        "a cycle is refused in a comment, then four failing checks hand the issue to humans",
        [
            lambda r: r.events.assigned(38),
            lambda r: r.events.register_blocker(42, 38),
            lambda r: r.events.register_blocker(38, 42),
            lambda r: r.events.pr(101, "feat/issue-38", "Closes #38"),
            *[_failing_check(n) for n in range(4)],
        ],
    ),
]


def _play(steps: list[Step], faults: Faults) -> Run:
    run = Run(faults)
    for step in steps:
        run.deliver(step(run))
    return run


def _points() -> list[tuple[str, list[Step], int, Mode]]:
    cases: list[tuple[str, list[Step], int, Mode]] = []
    modes: tuple[Mode, ...] = ("before", "after")
    for name, steps in SCENARIOS:
        reference = _play(steps, Faults())
        for k in range(1, reference.faults.calls + 1):
            for mode in modes:
                cases.append((f"{name} | {mode} call {k} ({reference.faults.log[k - 1]})", steps, k, mode))
    return cases


POINTS = _points()


def test_the_scenarios_reach_every_kind_of_outside_call() -> None:
    """The table is worth its name: commits, GitHub creations, labels, closing, tasks, commands."""
    seen = {kind for _, steps in SCENARIOS for kind in _play(steps, Faults()).faults.log}
    assert seen >= {
        "commit",
        "comment",
        "create issue",
        "label",
        "close",
        "launch",
        "stop",
        "send",
        "finish",
        "verdict",
    }


def test_the_scenarios_publish_every_kind_of_decided_event() -> None:
    published = {kind for _, steps in SCENARIOS for _, kind, _ in _play(steps, Faults()).published()}
    assert published >= {
        "agent.started.v1",
        "agent.slept.v1",
        "agent.escalated.v1",
        "agent.completed.v1",
        "blocker.registered.v1",
        "pr.opened.v1",
        "pr.merged.v1",
        "merge_gate.verdict_changed.v1",
    }


@pytest.mark.parametrize(("steps", "at", "mode"), [p[1:] for p in POINTS], ids=[p[0] for p in POINTS])
def test_a_fault_at_any_point_then_a_retry_repeats_and_loses_nothing(
    steps: list[Step], at: int, mode: Mode
) -> None:
    reference = _play(steps, Faults())
    faulty = _play(steps, Faults(at=at, mode=mode))
    assert faulty.what_github_saw() == reference.what_github_saw()
    assert faulty.agents() == reference.agents()
    assert faulty.published() == reference.published()
    assert all(decision.done for decision in faulty.registry.decisions.values())


def _point(log: list[str], what: str, after: str) -> int:
    """The (1-based) call ``what`` that comes right after the last ``after`` in ``log``."""
    last = max(i for i, name in enumerate(log) if name == after)
    return log.index(what, last) + 1


# (crash before: the call, right after which call; what the retry looks up on GitHub; the
# calls it makes to GitHub and ECS)
RESUMES = [
    ("finish", "stop", 0, []),  # every effect was recorded done: nothing is repeated
    ("settle", "create issue", 1, ["stop"]),  # the issue was opened, not recorded: found
    ("settle", "comment", 2, ["create issue", "stop"]),  # the comment is found, the rest goes on
]
OUTSIDE_CALLS = ("comment", "create issue", "stop", "label", "close", "launch")


@pytest.mark.parametrize(("what", "after", "lookups", "calls"), RESUMES)
def test_a_retry_after_a_crash_redoes_only_what_was_not_recorded_done(
    what: str, after: str, lookups: int, calls: list[str]
) -> None:
    """The happy path reads nothing back from GitHub; a resumed decision skips the effects
    recorded done, and looks up (once) only the creations that may have happened unrecorded."""
    steps = SCENARIOS[0][1]
    reference = _play(steps, Faults())
    assert reference.github.lookups == []
    at = _point(reference.faults.log, what, after)
    crashed = _play(steps, Faults(at=at, mode="before"))
    assert len(crashed.github.lookups) == lookups
    assert [call for call in crashed.faults.log[at:] if call in OUTSIDE_CALLS] == calls
    assert crashed.what_github_saw() == reference.what_github_saw()
