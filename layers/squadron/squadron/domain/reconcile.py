"""The reconciler's decisions — pure. Level-triggered, as Prow's Tide is: GitHub is the truth.

Every run compares what the registry believes with what GitHub says now and
turns each contradiction into the webhook that would have told the router, had
it arrived: a blocker or an agent's own issue that is closed, an issue no longer
assigned to the App, a pull request merged or closed. Those replays go through
events.fifo in the issue's message group, so the router — the single writer of
agent state — handles them in order with everything else, and its
per-delivery records and staleness checks make a replay that is repeated, or
that races the real webhook, change nothing. Their delivery ids are
deterministic (the same contradiction replays under the same id in every run).

Failed webhook deliveries are picked for redelivery here too: the newest
attempt of each delivery that never succeeded, failed on our side (5xx or no
answer; a 4xx would fail again), is younger than GitHub's three-day window and
was not processed by the router; each at most once per run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from squadron.domain.agents import LIVE, TERMINAL, AgentRecord, AgentStatus, RoleKind, launch_retry_delay
from squadron.domain.breakers import Limits, sleep_overdue
from squadron.domain.commands import FinishDecision, RecoverAgent, ReportConflict
from squadron.domain.effects import Decision
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.routing import RoutingPolicy, is_idle

#: GitHub keeps deliveries (and lets an App redeliver them) for three days.
REDELIVERY_WINDOW = timedelta(days=3)
#: Redeliveries asked per run at most (each is one App API call).
MAX_REDELIVERIES = 50
RECONCILER = {"login": "squadron-reconciler", "id": 0, "type": "Bot"}

Json = Mapping[str, Any]


@dataclass(frozen=True)
class RepoState:
    """One repository as the reconciler sees it: the registry's live agents, GitHub's issues."""

    repository: Json  # id, full_name, default_branch
    installation_id: int | None
    agents: Sequence[AgentRecord]
    #: GitHub's issue or pull-request JSON by number, for every number the agents refer to.
    github: Mapping[int, Json]
    now: datetime
    #: GitHub stopped answering (rate limit) while this state was read: what is missing is unknown.
    rate_limited: bool = False


def numbers_to_read(agents: Iterable[AgentRecord]) -> list[int]:
    """The issues and PRs the reconciler must read from GitHub for these agents."""
    wanted: set[int] = set()
    for agent in agents:
        if agent.status in TERMINAL:
            continue
        if agent.issue_number is not None:
            wanted.add(agent.issue_number)
        if agent.pr_number is not None:
            wanted.add(agent.pr_number)
        wanted.update(agent.blocked_by)
    return sorted(wanted)


#: The reconciler's period: a run's "tick" number moves the read window (see plan_reads).
TICK = timedelta(minutes=5)


def plan_reads(
    agents_by_repo: Mapping[int, Sequence[AgentRecord]], budget: int, now: datetime
) -> dict[int, list[int]]:
    """What one run reads of one installation: everything within ``budget``, else a rotating window.

    GitHub's limit is per installation (5,000 requests an hour, more for large organisations),
    and the router and agents share it, so a run reads at most ``budget`` issues and PRs of
    an installation. When there are more, each run reads the next window (the run's number
    picks it), so every number is read within ``ceil(total / budget)`` runs — with 1,000
    agents and a budget of 200, every 25 minutes — without keeping any state.
    """
    items = [
        (repo, number) for repo in sorted(agents_by_repo) for number in numbers_to_read(agents_by_repo[repo])
    ]
    if len(items) > budget:
        tick = int(now.timestamp() // TICK.total_seconds())
        start = (tick * budget) % len(items)
        items = (items + items)[start : start + budget]
    plan: dict[int, list[int]] = {}
    for repo, number in items:
        plan.setdefault(repo, []).append(number)
    return plan


def _time(value: Any) -> datetime | None:
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _replay(
    state: RepoState, event: str, action: str, parts: dict[str, Any], *, stamp: Any, what: str
) -> EventEnvelope:
    payload = {
        "action": action,
        **parts,
        "repository": state.repository,
        "sender": RECONCILER,
        "installation": {"id": state.installation_id} if state.installation_id else None,
    }
    envelope = build_envelope(
        event=event,
        delivery_id=f"reconcile-{state.repository['id']}-{what}-{stamp or 'unknown'}"[:128],
        payload=payload,
        received_at=state.now,
    )
    return EventEnvelope.model_validate({**envelope.model_dump(), "origin": "reconciler"})


def _closed(state: RepoState, number: int) -> EventEnvelope | None:
    item = state.github.get(number)
    if item is None or item.get("state") != "closed":
        return None
    if "head" in item:  # a pull request (read through the pulls API)
        stamp = item.get("closed_at")
        return _replay(
            state, "pull_request", "closed", {"pull_request": item}, stamp=stamp, what=f"pr{number}-closed"
        )
    if item.get("pull_request") is not None:
        return None  # a PR seen through the issues API: its own record (pulls API) decides
    closer = item.get("closed_by") if isinstance(item.get("closed_by"), Mapping) else None
    replay = _replay(
        state, "issues", "closed", {"issue": item}, stamp=item.get("closed_at"), what=f"{number}-closed"
    )
    if closer is not None:
        replay = replay.model_copy(
            update={"sender": replay.sender.model_copy(update={"login": str(closer.get("login") or "?")})}
        )
    return replay


def _unassigned(state: RepoState, agent: AgentRecord, bot_login: str) -> EventEnvelope | None:
    """A dev agent's issue that GitHub no longer shows assigned to the App (reassigned to a human)."""
    if agent.issue_number is None:
        return None
    item = state.github.get(agent.issue_number)
    if item is None or item.get("state") != "open":
        return None
    assignees = {str(user.get("login")) for user in item.get("assignees") or [] if isinstance(user, Mapping)}
    if bot_login in assignees:
        return None
    updated = _time(item.get("updated_at"))
    if updated is None or (
        agent.generation_started_at is not None and updated <= agent.generation_started_at
    ):
        return None  # nothing changed on GitHub since the agent started: no evidence to act on
    parts = {"issue": item, "assignee": {"login": bot_login, "id": 0, "type": "Bot"}}
    stamp = item.get("updated_at")
    return _replay(state, "issues", "unassigned", parts, stamp=stamp, what=f"{agent.issue_number}-unassigned")


def replays(state: RepoState, *, bot_login: str) -> list[EventEnvelope]:
    """The webhooks the router missed, rebuilt from GitHub's current state; each contradiction once."""
    out: dict[str, EventEnvelope] = {}

    def add(envelope: EventEnvelope | None) -> None:
        if envelope is not None:
            out.setdefault(envelope.delivery_id, envelope)

    for agent in sorted(state.agents, key=lambda a: a.agent_id):
        if agent.status in TERMINAL:
            continue
        if agent.status is AgentStatus.SLEEPING:
            for blocker in sorted(agent.blocked_by):
                add(_closed(state, blocker))
        if agent.kind is RoleKind.DEV and agent.issue_number is not None:
            closed = _closed(state, agent.issue_number)
            add(closed)
            if closed is None:
                add(_unassigned(state, agent, bot_login))
        if agent.pr_number is not None:
            add(_closed(state, agent.pr_number))
    return list(out.values())


def conflicts(state: RepoState) -> list[EventEnvelope]:
    """Agent PRs GitHub says conflict with their base while their agent is not working on it.

    The merge gate reports a conflict when an event judges the PR; this catches the case no
    event follows — above all a dev agent whose attempt to resolve it ended without a new
    commit, which the router then hands to a human (AD-005).
    """
    out: list[EventEnvelope] = []
    for agent in sorted(state.agents, key=lambda a: a.agent_id):
        if agent.kind is not RoleKind.DEV or agent.pr_number is None or agent.issue_number is None:
            continue
        if agent.status in TERMINAL or (agent.status in LIVE and not is_idle(agent)):
            continue
        pr = state.github.get(agent.pr_number)
        if (
            pr is None
            or "head" not in pr
            or pr.get("state") != "open"
            or pr.get("mergeable_state") != "dirty"
        ):
            continue
        sha = str((pr.get("head") or {}).get("sha") or "")
        if not sha or agent.last_conflict == f"{sha}:escalated":
            continue
        base = str((pr.get("base") or {}).get("ref") or "")
        command = ReportConflict(
            issue_number=agent.issue_number, pr_number=agent.pr_number, head_sha=sha, base=base
        )
        out.append(
            command_envelope(
                command,
                repository=state.repository,
                installation_id=state.installation_id,
                delivery_id=f"conflict-{agent.pr_number}-{sha[:12]}-reconcile-v{agent.version}",
                now=state.now,
                origin="reconciler",
            )
        )
    return out


@dataclass(frozen=True)
class TimeoutNotice:
    """A PR that waited longer than its flow's on_timeout: label it, say so, assign."""

    pr_number: int
    label: str
    body: str
    assignees: tuple[str, ...]


def timeouts(state: RepoState, policy: RoutingPolicy, *, fallback_label: str) -> list[TimeoutNotice]:
    """Open agent PRs older than their flow's ``on_timeout.hours`` that humans were not told of yet.

    Level-triggered and idempotent: a PR that already carries the rule's label was escalated
    before (or a human labelled it) and is left alone.
    """
    out: list[TimeoutNotice] = []
    numbers = sorted(
        {a.pr_number for a in state.agents if a.pr_number is not None and a.status not in TERMINAL}
    )
    for number in numbers:
        pr = state.github.get(number)
        if pr is None or "head" not in pr or pr.get("state") != "open":
            continue
        base = str((pr.get("base") or {}).get("ref") or "")
        rule = policy.escalation_for(base).on_timeout
        opened = _time(pr.get("created_at"))
        if rule.hours is None or opened is None:
            continue
        waited = state.now - opened
        if waited <= timedelta(hours=rule.hours):
            continue
        label = rule.label or fallback_label
        if label in {str(item.get("name")) for item in pr.get("labels") or [] if isinstance(item, Mapping)}:
            continue
        mentions = " ".join(policy.mentions(rule.notify))
        body = (
            f"PR #{number} has waited {waited.total_seconds() / 3600:.0f} h, over the approval flow's "
            f"on_timeout of {rule.hours:g} h; its squadron/merge status says what it waits for."
            + (f" {mentions}" if mentions else "")
        )
        out.append(TimeoutNotice(number, label, body, tuple(rule.assign)))
    return out


@dataclass(frozen=True)
class Liveness:
    """How long an agent may sleep (its role's breaker limits), and how stale a heartbeat may get."""

    limits: Limits
    stale_after: timedelta


def _dead(
    agent: AgentRecord, now: datetime, stale_after: timedelta, running: frozenset[str] | None
) -> str | None:
    """Why a live agent's task is presumed dead, or None while it may still be working."""
    if agent.pending_launch is not None:
        if agent.launch_failures:
            return None  # a held launch is retried (see ``rescues``), not a death
        if now - agent.updated_at > stale_after:
            return f"its launch ({agent.pending_launch}) was never confirmed in {stale_after}"
        return None
    if agent.task_arn is None:
        return None  # idle (between events) or not launched: nothing is supposed to run
    if running is not None and agent.task_arn not in running:
        return f"its ECS task {agent.task_arn.rsplit('/', 1)[-1]} is gone"
    if agent.lease_is_live(now):
        return None
    beat = agent.heartbeat_at or agent.updated_at
    if now - beat > stale_after:
        return f"no heartbeat since {beat.isoformat()} (over {stale_after})"
    return None


def rescues(
    agents: Iterable[AgentRecord],
    *,
    now: datetime,
    liveness: Callable[[AgentRecord], Liveness],
    running: frozenset[str] | None,
) -> list[EventEnvelope]:
    """Commands for the router: relaunch agents whose task died, escalate sleepers past their limit.

    ``running`` is the set of ECS task ARNs that are running (None when ECS could not be
    asked: then only a stopped heartbeat counts). An agent asleep since an unknown time
    counts as overdue (a breaker never fails open); ``updated_at`` stands for the time
    it fell asleep (nothing else writes a sleeping agent but its blockers changing).
    """
    out: list[EventEnvelope] = []
    for agent in sorted(agents, key=lambda a: a.agent_id):
        rules = liveness(agent)
        if agent.status is AgentStatus.SLEEPING:
            overdue = sleep_overdue(agent.updated_at, now, rules.limits)
            if overdue is not None:
                waits = ", ".join(f"#{n}" for n in sorted(agent.blocked_by)) or "nothing"
                out.append(_recover(agent, "escalate", f"{overdue} waiting for {waits}", now))
        elif agent.status in LIVE and agent.pending_launch is not None and agent.launch_failures:
            failed = agent.launch_failed_at or agent.updated_at
            if now >= failed + launch_retry_delay(agent.launch_failures):
                why = f"its launch was refused {agent.launch_failures} time(s): {agent.launch_error or '?'}"
                out.append(_recover(agent, "launch", why[:2000], now))
        elif agent.status in LIVE:
            dead = _dead(agent, now, rules.stale_after, running)
            if dead is not None:
                out.append(_recover(agent, RELAUNCH, dead, now))
    return out


#: The action (and delivery id suffix) of a rescue that relaunches a silent agent's task.
RELAUNCH: Literal["relaunch"] = "relaunch"


def _recover(
    agent: AgentRecord, action: Literal["relaunch", "escalate", "launch"], reason: str, now: datetime
) -> EventEnvelope:
    command = RecoverAgent(
        agent_id=agent.agent_id,
        issue_number=agent.issue_number,
        seen_version=agent.version,
        action=action,
        reason=reason,
    )
    # One delivery per (agent version, action): a repeated run is deduplicated.
    return command_envelope(
        command,
        repository={"id": agent.repo_id, "full_name": agent.repo_full_name},
        installation_id=agent.installation_id,
        delivery_id=f"recover-{agent.agent_id}-v{agent.version}-{action}",
        now=now,
        origin="reconciler",
    )


def redeliveries(
    deliveries: Iterable[Json], *, processed: Iterable[str], now: datetime, limit: int = MAX_REDELIVERIES
) -> list[int]:
    """Delivery attempt ids to redeliver: one per delivery that never succeeded, newest attempt."""
    done = set(processed)
    attempts: dict[str, list[Json]] = {}
    for delivery in deliveries:
        guid = delivery.get("guid")
        if isinstance(guid, str) and guid:
            attempts.setdefault(guid, []).append(delivery)
    chosen: list[tuple[datetime, int]] = []
    for guid, tries in attempts.items():
        if guid in done or any(_succeeded(t) for t in tries):
            continue
        latest = max(tries, key=lambda t: (_time(t.get("delivered_at")) or now, int(t.get("id") or 0)))
        at = _time(latest.get("delivered_at"))
        if at is None or now - at > REDELIVERY_WINDOW or not _ours_to_retry(latest):
            continue
        chosen.append((at, int(latest["id"])))
    return [delivery_id for _, delivery_id in sorted(chosen)][:limit]


def _succeeded(attempt: Json) -> bool:
    code = attempt.get("status_code")
    return isinstance(code, int) and 200 <= code < 300


def _ours_to_retry(attempt: Json) -> bool:
    """A failure on our side (5xx, or no answer: status 0) is worth retrying; a 4xx repeats."""
    code = attempt.get("status_code")
    return isinstance(code, int) and (code == 0 or code >= 500)


#: A decision is swept once nobody has tried it for this long. Each attempt claims it, which
#: touches it (:mod:`squadron.domain.outbox`); its delivery's next receive comes one visibility
#: timeout (9 min: six router timeouts, ``infra/constructs/event_queue.py``) after the last one
#: began, and an attempt ends within its claim (:data:`~squadron.domain.outbox.EXECUTION_LEASE`).
#: So a decision untouched for longer than both is no longer retried by its queue (it is in the
#: dead-letter queue, or its message is lost), and the sweep does not race its own retries (if it
#: did, the claim would still keep them to one executor). tests/infra checks the inequality.
UNFINISHED_AFTER = timedelta(minutes=15)


def finish_commands(decisions: Iterable[Decision], now: datetime) -> list[EventEnvelope]:
    """A :class:`FinishDecision` per committed decision left unfinished, in its repository's group.

    Its id is the decision's (hashed) and the sweep window's (one per :data:`UNFINISHED_AFTER`):
    runs of one window send the same command, which the queue's deduplication and the router's
    delivery records keep to one routing; a later window's is a new command. A command that found
    the decision held by another executor succeeded, so its id is done for good: were the id the
    decision's alone, no later sweep could finish the decision should that executor fail.
    """
    out: list[EventEnvelope] = []
    window = int(now.timestamp() // UNFINISHED_AFTER.total_seconds())
    for decision in decisions:
        if decision.done or decision.repo_id is None:
            continue
        digest = hashlib.sha256(decision.key.encode()).hexdigest()[:32]
        out.append(
            command_envelope(
                FinishDecision(decision=decision.key),
                repository={"id": decision.repo_id, "full_name": decision.repo_full_name},
                installation_id=decision.installation_id,
                delivery_id=f"finish-{digest}-{window}",
                now=now,
                origin="reconciler",
            )
        )
    return out
