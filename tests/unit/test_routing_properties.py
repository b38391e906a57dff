"""Property-based routing: random interleavings, duplicates, reorderings and failed launches.

The simulated queue behaves like events.fifo: messages of one group (one
issue or pull request) are delivered in order, a failed message goes back to
the head of its group and blocks it until it succeeds, and groups interleave
in any order hypothesis picks. Any processed delivery may be delivered again:
right away (SQS at-least-once, a Lambda timeout after the effects were
applied), where a GitHub event must change nothing at all; or much later
(GitHub redelivery), where the core cannot tell a replay from a late first
delivery — the router handler's per-delivery processing records (kept longer
than GitHub's redelivery window) skip those, so here they only have to keep
the invariants. After every step and at quiescence the invariants must hold,
and no agent ever gets a second live task.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from squadron.domain.agents import LIVE, TERMINAL, AgentStatus, ConflictError, IssueState
from squadron.domain.blockers import path_between
from squadron.domain.effects import Effect, LaunchAgent, PutAgent
from squadron.domain.events import EventEnvelope
from tests.support.events import Events
from tests.support.world import World

ISSUES = st.integers(min_value=1, max_value=5)


def _agent_of(world: World, issue: int) -> str | None:
    view = world.registry.issue_view(1, issue)
    agent = next(
        (a for a in view.agents if a.role in ("feat-dev", "bug-fix") and a.status not in TERMINAL), None
    )
    return agent.agent_id if agent else None


@dataclass
class Harness:
    world: World = field(default_factory=World)
    groups: dict[str, deque[EventEnvelope]] = field(default_factory=dict)
    done: list[EventEnvelope] = field(default_factory=list)
    #: agent id -> launch token of its task that may be running
    live_task: dict[str, str] = field(default_factory=dict)
    #: deliveries that failed and wait in the queue for their retry
    failed: set[str] = field(default_factory=set)
    #: the registry changed outside the router (a task went idle) since the last delivery
    touched: bool = False

    @property
    def events(self) -> Events:
        return self.world.events

    def produce(self, op: tuple[str, int, int, bool]) -> None:
        kind, a, b, flag = op
        e = self.events
        if kind == "assign":
            self._enqueue(e.assigned(a, labels=("bug",) if flag else ()))
        elif kind == "unassign":
            self._enqueue(e.unassigned(a))
        elif kind == "close":
            self._enqueue(e.closed(a, reason="not_planned" if flag else "completed"))
        elif kind == "reopen":
            self._enqueue(e.reopened(a))
        elif kind == "block":
            # A running task sends the command (and exits right after when it sleeps);
            # otherwise the PM registers the blocker for the issue.
            agent = _agent_of(self.world, a)
            token = self.live_task.get(agent) if agent is not None else None
            if token is None:
                self._enqueue(e.register_blocker(a, b))
            else:
                if flag:
                    self.live_task.pop(agent or "", None)
                self._enqueue(e.register_blocker(a, b, agent_id=agent, token=token, sleep=flag))
        elif kind == "idle":
            # A running task ends its turn without blocking (report_complete): the agent stays
            # ACTIVE with no task until the next event for it.
            agent = _agent_of(self.world, a)
            record = self.world.registry.agents.get(agent) if agent else None
            if record is not None and agent in self.live_task and record.pending_launch is None:
                if record.status is AgentStatus.CREATED:
                    record = record.transition(AgentStatus.ACTIVE, now=record.updated_at)
                self.world.registry.agents[record.agent_id] = record.updated(
                    now=record.updated_at, task_arn=None
                )
                self.live_task.pop(record.agent_id, None)
                self.touched = True
        elif kind == "comment":
            self._enqueue(e.comment(a, "@squadron-pm look" if flag else "try again"))
        elif kind == "pr":
            self._enqueue(e.pr(100 + a, f"feat/issue-{a}", f"Fixes #{a}"))
        elif kind == "review":
            self._enqueue(e.review(100 + a, f"feat/issue-{a}", "changes_requested" if flag else "approved"))
        elif kind == "merge":
            self._enqueue(e.pr_closed(100 + a, f"feat/issue-{a}", merged=flag, body=f"Fixes #{a}"))
        elif kind == "check":
            self._enqueue(e.check(f"feat/issue-{a}", "failure"))

    def _enqueue(self, event: EventEnvelope) -> None:
        self.groups.setdefault(event.message_group_id, deque()).append(event)

    def pending(self) -> bool:
        return any(self.groups.values())

    def next_message(self, pick: int) -> EventEnvelope:
        ready = sorted(group for group, queue in self.groups.items() if queue)
        return self.groups[ready[pick % len(ready)]].popleft()

    def deliver(self, event: EventEnvelope, *, fail_launch: bool = False) -> None:
        self.world.launcher.fail_next = 1 if fail_launch else 0
        try:
            effects = self.world.send(event)
        except ConflictError as exc:  # pragma: no cover - would be a bug: processing is serial here
            raise AssertionError(f"conflict in serial processing: {exc}") from exc
        except RuntimeError:
            self.groups[event.message_group_id].appendleft(event)  # blocks its group until retried
            self.failed.add(event.delivery_id)
            self.world.launcher.fail_next = 0
            return
        self.failed.discard(event.delivery_id)
        self.done.append(event)
        self.touched = False
        self._track_tasks(effects)

    def _track_tasks(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, LaunchAgent):
                running = self.live_task.get(effect.agent_id)
                assert running in (None, effect.token), f"second live task for {effect.agent_id}"
                self.live_task[effect.agent_id] = effect.token
            if isinstance(effect, PutAgent) and effect.write.record.status not in LIVE:
                self.live_task.pop(effect.write.record.agent_id, None)
        for agent in self.world.registry.agents.values():
            if agent.status not in LIVE:
                self.live_task.pop(agent.agent_id, None)

    def check_invariants(self, *, quiescent: bool) -> None:
        registry = self.world.registry
        graph: dict[int, frozenset[int]] = {}
        for (_, issue, blocker), resolved in registry.edges.items():
            if not resolved:
                graph[issue] = graph.get(issue, frozenset()) | {blocker}
        for issue, blockers in graph.items():
            for blocker in blockers:
                assert path_between(graph, blocker, issue) is None, f"cycle through #{issue} -> #{blocker}"
        for agent in registry.agents.values():
            if agent.status is AgentStatus.SLEEPING:
                assert agent.blocked_by, f"{agent.agent_id} sleeps without a blocker"
                if quiescent:
                    closed = {
                        b for b in agent.blocked_by if registry.issue_states.get((1, b)) is IssueState.CLOSED
                    }
                    assert closed != agent.blocked_by, f"{agent.agent_id} sleeps on closed {sorted(closed)}"
            if agent.status in TERMINAL:
                assert agent.pending_launch is None


def _diff(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """Readable differences between two registry snapshots."""
    out: list[str] = []
    for table, old in before.items():
        new = after[table]
        assert isinstance(old, dict)
        assert isinstance(new, dict)
        for key in old.keys() | new.keys():
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            if isinstance(a, BaseModel) and isinstance(b, BaseModel):
                da, db = a.model_dump(), b.model_dump()
                out.append(
                    f"{table}[{key}]: "
                    + ", ".join(f"{f}: {da[f]!r} -> {db[f]!r}" for f in da if da[f] != db[f])
                )
            else:
                out.append(f"{table}[{key}]: {a!r} -> {b!r}")
    return out


OPS = st.tuples(
    # Weighted toward what makes agents sleep and wake.
    st.sampled_from(
        ["assign"] * 3
        + ["block"] * 4
        + ["close"] * 3
        + ["unassign", "reopen", "comment", "pr", "review", "merge", "check", "idle", "idle"]
    ),
    ISSUES,
    ISSUES,
    st.booleans(),
)
STEPS = st.lists(
    st.tuples(
        OPS,
        st.integers(min_value=0, max_value=10_000),  # which queued message goes next (reordering)
        st.sampled_from(["deliver", "deliver", "deliver", "replay", "late", "fail"]),
    ),
    min_size=8,
    max_size=80,
)


# derandomize: CI is deterministic; explore with `--hypothesis-seed=N` and a larger max_examples.
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_random_interleavings_keep_the_invariants(
    steps: list[tuple[tuple[str, int, int, bool], int, str]],
) -> None:
    h = Harness()
    for op, pick, mode in steps:
        h.produce(op)
        if (mode == "late" or (mode == "replay" and h.touched)) and h.done:
            # Late, or no longer immediate: the state moved on since (a task went idle).
            h.deliver(h.done[pick % len(h.done)])
        elif mode == "replay" and h.done and not h.failed:
            # With a failed launch still queued, any event may finish that launch (healing);
            # otherwise an immediate replay must change nothing at all.
            event = h.done[-1]
            before = h.world.registry.snapshot_state()
            launched = dict(h.world.launcher.launched)
            h.deliver(event)
            changes = _diff(before, h.world.registry.snapshot_state())
            if event.origin == "github":
                # A framework command is judged against the graph of its moment (a refused
                # blocker may be valid later): its exactly-once comes from the per-delivery
                # processing record in the router handler, tested there. GitHub events must
                # be harmless to replay in the core itself.
                assert not changes, (
                    f"replaying {event.delivery_id} ({event.event}.{event.action}) changed {changes}"
                )
                assert h.world.launcher.launched == launched
        elif h.pending():
            h.deliver(h.next_message(pick), fail_launch=mode == "fail")
        h.check_invariants(quiescent=False)
    while h.pending():  # drain: every message is eventually processed (no poison)
        h.deliver(h.next_message(0))
        h.check_invariants(quiescent=False)
    h.check_invariants(quiescent=True)


def test_unknown_agent_events_never_crash() -> None:
    world = World()
    e = world.events
    for event in [
        e.comment(5),
        e.closed(5),
        e.unassigned(5),
        e.review(77, "feat/issue-5", "changes_requested"),
        e.pr_closed(77, "nobody", merged=True),
        e.check("feat/issue-5", "failure"),
        e.status(("feat/issue-5",), "error"),
        e.register_blocker(5, 6, agent_id="1-5-feat-dev", sleep=True),
    ]:
        world.send(event)
