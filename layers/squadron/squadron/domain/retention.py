"""When a finished agent's working copy and session leave the shared volume — pure.

Each agent has a directory on the agents' volume (EFS in ECS: its working copy, its Copilot
home with the session, its home) and the framework keeps a clone of its repository beside it
(:mod:`squadron.adapters.confinement`). They are what the agent resumes from, so they stay while
the agent may act again. Once it is finished (COMPLETED or CANCELLED: :data:`TERMINAL`) for
longer than the stage's retention, and no task of it may still run, they are removed.
Memory and retrospectives are not on the volume and are never touched.

Disk grows only while tasks run, so the janitor is an agent task that starts
(:mod:`squadron.agent.janitor`): before its own session it asks the gateway to claim a bounded
page of due agents (:func:`purge_due`), moves their directories out of the agents' tree and
reports them purged (:func:`purged`: ``purged_at`` on the record, once).

A claim is the agent's lease, taken as ``purge:<the janitor's launch token>`` for
:data:`PURGE_CLAIM_TTL` with a write conditional on the record's version: while it is live no
task of the agent can begin (its begin takes the same lease), and a restart decided meanwhile
keeps it (:func:`purge_claimed`), so a new generation never starts on a directory being moved.
The janitor only renames under its claim (well under a second); a task of the new generation
that starts within it ends at once without a word (its lease is held), and the reconciler
relaunches it as any task that died — on a volume where its directory is gone, so it starts
from nothing. A claim that lapses (the janitor's task died) is taken again by a later pass;
what it had moved already is simply gone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from squadron.domain.agents import TERMINAL, AgentRecord

#: How long finished agents' state is kept by default (the stage setting
#: ``state_retention_days``; the gateway's ``SQUADRON_STATE_RETENTION_DAYS``).
DEFAULT_RETENTION_DAYS: Final = 7
#: The longest retention a stage may set (ten years: "keep them").
MAX_RETENTION_DAYS: Final = 3653
#: Most agents one pass claims: a task start never turns into a long clean-up (the next task
#: start takes the next page).
PURGE_PAGE: Final = 10
#: How many of the longest finished agents a pass looks at to claim its page: janitors starting
#: together each find some the others have not claimed (and a few left as found never stall them).
PURGE_WINDOW: Final = 4 * PURGE_PAGE
#: How long a claim holds the agent's lease: the janitor only renames directories under it.
PURGE_CLAIM_TTL: Final = timedelta(minutes=5)
#: The lease owner of a claim starts with this (a launch token never does: ``<agent>-g<n>-l<n>``).
PURGE_OWNER_PREFIX: Final = "purge:"


def purge_owner(launch_token: str) -> str:
    """The lease owner of the claims of the janitor in the task of ``launch_token``."""
    return f"{PURGE_OWNER_PREFIX}{launch_token}"


def purge_claimed(agent: AgentRecord, now: datetime) -> bool:
    """Whether a janitor holds ``agent``'s lease now (its directories may be on their way out)."""
    owner = agent.lease_owner
    return owner is not None and owner.startswith(PURGE_OWNER_PREFIX) and agent.lease_is_live(now)


def finished_at(agent: AgentRecord) -> datetime | None:
    """When ``agent`` finished (None: it has not). A record written before ``finished_at`` was
    kept counts from its last update, which is no earlier than its finish."""
    if agent.status not in TERMINAL:
        return None
    return agent.finished_at or agent.updated_at


def why_kept(agent: AgentRecord, *, now: datetime, retention: timedelta) -> str | None:
    """Why ``agent``'s state stays on the volume now, or None when it is due for removal."""
    finished = finished_at(agent)
    if finished is None:
        return f"it is {agent.status}"
    if agent.purged_at is not None:
        return "it was purged already"
    if finished >= now - retention:
        return f"it finished at {finished.isoformat()}, within the retention of {retention}"
    if agent.lease_is_live(now):
        return f"its lease is held by {agent.lease_owner}"
    expires = agent.launch_secret_expires_at
    if agent.launch_secret_hash is not None and (expires is None or expires > now):
        # Its last task never reported its end and could still run until its secret expires.
        return "a task of it may still run"
    return None


def purge_due(agent: AgentRecord, *, now: datetime, retention: timedelta) -> bool:
    return why_kept(agent, now=now, retention=retention) is None


def claim(agent: AgentRecord, owner: str, now: datetime) -> AgentRecord:
    """``agent`` claimed by the janitor ``owner`` (its finish pinned: a claim is no new finish)."""
    return agent.updated(
        now=now,
        lease_owner=owner,
        lease_expires_at=now + PURGE_CLAIM_TTL,
        finished_at=finished_at(agent),
    )


def purged(agent: AgentRecord, now: datetime) -> AgentRecord:
    """``agent`` with its state removed: ``purged_at`` recorded and the claim given up."""
    return agent.updated(now=now, purged_at=now, lease_owner=None, lease_expires_at=None)
