"""Per-launch secrets: how an agent task proves it is the task the router launched — pure.

A launch token (``<agent>-g<generation>-l<launches>``) is built from public facts:
it names a launch, it proves nothing. So for every launch the router draws a
secret of :data:`SECRET_BYTES` random bytes, stores only its SHA-256 in the
agent's record, and hands the secret itself to that one task (a RunTask
environment override, never a tag, a log line or a metric). Every call the task
makes to the framework presents it, and :func:`verify_launch` decides: the
agent exists, the launch is its latest, the secret is that launch's, it has not
expired, and the agent is still working (a few wind-down calls — saving its work on its
own branch (:func:`check_push`), releasing the lease, reporting the end — are allowed after
the router put it to sleep). The task of a launch that was replaced may release the lease it
still holds, and do nothing else (:func:`verify_release`).

A refusal is a :class:`LaunchRefusedError` whose ``code`` is one of
:data:`REFUSAL_CODES` (a metric dimension: a small closed set).
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta
from typing import Final, Literal

from squadron.domain.agents import LIVE, AgentRecord, AgentStatus, RoleKind
from squadron.domain.outbox import EXECUTION_LEASE
from squadron.errors import SquadronError

#: 256 bits from :mod:`secrets`; the issue asks for at least 128.
SECRET_BYTES: Final = 32
#: How long a launch's secret is accepted at most: longer than any task may run (the turn
#: timeout is at most four hours, the breakers' active time less), short enough that a
#: secret found in an old place is worthless.
SECRET_TTL: Final = timedelta(hours=12)
#: The environment variable that carries the secret into the task (a RunTask override).
SECRET_ENV: Final = "SQUADRON_LAUNCH_SECRET"  # noqa: S105 - a variable name, not a secret
#: How long an arming belongs to the executor that made it: no other executor arms the launch
#: again (with a new secret) before this is over. It is a decision's claim
#: (:data:`~squadron.domain.outbox.EXECUTION_LEASE`), longer than the router Lambda's timeout, so
#: the executor that armed a launch is gone, its RunTask too, before anyone may re-arm it
#: (:mod:`squadron.shell.launching` has the protocol).
ARMING_HELD: Final = EXECUTION_LEASE
#: How long a lease lasts without a heartbeat (the host beats every heartbeat_interval). Only the
#: task of an agent's latest launch renews it (:func:`verify_launch`), so the lease a replaced
#: launch's task still holds ends within this of the replacement, released or expired.
LEASE_TTL: Final = timedelta(minutes=15)
#: How long a new task waits for the lease an earlier launch's task still holds (a wake right
#: after a sleep: the old task saves its work, then releases it) before it gives up as ``busy``:
#: the lease's whole life, which that task can no longer renew, and a minute for clocks.
HANDOVER_PATIENCE: Final = LEASE_TTL + timedelta(minutes=1)

RefusalCode = Literal[
    "invalid_request",
    "unknown_agent",
    "replaced",
    "ended",
    "wrong_secret",
    "expired",
    "not_working",
    "lease_held",
    "lease_lost",
    "forbidden",
    "github_refused",
    "secret_found",
]
REFUSAL_CODES: Final[tuple[str, ...]] = RefusalCode.__args__  # type: ignore[attr-defined]


class LaunchRefusedError(SquadronError):
    """A task's call to the framework is refused; ``code`` names the rule."""

    def __init__(self, code: RefusalCode, message: str) -> None:
        self.code: RefusalCode = code
        super().__init__(message)


def secret_digest(secret: str) -> str:
    """What the registry keeps of a launch secret: its SHA-256, hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def armed_at(agent: AgentRecord) -> datetime | None:
    """When the pending launch was armed (None: not armed). Every arming stores
    ``armed at + SECRET_TTL`` as the secret's expiry, so the time is read back from it."""
    if agent.launch_secret_hash is None or agent.launch_secret_expires_at is None:
        return None
    return agent.launch_secret_expires_at - SECRET_TTL


def arming_abandoned(agent: AgentRecord, now: datetime) -> bool:
    """Whether ``agent``'s pending launch may be armed again with a new secret: it is not armed,
    or the executor that armed it is gone (:data:`ARMING_HELD` has passed)."""
    armed = armed_at(agent)
    return armed is None or now >= armed + ARMING_HELD


def verify_launch(
    agent: AgentRecord | None,
    *,
    agent_id: str,
    launch_token: str,
    secret: str,
    now: datetime,
    winding_down: bool = False,
) -> AgentRecord:
    """``agent`` when the caller holds the secret of its latest, unexpired launch; else refused.

    ``winding_down`` admits a task whose agent is no longer working (the router put it to
    sleep or handed it to humans while the task saved its work): it may still release its
    lease and report how it ended, nothing else.
    """
    if agent is None:
        raise LaunchRefusedError("unknown_agent", f"no agent {agent_id}")
    if agent.launch_token != launch_token:
        raise LaunchRefusedError(
            "replaced", f"launch {launch_token} of {agent_id} was replaced by {agent.launch_token}"
        )
    if agent.launch_secret_hash is None:
        raise LaunchRefusedError("ended", f"launch {launch_token} of {agent_id} has ended")
    # Constant time: the comparison says nothing about how much of a guess was right.
    if not hmac.compare_digest(secret_digest(secret), agent.launch_secret_hash):
        raise LaunchRefusedError("wrong_secret", f"wrong secret for launch {launch_token} of {agent_id}")
    expires = agent.launch_secret_expires_at
    if expires is None or expires <= now:
        raise LaunchRefusedError("expired", f"the secret of launch {launch_token} of {agent_id} expired")
    if not winding_down and agent.status not in LIVE:
        raise LaunchRefusedError(
            "not_working", f"agent {agent_id} is {agent.status}; only a working agent's task may act"
        )
    return agent


def verify_release(
    agent: AgentRecord | None, *, agent_id: str, launch_token: str, secret: str, now: datetime
) -> AgentRecord:
    """``agent`` when the caller may give up the lease ``launch_token`` holds: the task of its
    latest launch winding down (:func:`verify_launch`), or the task of the launch that one replaced
    (``replaced_launch``), with that launch's own unexpired secret.

    A relaunch may come while the old task still runs or winds down (a wake right after a sleep,
    a recovery of a task presumed dead): refused here, it would keep the lease until it expires and
    the new task would find its agent busy. This is the only call a replaced launch's secret opens;
    the release itself is conditional on the lease being that launch's.
    """
    replaced = agent.replaced_launch if agent is not None else None
    if agent is None or replaced is None or replaced.token != launch_token:
        return verify_launch(
            agent, agent_id=agent_id, launch_token=launch_token, secret=secret, now=now, winding_down=True
        )
    if not hmac.compare_digest(secret_digest(secret), replaced.secret_hash):
        raise LaunchRefusedError("wrong_secret", f"wrong secret for launch {launch_token} of {agent_id}")
    if replaced.expires_at <= now:
        raise LaunchRefusedError("expired", f"the secret of launch {launch_token} of {agent_id} expired")
    return agent


def check_lease(agent: AgentRecord, launch_token: str, now: datetime) -> None:
    """Refuse a task while another task of the agent holds its live lease."""
    if agent.lease_owner not in (None, launch_token) and agent.lease_is_live(now):
        raise LaunchRefusedError(
            "lease_held", f"the lease of {agent.agent_id} is held by {agent.lease_owner}"
        )


#: Where an agent may be while its task, winding down, still pushes its own branch: the router
#: put it to sleep on a blocker, or handed it to humans, while the task was ending. Its work is
#: picked up from that branch (by itself when it wakes, or by the people taking over). A finished
#: agent (COMPLETED, CANCELLED) is not among them: its branch may be merged and deleted already,
#: and a push would bring it back.
SAVES_WHEN_WINDING_DOWN: Final = frozenset({AgentStatus.SLEEPING, AgentStatus.ESCALATED})


def check_push(agent: AgentRecord, launch_token: str, now: datetime) -> None:
    """Refuse a push token to the task of ``launch_token`` unless ``agent`` (verified with
    ``winding_down``: the launch is its latest, the secret that launch's, unexpired) is a dev
    agent with a branch of its own whose task works, or saves its work as it winds down.

    Why the gateway admits the save rather than the host pushing before it reports blocked: the
    router's decisions race the task's end whatever order the host calls in — it puts the agent
    to sleep as soon as the blocker command is routed, and may hand it to humans at any time —
    and pushing from ``report_blocked`` would make two saves of one task (the model may still
    change files after the report), where the host saves once, after the session, then releases
    its lease, then reports its end. So the wind-down is admitted for the one save and no
    further: the agent is asleep or escalated (:data:`SAVES_WHEN_WINDING_DOWN`), the task still
    holds its own live lease (released right after the save: a task that released it gets
    nothing more), and its launch is the current one (a wake replaces it, the routed end of the
    task ends its secret: :func:`verify_launch`). The token is the one a working agent gets
    (contents only: GitHub does not narrow a token to a branch); the branch is the agent's own
    because the framework's clone pushes only to it and the request names none. Nothing else is
    admitted while winding down: no write, read token, inbox or model key (docs/security.md).
    """
    if agent.kind is not RoleKind.DEV or not agent.branch:
        raise LaunchRefusedError("forbidden", f"{agent.agent_id} has no branch of its own to push")
    if agent.status in LIVE:
        check_lease(agent, launch_token, now)
        return
    if agent.status not in SAVES_WHEN_WINDING_DOWN:
        raise LaunchRefusedError(
            "not_working", f"agent {agent.agent_id} is {agent.status}; its work is not saved any more"
        )
    if agent.lease_owner != launch_token or not agent.lease_is_live(now):
        raise LaunchRefusedError(
            "not_working",
            f"agent {agent.agent_id} is {agent.status} and launch {launch_token} no longer holds its "
            "lease: its wind-down is over",
        )
