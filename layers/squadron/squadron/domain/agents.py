"""Agents as the registry knows them: identity, status, blockers, leases — pure data and rules.

An agent works on one issue (or, for review roles, one pull request) of one
repository. Its status moves only along :data:`ALLOWED_TRANSITIONS`; anything
else is an :class:`IllegalTransitionError`. Every stored record carries a
``version`` that each write checks and increments, so a replayed or stale
decision can never overwrite a newer one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.commands import MAX_TOLD
from squadron.domain.trust import Vouched
from squadron.domain.usage import ModelTokens
from squadron.errors import SquadronError


class AgentStatus(StrEnum):
    CREATED = "CREATED"
    ACTIVE = "ACTIVE"
    SLEEPING = "SLEEPING"
    COMPLETED = "COMPLETED"
    ESCALATED = "ESCALATED"
    CANCELLED = "CANCELLED"


class RoleKind(StrEnum):
    """What a role does, which decides how events reach it."""

    PM = "pm"
    DEV = "dev"
    REVIEW = "review"


#: Statuses whose agent will never act again unless it is explicitly restarted
#: (re-assignment restarts a CANCELLED or COMPLETED agent as a new generation).
TERMINAL: frozenset[AgentStatus] = frozenset({AgentStatus.COMPLETED, AgentStatus.CANCELLED})

#: Statuses in which a task may be running (or about to run) for the agent.
LIVE: frozenset[AgentStatus] = frozenset({AgentStatus.CREATED, AgentStatus.ACTIVE})

ALLOWED_TRANSITIONS: Mapping[AgentStatus, frozenset[AgentStatus]] = {
    AgentStatus.CREATED: frozenset(
        {
            AgentStatus.ACTIVE,
            AgentStatus.SLEEPING,
            AgentStatus.COMPLETED,
            AgentStatus.ESCALATED,
            AgentStatus.CANCELLED,
        }
    ),
    AgentStatus.ACTIVE: frozenset(
        {AgentStatus.SLEEPING, AgentStatus.COMPLETED, AgentStatus.ESCALATED, AgentStatus.CANCELLED}
    ),
    AgentStatus.SLEEPING: frozenset(
        {AgentStatus.ACTIVE, AgentStatus.COMPLETED, AgentStatus.ESCALATED, AgentStatus.CANCELLED}
    ),
    AgentStatus.ESCALATED: frozenset({AgentStatus.ACTIVE, AgentStatus.COMPLETED, AgentStatus.CANCELLED}),
    AgentStatus.COMPLETED: frozenset({AgentStatus.CREATED}),
    AgentStatus.CANCELLED: frozenset({AgentStatus.CREATED}),
}


class RegistryError(SquadronError):
    """Base of the registry's named errors."""


class IllegalTransitionError(RegistryError):
    def __init__(self, agent_id: str, current: AgentStatus, target: AgentStatus) -> None:
        self.agent_id = agent_id
        self.current = current
        self.target = target
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[current])) or "none"
        super().__init__(f"agent {agent_id} cannot go from {current} to {target} (allowed: {allowed})")


class ConflictError(RegistryError):
    """A conditional write lost: the item changed since it was read (or already exists)."""

    def __init__(self, what: str, detail: str = "") -> None:
        self.what = what
        self.detail = detail
        super().__init__(f"conflicting write to {what}" + (f": {detail}" if detail else ""))


def check_transition(agent_id: str, current: AgentStatus, target: AgentStatus) -> None:
    if target not in ALLOWED_TRANSITIONS[current]:
        raise IllegalTransitionError(agent_id, current, target)


_AGENT_ID_RE = re.compile(r"(?P<repo>\d+)-(?:(?P<pm>pm)|(?P<issue>\d+)-(?P<role>[a-z0-9][a-z0-9-]*))")


def agent_id_for(repo_id: int, role: str, issue_number: int | None) -> str:
    """Deterministic agent id: one agent per (repository, issue, role); one PM per repository."""
    if issue_number is None:
        return f"{repo_id}-pm"
    return f"{repo_id}-{issue_number}-{role}"


#: Agents' POSIX users: a range no image or distribution uses (systemd's dynamic users stop at
#: 65519, container user namespaces usually map 65536 or 100000-165535), 2^30 wide.
UID_BASE = 1 << 24
UID_SPAN = 1 << 30


def candidate_uid(agent_id: str, attempt: int) -> int:
    """The ``attempt``-th uid an agent tries to claim: deterministic, spread over the range.

    Two agents that hash to the same uid are told apart by the registry's claim (the second
    moves on to its next candidate), so every agent's uid is its own.
    """
    digest = hashlib.sha256(f"{agent_id}#{attempt}".encode()).digest()
    return UID_BASE + int.from_bytes(digest[:8], "big") % UID_SPAN


def agent_name(role: str, issue_number: int | None) -> str:
    """An agent's one name wherever a person reads it (the dashboard, comments, the CLI, the local
    feed, role tags, commit authors): its role and issue, ``feat-dev-38``; the PM's is ``pm``.
    Its id (``1-38-feat-dev``) is the handle commands take, shown as an id, never as its name."""
    return role if issue_number is None else f"{role}-{issue_number}"


def name_for_id(agent_id: str) -> str:
    """The name (:func:`agent_name`) of the agent ``agent_id``, or the id itself when it is none."""
    try:
        _repo, issue, role = parse_agent_id(agent_id)
    except RegistryError:
        return agent_id
    return agent_name(role, issue)


def parse_agent_id(agent_id: str) -> tuple[int, int | None, str]:
    """(repository id, issue number or None for the PM, role) of an agent id."""
    match = _AGENT_ID_RE.fullmatch(agent_id)
    if match is None:
        raise RegistryError(f"not an agent id: {agent_id!r}")
    if match.group("pm"):
        return int(match.group("repo")), None, "pm"
    return int(match.group("repo")), int(match.group("issue")), match.group("role")


class BreakerCounters(BaseModel):
    """Usage the circuit breakers limit, accumulated over the agent's whole life."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_calls: int = 0
    turns: int = 0
    iterations: int = 0
    active_seconds: int = 0
    #: Tokens per model over the agent's life (what it cost: :mod:`squadron.domain.cost`).
    tokens: tuple[ModelTokens, ...] = ()
    launches: int = 0
    wakes: int = 0
    #: Relaunches by the reconciler after the agent's task died, since its last task that ran to
    #: its end (one more death in a row goes to humans).
    recoveries: int = 0
    #: Rounds of failed CI on its PR (one per failing head commit) and change requests it got:
    #: past the approval flow's max_retries the issue goes to humans.
    ci_failures: int = 0
    rejections: int = 0


class ReplacedLaunch(BaseModel):
    """The launch a newer one replaced, while its task may still hold the agent's lease: its
    token and the SHA-256 of its secret (never the secret), with the secret's expiry. Its secret
    opens one call only, the release of that lease (:func:`squadron.domain.launches.verify_release`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token: str
    secret_hash: str
    expires_at: datetime


class AgentRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    role: str
    kind: RoleKind
    repo_id: int
    repo_full_name: str
    installation_id: int | None = None
    issue_number: int | None = None
    generation: int = 1
    #: GitHub time of the event that started this generation: older events are stale for it.
    generation_started_at: datetime | None = None
    #: GitHub time of the latest event that changed this agent's status (start, end, restart).
    last_event_at: datetime | None = None
    status: AgentStatus = AgentStatus.CREATED
    branch: str | None = None
    pr_number: int | None = None
    #: A review agent's: the issue the pull request it reviews serves (None: not known when it
    #: started). Its cost counts for that issue (:attr:`costed_issue`).
    serves_issue: int | None = None
    blocked_by: frozenset[int] = frozenset()
    #: A dev agent's issue as a person with write access last vouched for it (assigning the App,
    #: editing the issue): what the agent reads when someone without write access changed it
    #: since (:mod:`squadron.domain.trust`). None: nobody did (the PM assigned it).
    vouched: Vouched | None = None
    counters: BreakerCounters = Field(default_factory=BreakerCounters)
    created_at: datetime
    updated_at: datetime
    heartbeat_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    task_arn: str | None = None
    #: ECS client token of a launch decided but not yet confirmed with a task ARN.
    pending_launch: str | None = None
    #: Delivery id of the event whose decision produced the latest launch: the same delivery
    #: never wakes the agent twice (and the audit trail says why a task ran).
    launch_cause: str | None = None
    wake_reason: str | None = None
    escalation_reason: str | None = None
    #: The head commit of the latest CI failure counted (one round per commit), and the id of the
    #: latest change request counted: a replayed event never counts twice.
    last_ci_failure: str | None = None
    last_rejection: str | None = None
    #: The PR head commit whose merge conflict the agent was last woken for (AD-005).
    last_conflict: str | None = None
    #: SHA-256 of the secret handed to the task of the latest launch (never the secret itself),
    #: and when it stops being accepted. Cleared when that task reports its end.
    launch_secret_hash: str | None = None
    launch_secret_expires_at: datetime | None = None
    #: The armed launch the latest one replaced (a relaunch while its task still ran, or wound
    #: down): its task may only give up the lease it still holds, so the new task finds it free.
    replaced_launch: ReplacedLaunch | None = None
    #: RunTask failures of the pending launch (a Fargate quota, no capacity): the launch is held
    #: and retried with back-off (:func:`launch_retry_delay`) rather than failing its event.
    launch_failures: int = 0
    launch_error: str | None = None
    launch_failed_at: datetime | None = None
    #: The POSIX user the agent's Copilot CLI, shell and git run as inside its task: unique per
    #: agent, so no agent can read another's working copy or session (claimed on first start).
    uid: int | None = None
    #: When the agent last became COMPLETED or CANCELLED (None while it may act): its working
    #: copy and session leave the shared volume a retention after it (:mod:`squadron.domain.retention`).
    finished_at: datetime | None = None
    #: When they were removed (None: on the volume, if it ever ran). A restart clears both.
    purged_at: datetime | None = None
    #: Who or what ended it (COMPLETED or CANCELLED), in words (``#38 was closed by alice``): the
    #: dashboard's "Recently ended" shows it. None while it may act (a restart clears it).
    end_reason: str | None = Field(default=None, max_length=300)
    version: int = 1

    @property
    def costed_issue(self) -> int | None:
        """The issue this agent's cost counts for: the one it works on, or for a reviewer the
        issue its pull request serves (its own number, the PR's, when that is not known)."""
        return self.serves_issue if self.serves_issue is not None else self.issue_number

    @property
    def session_id(self) -> str:
        """Copilot session id: stable across sleeps, new for each generation (restart)."""
        return f"{self.agent_id}-g{self.generation}"

    @property
    def launch_token(self) -> str:
        """The id of the latest launch decision: ECS's RunTask client token, never a credential.

        At most 64 characters; unique per launch decision of the agent.
        """
        return f"{self.agent_id}-g{self.generation}-l{self.counters.launches}"[-64:]

    @property
    def display_name(self) -> str:
        """The agent's one name for people and role tags: ``feat-dev-38``, ``pm`` (:func:`agent_name`)."""
        return agent_name(self.role, self.issue_number)

    def predates(self, occurred_at: datetime | None) -> bool:
        """Whether a change that happened at ``occurred_at`` is older than this generation."""
        return (
            occurred_at is not None
            and self.generation_started_at is not None
            and occurred_at < self.generation_started_at
        )

    def superseded(self, occurred_at: datetime | None) -> bool:
        """Whether a status change that happened at ``occurred_at`` is older than the last one applied."""
        latest = self.last_event_at or self.generation_started_at
        return occurred_at is not None and latest is not None and occurred_at < latest

    def lease_is_live(self, now: datetime) -> bool:
        return (
            self.lease_owner is not None and self.lease_expires_at is not None and self.lease_expires_at > now
        )

    def transition(self, target: AgentStatus, *, now: datetime, **changes: object) -> AgentRecord:
        """A copy in ``target`` status (checked), with ``changes`` applied and the version bumped.

        Finishing (COMPLETED or CANCELLED) stamps ``finished_at``; leaving it (a restart as a new
        generation) clears it and ``purged_at``: the new generation's state is new.
        """
        check_transition(self.agent_id, self.status, target)
        if target in TERMINAL:
            if self.status not in TERMINAL:
                changes.setdefault("finished_at", now)
        elif self.status in TERMINAL:
            changes.setdefault("finished_at", None)
            changes.setdefault("purged_at", None)
            changes.setdefault("end_reason", None)
        return self.model_copy(
            update={**changes, "status": target, "updated_at": now, "version": self.version + 1}
        )

    def updated(self, *, now: datetime, **changes: object) -> AgentRecord:
        """A copy with ``changes`` applied and the version bumped (status unchanged)."""
        return self.model_copy(update={**changes, "updated_at": now, "version": self.version + 1})


class IssueState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


#: How long an inbox item held for an agent that does not exist yet is kept unread: a run's agent
#: stage starts its agent seconds after the trigger, and an item older than the trigger is no news
#: for it (:func:`reaches`), so one no stage came for is dropped (an issue nobody assigned).
HELD_RETENTION = timedelta(days=2)


class InboxItem(BaseModel):
    """Something an agent should know about, waiting until it calls check_for_events."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    delivery_id: str
    received_at: datetime
    kind: str
    summary: str
    actor: str | None = None
    url: str | None = None
    body: str = ""
    #: Whose words ``body`` is when nobody established their authority (an issue opened by anyone:
    #: data for the PM): the agent host asks GitHub for their permission and withholds or fences
    #: the body by the repository's ``trust.reads`` (:mod:`squadron.domain.trust`). None: the
    #: authority rule passed its author (a comment, a review), or the framework wrote it.
    unvetted_author: str | None = None
    #: The issue or pull request the item is about (a closed blocker's number, ...): what code
    #: reads, so nothing parses the summary, which is words for the model.
    subject: int | None = None
    #: When what it tells of happened (GitHub's time), for an item held for an agent that did not
    #: exist yet (a writer's comment routed before a pipeline stage started the issue's dev agent:
    #: :func:`squadron.domain.routing.comments.held_for_stage_agents`): it reaches a generation
    #: started at or before that time, never a later one (:func:`reaches`). None: it reaches
    #: whichever generation finds it (the router told a live agent, or the framework wrote it).
    occurred_at: datetime | None = None
    #: When the registry may drop the item unread (its TTL): an item held for an agent a pipeline
    #: stage may never start (:data:`HELD_RETENTION`). None: kept until the agent reads it.
    expires_at: datetime | None = None

    @property
    def key(self) -> str:
        """The item's identity (the inbox stores one per delivery and kind): what a task's end
        names of the items its model was told of (:attr:`~squadron.domain.commands.TaskEnded.told`)."""
        return f"{self.delivery_id} {self.kind}"


def reaches(agent: AgentRecord, item: InboxItem) -> bool:
    """Whether ``item`` in ``agent``'s inbox is news for its generation (not held for it before
    an earlier one's time: :attr:`InboxItem.occurred_at`)."""
    return not agent.predates(item.occurred_at)


def current_inbox(agent: AgentRecord, items: list[InboxItem]) -> list[InboxItem]:
    """The items of ``agent``'s inbox its generation reads (:func:`reaches`), oldest first."""
    return [item for item in items if reaches(agent, item)]


#: Most inbox items an agent is handed at once, oldest first (check_for_events reads the rest
#: on its next call): a busy issue never floods the model's context or the gateway's answer.
INBOX_PAGE_ITEMS = 20
#: Longest item body handed over (a GitHub comment may hold 65,536 characters); the whole text
#: stays on GitHub for read_issue.
INBOX_BODY_CHARS = 4000
INBOX_BODY_CUT = "\n(cut here: read the issue or pull request for the rest)"


def inbox_keys(items: list[InboxItem]) -> list[str]:
    """The keys of the first :data:`~squadron.domain.commands.MAX_TOLD` items of an inbox (oldest
    first): what a task can be told of, whichever page its model reads; past them, an item waits
    for the agent's next task without waking it (:func:`news_besides`)."""
    return [item.key for item in items[:MAX_TOLD]]


def news_besides(items: list[InboxItem], told: list[str]) -> list[InboxItem]:
    """The items of an inbox (oldest first) that are news besides those a task's model was told
    of: among its first MAX_TOLD (what its task could name), those it does not name."""
    known = set(told)
    return [item for item in items[:MAX_TOLD] if item.key not in known]


def inbox_page(items: list[InboxItem]) -> tuple[list[InboxItem], int]:
    """The first page of an inbox (bodies cut to :data:`INBOX_BODY_CHARS`) and how many wait after it."""
    page = [
        item
        if len(item.body) <= INBOX_BODY_CHARS
        else item.model_copy(update={"body": item.body[:INBOX_BODY_CHARS] + INBOX_BODY_CUT})
        for item in items[:INBOX_PAGE_ITEMS]
    ]
    return page, len(items) - len(page)


DEFAULT_LEASE = timedelta(minutes=5)

#: The longest a held launch waits before its next attempt.
MAX_LAUNCH_RETRY_DELAY = timedelta(hours=1)


def launch_retry_delay(failures: int) -> timedelta:
    """How long a launch that failed ``failures`` times in a row waits: 5, 10, 20, 40 min, then an hour."""
    if failures <= 0:
        return timedelta(0)
    doubled: timedelta = timedelta(minutes=5) * (2 ** min(failures - 1, 10))
    return min(MAX_LAUNCH_RETRY_DELAY, doubled)
