"""Narrow interfaces the shell depends on; adapters implement them, tests fake them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from squadron.domain.artifacts import Artifact
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.events import EventEnvelope
from squadron.domain.memory import MemoryFact
from squadron.domain.metrics import MetricPoint
from squadron.domain.retrospective import RetroRecord
from squadron.registry_ports import (
    AgentRecords,
    Decisions,
    GateRecords,
    History,
    Inboxes,
    IssueGraph,
    Launches,
    Outbox,
)


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


class Registry(
    AgentRecords, IssueGraph, Inboxes, Launches, GateRecords, Decisions, Outbox, History, Protocol
):
    """The agent registry as the router uses it (DynamoDB on AWS): the ports of
    :mod:`squadron.registry_ports` it needs, at once. Every write is conditional.

    Writes raise :class:`squadron.domain.agents.ConflictError` when their
    condition fails: the agent's version moved, the item already exists, or a
    blocker is already closed.
    """


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

    def remove_label(self, installation_id: int | None, repo_full_name: str, number: int, label: str) -> None:
        """Take ``label`` off the issue or pull request; one not there (removed already) is no error."""
        ...

    def add_assignees(
        self, installation_id: int | None, repo_full_name: str, number: int, logins: tuple[str, ...]
    ) -> None:
        """Assign ``logins`` to the issue or pull request (adds to its assignees: idempotent)."""
        ...

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
