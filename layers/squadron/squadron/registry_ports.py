"""The agent registry's ports, one per concern: what a caller that needs only part of the registry
depends on (:class:`squadron.ports.Registry`, the router's, is several of them at once).

Each port has one DynamoDB adapter module under :mod:`squadron.adapters.registry` (named in its
docstring; :class:`squadron.adapters.dynamo_registry.DynamoRegistry` is all of them on one table)
and one contract suite under ``tests/unit/registry/`` that every implementation passes (the
adapter under moto and the in-memory fake the routing tests use).

Every write is conditional: a lost condition raises
:class:`squadron.domain.agents.ConflictError` (the agent's version moved, the item already
exists, a blocker is already closed), or is a silent no-op where the write only guards against
older news.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from squadron.domain.agents import AgentRecord, AgentStatus, ConflictError, InboxItem, IssueState
from squadron.domain.change_sets import ChangeSet
from squadron.domain.dashboard import GateView
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import AgentWrite, Decision, RecordReview, Write
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.outbox import Claim, FailedEffect
from squadron.domain.pipelines.agent_stage import StageWait
from squadron.domain.pipelines.humans import HumanWait
from squadron.domain.pipelines.reactions import RunRecord
from squadron.domain.routing import IssueView
from squadron.domain.writes import WriteClaim


class AgentRecords(Protocol):
    """Agents by id, each written on the version read (``adapters/registry/agents.py``)."""

    def get_agent(self, agent_id: str) -> AgentRecord | None: ...

    def pm_agent(self, repo_id: int) -> AgentRecord | None: ...

    def put_agent(self, write: AgentWrite) -> None: ...

    def claim_uid(self, agent_id: str, at: datetime) -> int:
        """The agent's POSIX uid, claimed on first use: no other agent ever holds the same one.
        ConflictError when the agent does not exist."""
        ...


class AgentListings(Protocol):
    """Agents by status, eventually consistent (``adapters/registry/agent_listings.py``): the
    reconciler's sweep, the janitor's and the dashboards' reads."""

    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]:
        """Every agent in ``status``, oldest update first (finished ones by their finish)."""
        ...

    def finished_agents(self, before: datetime, limit: int) -> list[AgentRecord]:
        """Up to ``limit`` finished agents whose state was not purged, finished before ``before``,
        the longest finished first."""
        ...

    def recently_finished(self, limit: int) -> list[AgentRecord]:
        """Up to ``limit`` agents of each terminal status that finished last (their state not
        purged yet), newest first."""
        ...


class IssueGraph(Protocol):
    """What the registry knows of an issue or pull request: its agents, state, blockers and links
    (``adapters/registry/issue_graph.py``). A write passed an ``agent`` stores it in the same
    change, conditional on its version."""

    def issue_view(self, repo_id: int, number: int) -> IssueView: ...

    def branch_links(self, repo_id: int, branches: Iterable[str]) -> dict[str, int]: ...

    def blocker_graph(self, repo_id: int, roots: Iterable[int], max_hops: int) -> dict[int, frozenset[int]]:
        """Forward edges (issue -> open blockers) reachable from ``roots`` in either direction."""
        ...

    def record_live_spend(self, repo_id: int, issue: int, spend: LiveSpend) -> None:
        """Keep what a running task of the issue has spent so far (its next report replaces it);
        :attr:`IssueView.live` reads it back."""
        ...

    def set_issue_state(self, repo_id: int, number: int, state: IssueState, at: datetime) -> None:
        """Store ``state`` as of GitHub time ``at`` unless a state from a later time is stored (then no-op)."""
        ...

    def set_issue_assignment(self, repo_id: int, number: int, assigned: bool, at: datetime) -> None:
        """Store whether the App is assigned as of GitHub time ``at`` unless later news is stored."""
        ...

    def vouch_issue(self, repo_id: int, number: int, by: str, at: datetime) -> None:
        """Store that ``by`` vouched for the issue (a writer's approval); an issue stays vouched."""
        ...

    def add_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None: ...

    def remove_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None: ...

    def link_pull_request(
        self, repo_id: int, pr_number: int, issue_number: int, agent: AgentWrite | None, at: datetime
    ) -> None: ...


class Inboxes(Protocol):
    """Each agent's inbox (``adapters/registry/inbox.py``)."""

    def deliver(self, item: InboxItem) -> None:
        """Add an inbox item; delivering the same (agent, delivery, kind) twice stores it once."""
        ...

    def pending_inbox(self, agent_id: str) -> list[InboxItem]:
        """The agent's undelivered inbox items, oldest first."""
        ...

    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None:
        """Remove items the agent has read (an item not there is no error)."""
        ...


class Launches(Protocol):
    """A pending launch's progress, each write conditional on its token still pending
    (``adapters/registry/launches.py``)."""

    def confirm_launch(self, agent_id: str, token: str, task_arn: str, at: datetime) -> None:
        """Record the task of a pending launch; a no-op if ``token`` is no longer pending."""
        ...

    def arm_launch(
        self,
        agent_id: str,
        token: str,
        secret_hash: str,
        expires_at: datetime,
        at: datetime,
        *,
        replacing: str | None = None,
    ) -> bool:
        """Store the hash of the pending launch's secret, if the launch is not armed yet (or,
        with ``replacing``, still armed with that hash); False when ``token`` is no longer
        pending or its arming is not the one expected (:mod:`squadron.shell.launching`)."""
        ...

    def hold_launch(self, agent_id: str, token: str, error: str, at: datetime) -> bool:
        """Count a failed RunTask on the pending launch ``token`` (which stays pending)."""
        ...


class Leases(Protocol):
    """One live task per agent (``adapters/registry/leases.py``)."""

    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord:
        """Hold the agent's lease until ``now + ttl`` (renewed for its holder); ConflictError
        while another owner holds an unexpired one, or when the agent does not exist."""
        ...

    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None:
        """Give the lease up; a no-op unless ``owner`` holds it."""
        ...


class WriteClaims(Protocol):
    """An agent task's GitHub writes, each carried out once (``adapters/registry/write_claims.py``)."""

    def claim_write(self, agent_id: str, key: str, now: datetime) -> WriteClaim | None:
        """None the first time (carry the write out), else what the earlier claim left."""
        ...

    def record_write(self, agent_id: str, key: str, result: Any) -> None:
        """Keep GitHub's answer to the claimed write ``key`` (a re-sent request gets it back)."""
        ...


class GateRecords(Protocol):
    """Reviews of pull requests and the merge gate's verdicts (``adapters/registry/gate.py``)."""

    def record_review(self, review: RecordReview, at: datetime) -> None:
        """Store a reviewer's review on the pull request unless one with a higher review id is stored."""
        ...

    def reviews_of(self, repo_id: int, pr_number: int) -> dict[str, RecordReview]:
        """The latest review of each reviewer of a pull request."""
        ...

    def gate_verdict(self, repo_id: int, pr_number: int) -> str | None:
        """The merge gate's latest verdict on the PR, or None (never judged)."""
        ...

    def gate_state(self, repo_id: int, pr_number: int) -> tuple[str | None, str]:
        """The gate's latest verdict on the PR (None: never judged) and what it said (its
        squadron/merge status text: what it waits for)."""
        ...

    def gate_views(self, repo_id: int, pr_numbers: Iterable[int]) -> dict[int, GateView]:
        """The gate's verdict and what it said on each of ``pr_numbers`` it judged."""
        ...

    def set_gate_description(self, repo_id: int, pr_number: int, verdict: str, description: str) -> bool:
        """Store what the gate says now, if its verdict is still ``verdict`` (no event: the verdict
        did not change); False when it changed meanwhile."""
        ...

    def change_verdict(self, repo_id: int, pr_number: int, previous: str | None, event: DomainEvent) -> bool:
        """Store the verdict ``event`` reports and the event, if the verdict is still ``previous``.

        False (nothing stored) when another judgement changed it meanwhile, or ``event`` exists.
        """
        ...


class Decisions(Protocol):
    """The commit point and its records (``adapters/registry/decisions.py``)."""

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        """Store a decision's conditional ``writes``, its domain ``events`` and its record all or
        nothing (the events are published from there, once: see :mod:`squadron.domain.domain_events`).

        Raises :class:`~squadron.domain.agents.ConflictError` (nothing stored) when a condition
        fails, the decision's record existing already among them.
        """
        ...

    def decision(self, key: str) -> Decision | None:
        """The committed decision ``key`` (done or not), or None."""
        ...

    def finish_decision(self, key: str, at: datetime) -> None:
        """Mark decision ``key`` carried out (its outbox is no longer needed)."""
        ...

    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]:
        """Decisions not carried out and not tried since ``decided_before``, longest untouched first."""
        ...


def commit_or_resume(
    decisions: Decisions, writes: Sequence[Write], decision: Decision
) -> tuple[Decision, bool]:
    """Commit ``decision`` with its ``writes``: the decision to carry out, and whether an earlier
    attempt committed it (a conflict where the decision of that key is stored already: that one is
    resumed). A conflict with no such decision propagates (what was read changed since: the
    caller's work is delivered again)."""
    try:
        decisions.commit(writes, decision)
    except ConflictError:
        committed = decisions.decision(decision.key)
        if committed is None:
            raise
        return committed, True
    return decision, False


class Outbox(Protocol):
    """Who carries out a committed decision's effects, and what of them is settled
    (``adapters/registry/outbox.py``; see :mod:`squadron.domain.outbox`)."""

    def claim_decision(self, key: str, owner: str, now: datetime) -> Claim | None:
        """Hold decision ``key`` for one executor; None when it is done, unknown, or another
        executor's unexpired claim holds it."""
        ...

    def settle_effect(self, key: str, owner: str, index: int) -> bool:
        """Record effect ``index`` carried out; False when ``owner`` no longer holds the claim."""
        ...

    def fail_effect(self, key: str, owner: str, failed: FailedEffect) -> bool:
        """Record ``failed`` (never tried again) where operators see it; False when ``owner`` no
        longer holds the claim."""
        ...

    def release_decision(self, key: str, owner: str, error: str) -> None:
        """Give up ``owner``'s claim of ``key`` now, keeping ``error`` for the next executor."""
        ...

    def failed_effects(self, repo_id: int, limit: int = 20) -> list[FailedEffect]:
        """The repository's effects refused for good, newest first."""
        ...


class History(Protocol):
    """A repository's committed domain events by time (``adapters/registry/history.py``)."""

    def history(self, repo_id: int, start: datetime, end: datetime, limit: int = 5000) -> list[DomainEvent]:
        """The repository's committed domain events of ``[start, end)``, by time then id (at most ``limit``).

        Raises :class:`~squadron.domain.history.PeriodError` when a bound is naive or
        ``start`` is after ``end``. Events live as long as the stage's history retention.
        """
        ...

    def record_event(self, event: DomainEvent) -> bool:
        """Store ``event`` alone, once: False when its id is stored already (nothing changes).

        For what happens outside a routed decision and is keyed by what it reports (a pipeline
        run's transitions, :mod:`squadron.domain.pipeline_events`): stored, it is published from
        the table's stream as a committed decision's events are, and kept as history.
        """
        ...


class HumanWaits(Protocol):
    """Pipelines' human stages waiting for people, by issue or pull request
    (``adapters/registry/human_waits.py``): opened when the stage's task arrives, counted toward by
    the webhooks that answer it, closed once its answer is sent."""

    def open_wait(self, wait: HumanWait) -> HumanWait:
        """Keep ``wait`` unless its entry is kept already; what is kept (the first, on a retry)."""
        ...

    def open_waits(self, repo_id: int, number: int) -> list[HumanWait]:
        """The waits of ``number`` whose answer is not sent yet, oldest first."""
        ...

    def count_toward(self, repo_id: int, number: int, entry: str, login: str) -> HumanWait | None:
        """Add ``login`` to who counted toward the wait (each login once); the wait as it is now,
        None when there is no such wait."""
        ...

    def keep_answer(self, repo_id: int, number: int, entry: str, answer: dict[str, Any]) -> HumanWait:
        """Keep ``answer`` unless one is kept already (the first stays): the wait as kept. Before
        the answer is sent. ConflictError when there is no such wait."""
        ...

    def close_wait(self, repo_id: int, number: int, entry: str) -> None:
        """The wait's answer was sent (or its task is over): it is no longer open."""
        ...

    def mark_gone(self, repo_id: int, number: int, entry: str) -> None:
        """The wait's kept answer found its task over: it stays open (``gone``) for an extension
        of its stage to take (nothing when there is no such wait)."""
        ...


class PipelineRunIndex(Protocol):
    """The pipeline runs started on each issue or pull request, so an event can reach them
    (``adapters/registry/pipeline_run_index.py``; docs/pipelines.md, "Reactive handlers at run time").

    Kept in the registry rather than found through Step Functions: finding a subject's runs there
    means listing every running execution of each of the repository's state machines and
    describing each one to read its input (its name is a hash), so a steering event would cost a
    call per running run of the repository; here it is one query of the subject's partition. A
    run is recorded when the outbox starts it and forgotten once a reaction finds it over (an
    item also expires after the longest run time), so a later event reads only the runs that may
    still be going.
    """

    def record_run(self, run: RunRecord) -> None:
        """Record ``run`` (again: harmless, the record is the same)."""
        ...

    def runs_of(self, repo_id: int, number: int | None) -> list[RunRecord]:
        """The recorded runs of the subject (None: repository-wide runs), newest first, at most
        :data:`~squadron.domain.pipelines.reactions.MAX_RUNS_PER_SUBJECT`."""
        ...

    def forget_run(self, run: RunRecord) -> bool:
        """Forget ``run``, found over, as it was read; whether it was forgotten. Nothing when it is
        not recorded, or when its record was written again since it was read (its ``started_at``
        differs): another writer's record is kept, and the next event reads it again."""
        ...


class ChangeSets(Protocol):
    """Change sets across repositories and their lifecycle events
    (``adapters/registry/change_sets.py``; docs/change-sets.md). Each step is stored on the
    version read: of two routers stepping the same set at once one wins, the other gets
    :class:`~squadron.domain.agents.ConflictError`, and a set never goes back to an older version."""

    def create_change_set(self, change_set: ChangeSet, events: Sequence[DomainEvent]) -> None:
        """Store a new set and its events, counted among its installation's open sets.

        ConflictError (nothing stored) when the set exists, or its installation has
        :data:`~squadron.domain.change_sets.MAX_OPEN_PER_INSTALLATION` sets open already.
        """
        ...

    def save_change_set(self, before: ChangeSet, after: ChangeSet, events: Sequence[DomainEvent]) -> None:
        """Store ``after`` and its events if ``before``'s version is still the one stored (a set
        that is over no longer counts as open); ConflictError (nothing stored) when another step
        stored it first."""
        ...

    def get_change_set(self, set_id: str) -> ChangeSet | None: ...

    def change_sets(self, limit: int = 50) -> list[ChangeSet]:
        """The newest ``limit`` sets (by creation), newest first."""
        ...

    def open_change_sets(self, installation_id: int) -> int:
        """How many of the installation's sets are not over."""
        ...


class StageWaits(Protocol):
    """Pipeline agent stages' task tokens, one wait per agent, each answered once
    (``adapters/registry/stage_waits.py``; :mod:`squadron.domain.pipelines.agent_stage`)."""

    def hold_stage_wait(self, wait: StageWait, *, replacing: str | None = None) -> StageWait:
        """Keep ``wait`` as its agent's when the agent holds none, or one whose answer was sent,
        or (``replacing``) still the wait of that entry; ``wait`` is returned then. Otherwise
        nothing is written and the wait the agent holds is returned (another stage's, or this
        entry's from an earlier attempt, with whatever answer it has)."""
        ...

    def stage_wait(self, agent_id: str) -> StageWait | None:
        """The agent's wait (answered or not), or None."""
        ...

    def answer_stage_wait(self, agent_id: str, entry: str, answer: dict[str, Any]) -> StageWait | None:
        """Keep ``answer`` on the agent's wait of ``entry`` unless it has one already; the wait as
        stored after (with its first answer), or None when the agent holds no wait of ``entry``."""
        ...

    def mark_stage_wait_sent(self, agent_id: str, entry: str) -> None:
        """Mark the answer of the agent's wait of ``entry`` sent (a no-op for another entry)."""
        ...
