"""Narrow interfaces the shell depends on; adapters implement them, tests fake them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from squadron.domain.agents import AgentRecord, InboxItem, IssueState
from squadron.domain.artifacts import Artifact
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import AgentWrite, Decision, RecordReview, Write
from squadron.domain.events import EventEnvelope
from squadron.domain.memory import MemoryFact
from squadron.domain.metrics import MetricPoint
from squadron.domain.outbox import Claim, FailedEffect
from squadron.domain.retrospective import RetroRecord
from squadron.domain.routing import IssueView


class EventQueue(Protocol):
    """Where accepted events go: events.fifo."""

    def send(self, envelope: EventEnvelope) -> str:
        """Enqueue ``envelope`` in its message group; return the queue's message id.

        Raises :class:`squadron.adapters.errors.QueueUnavailableError` when the
        queue did not take the message.
        """
        ...


class SecretSource(Protocol):
    """Reads secret values (webhook secret, App private key) by id."""

    def get(self, secret_id: str) -> str:
        """Return the current value; raises ``SecretUnavailableError`` when it cannot."""
        ...


class Registry(Protocol):
    """The agent registry (DynamoDB on AWS). Every write is conditional.

    Writes raise :class:`squadron.domain.agents.ConflictError` when their
    condition fails: the agent's version moved, the item already exists, or a
    blocker is already closed.
    """

    def issue_view(self, repo_id: int, number: int) -> IssueView: ...

    def branch_links(self, repo_id: int, branches: Iterable[str]) -> dict[str, int]: ...

    def get_agent(self, agent_id: str) -> AgentRecord | None: ...

    def pm_agent(self, repo_id: int) -> AgentRecord | None: ...

    def blocker_graph(self, repo_id: int, roots: Iterable[int], max_hops: int) -> dict[int, frozenset[int]]:
        """Forward edges (issue -> open blockers) reachable from ``roots`` in either direction."""
        ...

    def put_agent(self, write: AgentWrite) -> None: ...

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

    def deliver(self, item: InboxItem) -> None:
        """Add an inbox item; delivering the same (agent, delivery, kind) twice stores it once."""
        ...

    def record_review(self, review: RecordReview, at: datetime) -> None:
        """Store a reviewer's review on the pull request unless one with a higher review id is stored."""
        ...

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

    def pending_inbox(self, agent_id: str) -> list[InboxItem]:
        """The agent's undelivered inbox items, oldest first."""
        ...

    def hold_launch(self, agent_id: str, token: str, error: str, at: datetime) -> bool:
        """Count a failed RunTask on the pending launch ``token`` (which stays pending)."""
        ...

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        """Store a decision's conditional ``writes``, its domain ``events`` and its record all or
        nothing (the events are published from there, once: see :mod:`squadron.domain.domain_events`).

        Raises :class:`~squadron.domain.agents.ConflictError` (nothing stored) when a condition
        fails, the decision's record existing already among them.
        """
        ...

    def gate_verdict(self, repo_id: int, pr_number: int) -> str | None:
        """The merge gate's latest verdict on the PR, or None (never judged)."""
        ...

    def gate_state(self, repo_id: int, pr_number: int) -> tuple[str | None, str]:
        """The gate's latest verdict on the PR (None: never judged) and what it said (its
        squadron/merge status text: what it waits for)."""
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

    def decision(self, key: str) -> Decision | None:
        """The committed decision ``key`` (done or not), or None."""
        ...

    def history(self, repo_id: int, start: datetime, end: datetime, limit: int = 5000) -> list[DomainEvent]:
        """The repository's committed domain events of ``[start, end)``, by time then id (at most ``limit``).

        Raises :class:`~squadron.domain.history.PeriodError` when a bound is naive or
        ``start`` is after ``end``. Events live as long as the stage's history retention.
        """
        ...

    def finish_decision(self, key: str, at: datetime) -> None:
        """Mark decision ``key`` carried out (its outbox is no longer needed)."""
        ...

    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]:
        """Decisions not carried out and not tried since ``decided_before``, longest untouched first."""
        ...

    def claim_decision(self, key: str, owner: str, now: datetime) -> Claim | None:
        """Hold decision ``key`` for one executor (see :mod:`squadron.domain.outbox`); None when
        it is done, unknown, or another executor's unexpired claim holds it."""
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


class TaskLauncher(Protocol):
    """Starts and stops agent tasks (ECS Fargate on AWS, local processes in the local stack)."""

    def launch(self, agent_id: str, purpose: str, token: str, secret: str) -> str:
        """Start a task for ``agent_id`` holding the launch's ``secret``; return its id.

        The same (``token``, ``secret``) never starts a second task; the router arms a launch
        again with a new secret only when no task of it runs (:meth:`find`) and the executor
        that armed it before is gone (:mod:`squadron.shell.launching`).
        """
        ...

    def find(self, token: str) -> str | None:
        """The task of launch ``token`` that is starting or running (not stopped), if any: what
        an earlier attempt of the launch started (the newest, should there be more)."""
        ...

    def stop(self, task_arn: str, reason: str) -> None: ...


class RouterGitHub(Protocol):
    """The few GitHub calls the router makes itself (the rest happen inside agent tasks)."""

    def permission(self, installation_id: int | None, repo_full_name: str, login: str) -> str:
        """The user's permission on the repository: admin, maintain, write, triage, read or none."""
        ...

    def comment(
        self,
        installation_id: int | None,
        repo_full_name: str,
        number: int,
        body: str,
        author: str,
        *,
        key: str | None = None,
    ) -> None:
        """Comment as the framework; ``key`` (an effect's idempotency key) is marked in the body."""
        ...

    def close_issue(
        self, installation_id: int | None, repo_full_name: str, number: int, reason: str
    ) -> None: ...

    def add_labels(
        self, installation_id: int | None, repo_full_name: str, number: int, labels: tuple[str, ...]
    ) -> None: ...

    def create_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        *,
        title: str,
        body: str,
        labels: tuple[str, ...],
        assignees: tuple[str, ...],
        key: str | None = None,
    ) -> int:
        """Open an issue as the framework; its number. ``key`` is marked in the body."""
        ...

    def find_comment(
        self, installation_id: int | None, repo_full_name: str, number: int, key: str, since: datetime
    ) -> bool:
        """Whether the App commented on ``number`` with ``key`` marked, at or after ``since``."""
        ...

    def find_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        key: str,
        labels: tuple[str, ...],
        since: datetime,
    ) -> int | None:
        """The number of the issue the App opened with ``key`` marked, or None. ``labels`` are
        what it was opened with, never a filter: a person may have taken one off since."""
        ...

    def issue_state(self, installation_id: int | None, repo_full_name: str, number: int) -> str:
        """An issue's state (``open``/``closed``) or a pull request's (``open``/``merged``/``closed``);
        ``unknown`` when GitHub has none to give."""
        ...


class GateVerdict(Protocol):
    """A judgement's result (``squadron.domain.approval.GateResult`` satisfies it)."""

    @property
    def verdict(self) -> str: ...
    @property
    def description(self) -> str: ...


class GateJudgement(Protocol):
    """What one evaluation returns (``squadron.shell.merge_gate.GateOutcome`` satisfies it)."""

    @property
    def result(self) -> GateVerdict | None: ...


class MergeGatePort(Protocol):
    """Judges a pull request against its approval flow (``squadron.shell.merge_gate.MergeGate``)."""

    def evaluate(
        self,
        installation_id: int | None,
        repo: str,
        pr_number: int,
        author_role: str | None = None,
        *,
        issue_number: int | None = None,
        cause: str = "",
    ) -> GateJudgement: ...


class MemoryStore(Protocol):
    """A repository's memory (:mod:`squadron.domain.memory`); writes are conditional on the
    version read (:class:`~squadron.domain.agents.ConflictError` when it moved)."""

    def facts(self, repo_id: int) -> list[MemoryFact]: ...

    def put_fact(
        self, fact: MemoryFact, expected_version: int | None, expires_at: datetime | None
    ) -> None: ...

    def delete_fact(self, repo_id: int, fact_id: str) -> bool: ...


class RetroStore(Protocol):
    """A repository's retrospectives (:mod:`squadron.domain.retrospective`); writes conditional on
    the version read."""

    def retrospectives(self, repo_id: int) -> list[RetroRecord]: ...

    def put_retrospective(self, record: RetroRecord, expected_version: int | None) -> None: ...


class ArtifactStore(Protocol):
    """What agents produce for each other (:mod:`squadron.domain.artifacts`); writes conditional
    on the version read."""

    def artifacts(self, repo_id: int) -> list[Artifact]: ...

    def put_artifact(self, artifact: Artifact, expected_version: int | None) -> None: ...


class ScheduleSync(Protocol):
    """Keeps a repository's retrospective schedule as its configuration says (EventBridge
    Scheduler); what it did: created, updated, unchanged, deleted or absent."""

    def ensure(
        self, repo_id: int, full_name: str, installation_id: int | None, *, expression: str, enabled: bool
    ) -> str: ...


class MetricsSink(Protocol):
    """Where metric points go (EMF in a Lambda, PutMetricData from an agent task)."""

    def publish(self, points: Iterable[MetricPoint]) -> None: ...


class RenderClaim(NamedTuple):
    """What :meth:`DashboardSlots.claim` found: the rendering is ours (and when the one before
    was, for :meth:`DashboardSlots.release`), or when the last one was."""

    claimed: bool
    rendered_at: datetime | None = None
    previous: datetime | None = None


class DashboardSlots(Protocol):
    """Each repository's dashboard slot (:mod:`squadron.domain.dashboard_refresh`): when its
    dashboard was last rendered and whether a deferred rendering is queued. Both writes are
    conditional, so they hold across any number of concurrent renderers."""

    def claim(self, repo_id: int, now: datetime, cutoff: datetime) -> RenderClaim:
        """Claim a rendering at ``now`` if the last one was at or before ``cutoff`` (clearing any
        deferral mark); otherwise say when the last one was."""
        ...

    def release(self, repo_id: int, claimed_at: datetime, previous: datetime | None) -> None:
        """Give back a claim made at ``claimed_at`` whose rendering wrote nothing: the slot says
        ``previous`` again (unless another claim came meanwhile), so the minute is not spent."""
        ...

    def defer(self, repo_id: int, until: datetime, now: datetime, *, again: bool = False) -> bool:
        """Mark a deferred rendering due at ``until``: True when this call marked it (the caller
        queues the request), False when one is marked and not yet due (it covers this one).
        ``again``: a deferred request that came early marks anew, whatever the mark says."""
        ...


class RefreshQueue(Protocol):
    """The dashboards queue: requests to render a repository's dashboard again."""

    def request(self, request: RefreshRequest, *, delay_seconds: int = 0) -> None:
        """Queue ``request``, delivered no sooner than ``delay_seconds`` from now."""
        ...

    def request_all(self, requests: Sequence[RefreshRequest]) -> None:
        """Queue each of ``requests`` at once (ten a call)."""
        ...
