"""The router shell: load what the core asks for, decide once, commit, carry it out.

One call of :meth:`RouterService.process` handles one inbound message (a webhook or a command, in
an envelope; Cosmic Python's handler: load, model, commit):

1. Ask :func:`~squadron.domain.routing.decide.decide` (pure) what it needs, read it, ask again:
   the decision committed for this delivery already (an earlier attempt crashed after its
   commit: then what it left undone is carried out, nothing is decided again), the registry's
   items of the event's issues and what they link to, the context (time, blocker graph, PM,
   permissions, inbox), and the retrospectives a completed retrospective agent held. Each kind of
   read is asked at most once; the shell never chooses its own.
2. The decision it returns has the event's facts (recorded, idempotent), the registry writes
   (agents, edges, links, inbox items), the record with its outbox of every effect outside the
   registry, and the domain events: committed in one transaction. A lost condition (a heartbeat
   moved an agent's version) re-reads and re-decides: nothing outside the registry has
   happened yet.
3. The outbox is carried out in order by :class:`~squadron.shell.outbox.OutboxExecutor`, each
   effect under its key, and the decision marked done.

It raises on any failure, so the record goes back to the queue (and, after enough
receives, to the DLQ); a decision left unfinished there is found by the
reconciler, which sends :class:`~squadron.domain.commands.FinishDecision`. A
repository whose configuration is invalid is paused (:meth:`RouterService.pause_for`):
its events are routed, but what would start something is withheld
(:func:`~squadron.domain.pause.hold_while_paused`, inside ``decide``), under a decision of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import assert_never

from squadron.domain.agents import ConflictError
from squadron.domain.effects import (
    Discard,
    Effect,
    Fact,
    RecordReview,
    SetIssueAssignment,
    SetIssueState,
    VouchIssue,
)
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.domain.routing.decide import (
    MAX_READS,
    NEEDS,
    Decided,
    Dropped,
    Loaded,
    Need,
    ReadContext,
    ReadDecision,
    ReadIssues,
    ReadLinkedIssues,
    ReadRetrospectives,
    Resume,
    Routed,
    decide,
)
from squadron.errors import SquadronError
from squadron.ports import EventQueue, MergeGatePort, Registry, RouterGitHub, TaskLauncher
from squadron.shell.change_set_commands import ChangeSetCommands
from squadron.shell.memory import Memory
from squadron.shell.outbox import OutboxExecutor
from squadron.shell.pipeline_runs import PipelineRuns
from squadron.shell.retrospective import Retrospectives

logger = logging.getLogger(__name__)


class UnboundedReadsError(SquadronError):
    """``decide`` asked for more reads than its kinds of need (a programming error)."""

    def __init__(self, delivery_id: str, need: Need) -> None:
        super().__init__(f"delivery {delivery_id}: decide asked again for {need.kind} past {MAX_READS} reads")


def _now() -> datetime:
    return datetime.now(UTC)


PolicySource = Callable[[EventEnvelope], RoutingPolicy]
#: Why the event's repository is paused (its configuration is invalid), or None.
PauseSource = Callable[[EventEnvelope], str | None]


@dataclass(frozen=True)
class RoutingResult:
    delivery_id: str
    effects: tuple[Effect, ...]
    #: ``"OLD>NEW"`` per agent status the effects changed (what the metrics count).
    transitions: tuple[str, ...] = ()
    #: Agents whose launch RunTask refused: held, to be retried with back-off.
    held: tuple[str, ...] = ()
    #: A decision committed by an earlier attempt was carried out (nothing was decided now).
    resumed: bool = False
    #: The kinds of the effects recorded now as refused for good (GitHub 404/410/422, given up).
    failed: tuple[str, ...] = ()
    #: Another executor held the decision: this one carried out nothing of it.
    busy: bool = False

    @property
    def discarded(self) -> bool:
        return all(isinstance(effect, Discard) for effect in self.effects)


class RouterService:
    def __init__(
        self,
        *,
        registry: Registry,
        launcher: TaskLauncher,
        github: RouterGitHub,
        policies: PolicySource,
        clock: Callable[[], datetime] = _now,
        attempts: int = 3,
        merge_gate: MergeGatePort | None = None,
        queue: EventQueue | None = None,
        paused: PauseSource | None = None,
        memory: Memory | None = None,
        retrospectives: Retrospectives | None = None,
        pipelines: PipelineRuns | None = None,
        change_sets: ChangeSetCommands | None = None,
    ) -> None:
        #: Carries out change-set commands (None: none in this deployment).
        self.change_sets = change_sets
        #: Publishes and starts the repositories' pipelines (None: none in this deployment).
        self.pipelines = pipelines
        #: Holds a retrospective when a decision asks for one (None: not held).
        self.retrospectives = retrospectives
        #: The repositories' memory: a person's merge confirms the facts its PR lists.
        self.memory = memory
        self.merge_gate = merge_gate
        self.paused = paused
        #: events.fifo, for the commands effects lead to (a filed blocker issue's registration).
        self.queue = queue
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.attempts = attempts
        self.registry = registry
        self.launcher = launcher
        self.github = github
        self.policies = policies
        self.clock = clock

    def pause_for(self, inbound: EventEnvelope) -> str | None:
        """Why ``inbound``'s repository is paused, or None (it is not, or nothing says)."""
        return self.paused(inbound) if self.paused is not None else None

    def process(
        self, inbound: EventEnvelope, *, pause: str | None = None, first_receive: bool = False
    ) -> RoutingResult:
        """Decide ``inbound``, commit the decision, carry it out (with ``pause``, only what starts nothing).

        A lost conditional write (an agent task renewed its lease or heartbeat between our
        read and our commit) stores nothing: re-read and re-decide, up to :attr:`attempts`
        times. Past the bound the ConflictError propagates and the queue retries the record
        later. A decision already committed for this delivery is carried out, not re-decided.

        ``first_receive``: the queue delivers this record for the first time, so no earlier
        attempt of it committed anything, and the decision is not looked up first (a read per
        event saved). Should another message of the same delivery have committed one, the
        commit says so (its record exists) and the next attempt carries that one out; a
        re-decision that commits nothing leaves it to the reconciler's sweep.
        """
        outbox = self._outbox()
        policy = self.policies(inbound)
        for attempt in range(1, self.attempts + 1):
            decided = self._decide(inbound, policy, pause, look_up=attempt > 1 or not first_receive)
            match decided:
                case Dropped(reason=reason):
                    return RoutingResult(inbound.delivery_id, (reason,))
                case Resume():
                    return self._resume(inbound, decided, outbox)
                case Routed():
                    for fact in decided.facts:
                        self._fact(fact, decided.now)
                    if decided.commits:
                        try:
                            self.registry.commit(decided.writes, decided.decision, decided.domain_events)
                        except ConflictError as exc:
                            if attempt == self.attempts:
                                raise
                            logger.info(
                                "conflict routing %s (attempt %d): %s; re-reading",
                                inbound.delivery_id,
                                attempt,
                                exc,
                            )
                            continue
                    decision = decided.decision
                    outbox.carry_out(
                        inbound,
                        decision.key,
                        decision.outside,
                        decided.now,
                        resumed=False,
                        finish=decided.finish,
                    )
                    return self._result(inbound.delivery_id, decided.effects, decided.transitions, outbox)
                case _:  # pragma: no cover - exhaustiveness
                    assert_never(decided)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _decide(
        self, inbound: EventEnvelope, policy: RoutingPolicy, pause: str | None, *, look_up: bool
    ) -> Decided:
        """Call :func:`decide` until it decides, reading each time what it asks for (bounded)."""
        loaded = Loaded()
        while True:
            answer = decide(inbound, policy, loaded, pause=pause, look_up_committed=look_up)
            if not isinstance(answer, NEEDS):
                return answer
            if loaded.has(answer):  # each kind is read once: at most MAX_READS rounds
                raise UnboundedReadsError(inbound.delivery_id, answer)
            loaded = self._read(inbound, answer, loaded)

    def _outbox(self) -> OutboxExecutor:
        """This delivery's executor, over the service's collaborators as they are now."""
        return OutboxExecutor(
            registry=self.registry,
            launcher=self.launcher,
            github=self.github,
            policies=self.policies,
            clock=self.clock,
            merge_gate=self.merge_gate,
            queue=self.queue,
            memory=self.memory,
            retrospectives=self.retrospectives,
            pipelines=self.pipelines,
            change_sets=self.change_sets,
        )

    def _resume(self, inbound: EventEnvelope, resume: Resume, outbox: OutboxExecutor) -> RoutingResult:
        decision = resume.decision
        if resume.finish:
            logger.info("carrying out what decision %s left undone", decision.key)
        else:
            logger.info(
                "decision %s was carried out already (%d launches checked)", decision.key, len(resume.outside)
            )
        outbox.carry_out(
            inbound, decision.key, resume.outside, decision.decided_at, resumed=True, finish=resume.finish
        )
        return self._result(inbound.delivery_id, resume.effects, (), outbox, resumed=True)

    @staticmethod
    def _result(
        delivery_id: str,
        effects: tuple[Effect, ...],
        transitions: tuple[str, ...],
        outbox: OutboxExecutor,
        *,
        resumed: bool = False,
    ) -> RoutingResult:
        return RoutingResult(
            delivery_id,
            effects,
            transitions,
            tuple(outbox.held),
            resumed=resumed,
            failed=tuple(outbox.failed),
            busy=outbox.busy,
        )

    # --- reads: what decide asked for -----------------------------------------------------

    def _read(self, inbound: EventEnvelope, need: Need, loaded: Loaded) -> Loaded:
        """``loaded`` with what ``need`` names read, and ``need`` answered."""
        registry = self.registry
        answered = loaded.answered | {need.kind}
        match need:
            case ReadDecision(key=key):
                return replace(loaded, answered=answered, committed=registry.decision(key))
            case ReadIssues(repo_id=repo, numbers=numbers, branches=branches):
                views = {**loaded.issues, **{n: registry.issue_view(repo, n) for n in sorted(numbers)}}
                links = registry.branch_links(repo, branches) if branches else {}
                return replace(
                    loaded, answered=answered, issues=views, branch_links={**loaded.branch_links, **links}
                )
            case ReadLinkedIssues(repo_id=repo, numbers=numbers):
                views = {**loaded.issues, **{n: registry.issue_view(repo, n) for n in sorted(numbers)}}
                return replace(loaded, answered=answered, issues=views)
            case ReadContext():
                graph = (
                    registry.blocker_graph(need.repo_id, need.graph_from, need.graph_depth)
                    if need.graph_from
                    else {}
                )
                return replace(
                    loaded,
                    answered=answered,
                    now=self.clock(),
                    graph=graph,
                    pm=registry.pm_agent(need.repo_id) if need.pm else None,
                    permissions=self._permissions(need),
                    inbox=tuple(registry.pending_inbox(need.inbox_of)) if need.inbox_of else (),
                )
            case ReadRetrospectives(repo_id=repo):
                held = (
                    self.retrospectives.store.retrospectives(repo) if self.retrospectives is not None else []
                )
                return replace(loaded, answered=answered, retrospectives=tuple(held))
            case _:  # pragma: no cover - exhaustiveness
                assert_never(need)

    def _permissions(self, need: ReadContext) -> dict[str, str]:
        """Each human actor's permission, from GitHub's permission endpoint (at most two per inbound).

        Never from the payload's ``author_association``: OWNER, MEMBER and COLLABORATOR do not
        imply write access, and an agent's echo could claim any of them.
        """
        return {
            login: self.github.permission(need.installation_id, need.repo_full_name, login)
            for login in sorted(need.permissions_of)
        }

    # --- writes ---------------------------------------------------------------------------

    def _fact(self, fact: Fact, now: datetime) -> None:
        """News of the event itself: idempotent, and older news never overwrites newer."""
        match fact:
            case SetIssueState(repo_id=repo_id, number=number, state=state, occurred_at=occurred_at):
                self.registry.set_issue_state(repo_id, number, state, occurred_at)
            case SetIssueAssignment(
                repo_id=repo_id, number=number, assigned=assigned, occurred_at=occurred_at
            ):
                self.registry.set_issue_assignment(repo_id, number, assigned, occurred_at)
            case VouchIssue(repo_id=repo_id, number=number, by=by, occurred_at=occurred_at):
                self.registry.vouch_issue(repo_id, number, by, occurred_at)
            case RecordReview():
                self.registry.record_review(fact, now)
