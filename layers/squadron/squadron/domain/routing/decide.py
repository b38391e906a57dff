"""The router's one decision: ``decide(inbound, policy, loaded) -> Read... | Decided`` — pure.

Cosmic Python's handler shape (load, model, commit): the router shell loads what this call
asks for, calls it again, and commits and carries out what it returns; it never picks its own
reads nor stitches a decision from several calls.

A call answers one of two ways:

- a :data:`Need`, a typed read it cannot do without (the committed decision of this delivery,
  the registry items of the event's issues, the issues those link to, the context of the
  judgement, the retrospectives a completed retrospective agent held). The shell reads it, adds
  it to :class:`Loaded` and calls again; every kind of need is asked at most once, so a
  decision takes at most :data:`MAX_READS` rounds;
- a :data:`Decided`: what happens next. :class:`Routed` is a new decision: the facts of the
  inbound message, the registry writes, the record with its outbox and the domain events of one commit,
  with what a paused repository holds back already held. :class:`Resume` carries out what a
  committed decision left undone. :class:`Dropped` says why nothing happens (a
  :class:`~squadron.domain.commands.FinishDecision` with nothing left to finish).

The same inbound message against the same loaded state always gives the same answer.

Names: ``inbound`` is what arrived on events.fifo, an :class:`~squadron.domain.events.EventEnvelope`
carrying either GitHub's webhook or a command (the framework's, or an agent's through the agent
gateway); ``domain_events`` are what a decision reports happened
(:mod:`squadron.domain.domain_events`), committed with it and published from the registry's stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from squadron.domain.agents import AgentRecord, AgentStatus, InboxItem
from squadron.domain.blockers import BlockerGraph
from squadron.domain.commands import FinishDecision
from squadron.domain.domain_events import DomainEvent, RetroWindow
from squadron.domain.effects import (
    Decision,
    Discard,
    Effect,
    Fact,
    LaunchAgent,
    Outside,
    Write,
    agent_writes,
    decision_key,
    split_decision,
    status_changes,
)
from squadron.domain.event_derivation import derive
from squadron.domain.events import EventEnvelope
from squadron.domain.pause import hold_while_paused
from squadron.domain.retrospective import ROLE as RETRO_ROLE
from squadron.domain.retrospective import RetroRecord
from squadron.domain.routing.normalize import as_webhook
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import IssueView, Snapshot, SnapshotRequest, snapshot_request
from squadron.domain.routing.table import route

# --- what decide asks the shell to read --------------------------------------------------------


@dataclass(frozen=True)
class ReadDecision:
    """The decision committed under ``key``, if any (an earlier attempt may have committed it)."""

    key: str
    kind: Literal["decision"] = "decision"


@dataclass(frozen=True)
class ReadIssues:
    """The registry's view of these issue and pull request numbers, and which issue each
    branch is linked to."""

    repo_id: int
    numbers: frozenset[int]
    branches: frozenset[str] = frozenset()
    kind: Literal["issues"] = "issues"


@dataclass(frozen=True)
class ReadLinkedIssues:
    """The second round: the views of the issues the first round's views and branches link to
    (a PR's issue, what a closed issue blocks, an issue's pull requests)."""

    repo_id: int
    numbers: frozenset[int]
    kind: Literal["linked_issues"] = "linked_issues"


@dataclass(frozen=True)
class ReadContext:
    """The rest of what routing reads: the time, the blocker graph from ``graph_from`` (to
    ``graph_depth``), the PM, the permission of each human actor (from GitHub, never the
    payload's association) and an agent's pending inbox."""

    repo_id: int
    installation_id: int | None
    repo_full_name: str
    graph_from: frozenset[int] = frozenset()
    graph_depth: int = 0
    pm: bool = False
    permissions_of: frozenset[str] = frozenset()
    inbox_of: str | None = None
    kind: Literal["context"] = "context"


@dataclass(frozen=True)
class ReadRetrospectives:
    """The retrospectives held in a repository (read only when the decision completes a
    retrospective's agent: its domain event reports the retrospective's period)."""

    repo_id: int
    kind: Literal["retrospectives"] = "retrospectives"


Need = ReadDecision | ReadIssues | ReadLinkedIssues | ReadContext | ReadRetrospectives
NEEDS = (ReadDecision, ReadIssues, ReadLinkedIssues, ReadContext, ReadRetrospectives)
#: Every kind of need is asked at most once per decision, so this many rounds always suffice.
MAX_READS = len(NEEDS) + 1


@dataclass(frozen=True)
class Loaded:
    """What the shell has read for one inbound message, round by round (``answered``: the needs' kinds)."""

    answered: frozenset[str] = frozenset()
    committed: Decision | None = None
    now: datetime | None = None
    issues: Mapping[int, IssueView] = field(default_factory=dict)
    branch_links: Mapping[str, int] = field(default_factory=dict)
    pm: AgentRecord | None = None
    graph: BlockerGraph = field(default_factory=dict)
    permissions: Mapping[str, str] = field(default_factory=dict)
    inbox: tuple[InboxItem, ...] = ()
    retrospectives: tuple[RetroRecord, ...] = ()

    def has(self, need: Need) -> bool:
        return need.kind in self.answered

    def snapshot(self) -> Snapshot:
        assert self.now is not None, "the context was not read"
        return Snapshot(
            now=self.now,
            issues=self.issues,
            pm=self.pm,
            branch_links=self.branch_links,
            graph=self.graph,
            permissions=self.permissions,
            inbox=self.inbox,
        )


# --- what decide answers once it has what it needs ---------------------------------------------


@dataclass(frozen=True)
class Routed:
    """A new decision: apply ``facts``, commit ``writes`` with ``decision`` and ``events`` (when
    :attr:`commits`), then carry out ``decision.outside`` (claimed, when :attr:`finish`)."""

    effects: tuple[Effect, ...]
    facts: tuple[Fact, ...]
    writes: tuple[Write, ...]
    decision: Decision
    domain_events: tuple[DomainEvent, ...]
    #: ``"OLD>NEW"`` per agent status the effects change (what the metrics count).
    transitions: tuple[str, ...]
    #: The time the decision was made on (facts are recorded with it).
    now: datetime

    @property
    def commits(self) -> bool:
        """Whether anything is committed (a decision of discards alone stores nothing)."""
        return bool(self.writes or self.decision.outside or self.domain_events)

    @property
    def finish(self) -> bool:
        """Whether the outbox is claimed and finished: launches alone need no sweep (an agent's
        committed pending launch is its own outbox), so their decision is done at once."""
        return not self.decision.done


@dataclass(frozen=True)
class Resume:
    """Carry out what the committed ``decision`` left undone (``outside``): all of it under its
    claim (``finish``), or, for a decision done already, its launches only (each a no-op
    unless still pending)."""

    decision: Decision
    outside: tuple[Outside, ...]
    finish: bool
    #: What the result reports (a done decision's: nothing).
    effects: tuple[Effect, ...]


@dataclass(frozen=True)
class Dropped:
    """Nothing happens, and nothing is committed: ``reason`` says why."""

    reason: Discard


Decided = Routed | Resume | Dropped


def decide(
    inbound: EventEnvelope,
    policy: RoutingPolicy,
    loaded: Loaded,
    *,
    pause: str | None = None,
    look_up_committed: bool = True,
) -> Need | Decided:
    """The next read ``inbound``'s decision needs, or the decision (see the module).

    ``pause``: why the event's repository is paused (what would start something is held back,
    under a decision of its own key). ``look_up_committed``: whether an earlier attempt may have
    committed this delivery's decision (then it is carried out, not decided again).
    """
    if isinstance(inbound.command, FinishDecision):
        return _finish(inbound, inbound.command.decision, loaded)
    key = decision_key(inbound.delivery_id, paused=pause is not None)
    if look_up_committed:
        asked = ReadDecision(key)
        if not loaded.has(asked):
            return asked
        if loaded.committed is not None:
            return resumption(loaded.committed)
    request = snapshot_request(inbound, policy)
    need = _next_read(inbound, policy, request, loaded)
    if need is not None:
        return need
    snapshot = loaded.snapshot()
    effects = route(inbound, snapshot, policy)
    if pause is not None:
        effects = hold_while_paused(effects, snapshot.agents(), pause)
    completed = _retrospective_agents(effects)
    if completed:
        asked_retro = ReadRetrospectives(completed[0].repo_id)
        if not loaded.has(asked_retro):
            return asked_retro
    split = split_decision(effects)
    kept = any(not isinstance(e, LaunchAgent) for e in split.outside)
    decision = Decision(
        key,
        snapshot.now,
        split.outside,
        done=not kept,
        installation_id=inbound.installation_id,
        repo_full_name=inbound.repository.full_name,
        repo_id=inbound.repository.id,
    )
    domain_events = derive(
        as_webhook(inbound, policy.bot_login),  # an agent's action as the webhook it stands for
        decision=key,
        before=snapshot.agents(),
        blockers={n: view.blockers for n, view in snapshot.issues.items()},
        linked_issues={n: view.linked_issue for n, view in snapshot.issues.items()},
        effects=effects,
        at=snapshot.now,
        retrospectives=retro_windows(completed, loaded.retrospectives),
    )
    return Routed(
        effects=tuple(effects),
        facts=split.facts,
        writes=split.writes,
        decision=decision,
        domain_events=domain_events,
        transitions=status_changes(snapshot.agents(), effects),
        now=snapshot.now,
    )


def _next_read(
    inbound: EventEnvelope, policy: RoutingPolicy, request: SnapshotRequest, loaded: Loaded
) -> Need | None:
    """The registry's items ``request`` names, in rounds: the issues, then what they link to,
    then the context."""
    repo = inbound.repository.id
    first = ReadIssues(repo, request.issues, request.branches)
    if not loaded.has(first):
        return first
    if request.follow_links and not loaded.has(ReadLinkedIssues(repo, frozenset())):
        linked = linked_issues(request, loaded.issues, loaded.branch_links, policy)
        if linked:
            return ReadLinkedIssues(repo, linked)
    context = ReadContext(
        repo,
        inbound.installation_id,
        inbound.repository.full_name,
        graph_from=request.graph_from,
        graph_depth=policy.max_issue_depth + 1 if request.graph_from else 0,
        pm=request.pm,
        permissions_of=request.permissions_of,
        inbox_of=request.inbox_of,
    )
    return None if loaded.has(context) else context


def linked_issues(
    request: SnapshotRequest,
    views: Mapping[int, IssueView],
    links: Mapping[str, int],
    policy: RoutingPolicy,
) -> frozenset[int]:
    """The issues the first round's ``views`` and branches link to that it did not read: a PR's
    or branch's issue, what a closed issue blocks, the first pull requests of an issue whose
    reviewers' cost counts for its budget."""
    more: set[int] = set(links.values())
    for view in views.values():
        if view.linked_issue is not None:
            more.add(view.linked_issue)
        more.update(view.blocks)
        if view.number in request.pull_requests_of:
            more.update(sorted(view.pull_requests)[:5])
    for branch in request.branches:
        parsed = policy.issue_from_branch(branch)
        if parsed is not None:
            more.add(parsed)
    return frozenset(more - views.keys())


def _retrospective_agents(effects: Sequence[Effect]) -> list[AgentRecord]:
    """The retrospective agents the effects complete (their issue is the retrospective's)."""
    return [
        w.record
        for w in agent_writes(effects)
        if w.record.role == RETRO_ROLE and w.record.status is AgentStatus.COMPLETED and w.record.issue_number
    ]


def retro_windows(completed: Sequence[AgentRecord], held: Sequence[RetroRecord]) -> dict[int, RetroWindow]:
    """What the domain events report of each retrospective a completed agent held."""
    by_issue = {r.issue_number: r for r in held}
    return {
        record.issue_number: RetroWindow(
            window_start=r.window_start,
            window_end=r.window_end,
            proposals=len(r.items),
            pull_request=r.pull_request,
        )
        for record in completed
        if record.issue_number is not None and (r := by_issue.get(record.issue_number)) is not None
    }


def resumption(decision: Decision) -> Resume:
    """What is left of a committed decision: all its outbox under a claim, or, done already,
    its launches only."""
    if decision.done:
        launches = tuple(effect for effect in decision.outside if isinstance(effect, LaunchAgent))
        return Resume(decision, launches, finish=False, effects=())
    return Resume(decision, decision.outside, finish=True, effects=decision.outside)


def _finish(inbound: EventEnvelope, key: str, loaded: Loaded) -> ReadDecision | Decided:
    """The reconciler's FinishDecision: carry out an unfinished decision of the event's
    repository, decide nothing."""
    asked = ReadDecision(key)
    if not loaded.has(asked):
        return asked
    decision = loaded.committed
    if decision is None or decision.done:
        reason = "no such decision" if decision is None else "carried out already"
        return Dropped(Discard(f"decision {key}: {reason}"))
    if decision.repo_id != inbound.repository.id:
        return Dropped(Discard(f"decision {key} is not of repository {inbound.repository.id}"))
    return resumption(decision)
