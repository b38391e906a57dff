"""An agent record's transitions, in one place: start, begin, wake, relaunch, sleep, escalate,
finish and cancel — each a pure function from the record (and the moment) to the new record and
what the change implies (its write first, then the task to launch or stop).

The router builds its decisions from them (:mod:`squadron.domain.routing`), the agent gateway
begins a task with :func:`begin`, and the agent host decides how its task ends with
:mod:`squadron.domain.lifecycle.task`; the statuses a record may move between are the agents
model's (:func:`squadron.domain.agents.check_transition`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from squadron.domain.agents import LIVE, TERMINAL, AgentRecord, AgentStatus, BreakerCounters, ReplacedLaunch
from squadron.domain.effects import AgentWrite, Effect, LaunchAgent, PutAgent, StopAgentTask
from squadron.domain.retention import purge_claimed

#: The statuses an agent ends in: done, or called off.
Finished = Literal[AgentStatus.COMPLETED, AgentStatus.CANCELLED]


@dataclass(frozen=True)
class Step:
    """An agent's next record and what the change implies: its write (conditional on the version
    it was decided from) first, then the task launched or stopped."""

    agent: AgentRecord
    effects: tuple[Effect, ...]

    @property
    def write(self) -> AgentWrite:
        (put,) = (e for e in self.effects if isinstance(e, PutAgent))
        return put.write


def with_launch(agent: AgentRecord, cause: str) -> AgentRecord:
    """``agent`` marked as needing a task (``cause``: the delivery that decided it), with a fresh
    launch token.

    A launch that was decided but never confirmed keeps its token: the task it names may be
    starting right now (ECS deduplicates RunTask by that token), so a second decision must
    resume it rather than start a second task for the same agent.

    A new launch starts unarmed, so "armed" always means armed for the pending launch
    (:mod:`squadron.shell.launching`). The secret hash of the launch it replaces moves to
    ``replaced_launch``: that launch's task is refused everything but the release of the lease it
    may still hold (:func:`squadron.domain.launches.verify_release`), so the new task is not kept
    out until the lease expires.
    """
    if agent.pending_launch is not None:
        return agent.model_copy(update={"launch_cause": cause})
    counters = agent.counters.model_copy(update={"launches": agent.counters.launches + 1})
    launched = agent.model_copy(update={"counters": counters, "launch_cause": cause})
    return launched.model_copy(
        update={
            "pending_launch": launched.launch_token,
            "task_arn": None,
            "launch_secret_hash": None,
            "launch_secret_expires_at": None,
            "replaced_launch": _replaced(agent),
        }
    )


def _replaced(agent: AgentRecord) -> ReplacedLaunch | None:
    """What ``agent``'s next launch keeps of its latest: the armed launch whose task may still
    hold the lease. A launch that reported its end (unarmed) released its lease before, so the
    launch it replaced in turn is kept (its task may still hold the lease the ended one never got)."""
    if agent.launch_secret_hash is None or agent.launch_secret_expires_at is None:
        return agent.replaced_launch
    return ReplacedLaunch(
        token=agent.launch_token,
        secret_hash=agent.launch_secret_hash,
        expires_at=agent.launch_secret_expires_at,
    )


def launch(agent: AgentRecord, reason: str) -> LaunchAgent:
    """The launch of ``agent``'s pending task: a first start while CREATED, a wake otherwise."""
    if agent.pending_launch is None:
        raise ValueError(f"{agent.agent_id} has no pending launch")
    purpose: Literal["start", "wake"] = "start" if agent.status is AgentStatus.CREATED else "wake"
    return LaunchAgent(agent.agent_id, purpose, reason, agent.pending_launch)


def _launched(before: AgentRecord, after: AgentRecord, cause: str, reason: str, *stops: Effect) -> Step:
    launched = with_launch(after, cause)
    return Step(launched, (PutAgent(AgentWrite(launched, before.version)), *stops, launch(launched, reason)))


def start(fresh: AgentRecord, *, cause: str, reason: str) -> Step:
    """A new agent (CREATED), written only if none exists, and its first task."""
    launched = with_launch(fresh, cause)
    return Step(launched, (PutAgent(AgentWrite(launched, None)), launch(launched, reason)))


def new_generation(existing: AgentRecord, fresh: AgentRecord, *, now: datetime) -> AgentRecord:
    """A finished agent as its next generation (CREATED): a new session, nothing carried over but
    its identity.

    The old generation's lease goes, except a janitor's live claim: its directories are being
    moved away, and no task of the new generation begins before they are gone
    (:mod:`squadron.domain.retention`).
    """
    purging = purge_claimed(existing, now)
    return existing.transition(
        AgentStatus.CREATED,
        now=now,
        generation=existing.generation + 1,
        generation_started_at=fresh.generation_started_at,
        last_event_at=fresh.last_event_at,
        blocked_by=frozenset(),
        pr_number=fresh.pr_number,
        serves_issue=fresh.serves_issue,
        vouched=fresh.vouched,
        branch=fresh.branch,
        installation_id=fresh.installation_id or existing.installation_id,
        counters=BreakerCounters(),
        wake_reason=None,
        escalation_reason=None,
        lease_owner=existing.lease_owner if purging else None,
        lease_expires_at=existing.lease_expires_at if purging else None,
        heartbeat_at=None,
        task_arn=None,
        pending_launch=None,
        launch_secret_hash=None,
        launch_secret_expires_at=None,
        replaced_launch=None,  # the old generation's lease went above (its release is a no-op)
    )


def restart(existing: AgentRecord, fresh: AgentRecord, *, now: datetime, cause: str, reason: str) -> Step:
    """A finished agent started again as its :func:`new_generation`, and its first task."""
    return _launched(existing, new_generation(existing, fresh, now=now), cause, reason)


def born_asleep(created: AgentRecord, *, blocked_by: Iterable[int]) -> AgentRecord:
    """A new agent (or a new generation, not yet written) whose issue is blocked already: it
    starts asleep, and its first task is launched when its last blocker closes."""
    if created.status is not AgentStatus.CREATED or created.pending_launch is not None:
        raise ValueError(f"{created.agent_id} is not a new agent")
    return created.model_copy(update={"status": AgentStatus.SLEEPING, "blocked_by": frozenset(blocked_by)})


def begin(agent: AgentRecord, *, now: datetime) -> AgentRecord | None:
    """What the agent's record becomes when a task of it begins: a first task moves it from
    CREATED to ACTIVE; any other begins nothing in the record (None)."""
    if agent.status is not AgentStatus.CREATED:
        return None
    return agent.transition(AgentStatus.ACTIVE, now=now)


def wake(agent: AgentRecord, *, now: datetime, cause: str, reason: str, **changes: object) -> Step:
    """A sleeping, escalated or idle agent back at work: ACTIVE (an idle one already is: only its
    task had ended), its wakes counted, ``reason`` kept for the model, and a task launched."""
    counters = agent.counters.model_copy(update={"wakes": agent.counters.wakes + 1})
    changes = {**changes, "wake_reason": reason, "counters": counters}
    awake = (
        agent.updated(now=now, **changes)
        if agent.status is AgentStatus.ACTIVE
        else agent.transition(AgentStatus.ACTIVE, now=now, **changes)
    )
    return _launched(agent, awake, cause, reason)


def relaunch(
    agent: AgentRecord,
    *,
    now: datetime,
    cause: str,
    reason: str,
    stop_running: bool = False,
    **changes: object,
) -> Step:
    """A live agent's task run again in the agent's status (``changes`` applied, ``reason`` kept
    for the model). ``stop_running``: a task believed dead is stopped first, should it only be
    slow (it loses its lease, so it could not go on anyway)."""
    stops = (
        (StopAgentTask(agent.agent_id, agent.task_arn, reason),) if stop_running and agent.task_arn else ()
    )
    return _launched(agent, agent.updated(now=now, wake_reason=reason, **changes), cause, reason, *stops)


def sleep(agent: AgentRecord, *, now: datetime, blocked_by: Iterable[int]) -> AgentRecord:
    """A live agent asleep on its blockers: no task runs or is pending until the last one closes."""
    return agent.transition(
        AgentStatus.SLEEPING, now=now, blocked_by=frozenset(blocked_by), pending_launch=None, task_arn=None
    )


def escalate(agent: AgentRecord, *, now: datetime, reason: str, task_ended: bool = False) -> Step:
    """A live or sleeping agent handed to humans: ESCALATED with its reason, its task stopped if
    one runs — unless ``task_ended`` (it ended by itself). What humans are told is the router's
    (:mod:`squadron.domain.routing.builders`)."""
    escalated = agent.transition(
        AgentStatus.ESCALATED, now=now, escalation_reason=reason[:1000], pending_launch=None, task_arn=None
    )
    stops = (
        (StopAgentTask(agent.agent_id, agent.task_arn, reason),) if agent.task_arn and not task_ended else ()
    )
    return Step(escalated, (PutAgent(AgentWrite(escalated, agent.version)), *stops))


#: The longest reason an ended agent keeps (the record's ``end_reason``).
END_REASON_CHARS = 300


def finish(
    agent: AgentRecord,
    *,
    now: datetime,
    reason: str,
    status: Finished = AgentStatus.COMPLETED,
    last_event_at: datetime | None = None,
    task_ended: bool = False,
) -> Step:
    """A non-terminal agent done (COMPLETED) or called off (CANCELLED): nothing pending, no
    blockers, and its task stopped if one may run — unless ``task_ended`` (it ended by itself)."""
    if agent.status in TERMINAL:
        raise ValueError(f"{agent.agent_id} is {agent.status} already")
    changes: dict[str, object] = {
        "pending_launch": None,
        "blocked_by": frozenset(),
        "end_reason": " ".join(reason.split())[:END_REASON_CHARS] or None,
    }
    if last_event_at is not None:
        changes["last_event_at"] = last_event_at
    if task_ended:
        changes["task_arn"] = None
    ended = agent.transition(status, now=now, **changes)
    running = agent.status in LIVE and not task_ended
    stops = (StopAgentTask(agent.agent_id, agent.task_arn, reason),) if agent.task_arn and running else ()
    return Step(ended, (PutAgent(AgentWrite(ended, agent.version)), *stops))
