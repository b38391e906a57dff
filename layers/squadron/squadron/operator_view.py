"""What `squadron status`, `squadron agent show` and `squadron dlq list` print: pure functions
from registry records and queue messages to rows, tables and JSON-ready dicts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from squadron.domain.agents import AgentRecord, AgentStatus, InboxItem

#: Live first, then the ones that wait, then the finished.
STATUS_ORDER = {
    AgentStatus.ACTIVE: 0,
    AgentStatus.CREATED: 1,
    AgentStatus.SLEEPING: 2,
    AgentStatus.ESCALATED: 3,
    AgentStatus.COMPLETED: 4,
    AgentStatus.CANCELLED: 5,
}
COLUMNS = (
    "AGENT",
    "REPOSITORY",
    "ROLE",
    "ISSUE",
    "STATUS",
    "BLOCKED BY",
    "PR",
    "AGE",
    "TOOLS",
    "TURNS",
    "ACTIVE",
)


def age(since: datetime, now: datetime) -> str:
    """A short duration: 45s, 12m, 3h, 2d."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _state(agent: AgentRecord) -> str:
    """The status, and whether an ACTIVE agent has a task running or waits between events."""
    if agent.status is AgentStatus.ACTIVE:
        if agent.task_arn is not None or agent.pending_launch is not None:
            return "ACTIVE (running)"
        return "ACTIVE (idle)"
    return str(agent.status)


def agent_row(agent: AgentRecord, now: datetime) -> dict[str, Any]:
    return {
        "agent_id": agent.agent_id,
        "repository": agent.repo_full_name,
        "role": agent.role,
        "issue": agent.issue_number,
        "status": str(agent.status),
        "state": _state(agent),
        "blocked_by": sorted(agent.blocked_by),
        "pr": agent.pr_number,
        "age_seconds": max(0, int((now - agent.created_at).total_seconds())),
        "updated_at": agent.updated_at.isoformat(),
        "counters": agent.counters.model_dump(),
        "escalation_reason": agent.escalation_reason,
    }


def sort_agents(agents: Iterable[AgentRecord]) -> list[AgentRecord]:
    return sorted(
        agents, key=lambda a: (STATUS_ORDER[a.status], a.repo_full_name, a.issue_number or 0, a.agent_id)
    )


def status_table(agents: Sequence[AgentRecord], now: datetime) -> str:
    """One line per agent under a header, then a count per status."""
    if not agents:
        return "no agents\n"
    rows = [
        (
            a.agent_id,
            a.repo_full_name,
            a.role,
            f"#{a.issue_number}" if a.issue_number is not None else "-",
            _state(a),
            ", ".join(f"#{n}" for n in sorted(a.blocked_by)) or "-",
            f"#{a.pr_number}" if a.pr_number is not None else "-",
            age(a.created_at, now),
            str(a.counters.tool_calls),
            str(a.counters.turns),
            f"{a.counters.active_seconds}s",
        )
        for a in sort_agents(agents)
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(COLUMNS, *rows, strict=False)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [COLUMNS, *rows]
    ]
    counts: dict[str, int] = {}
    for agent in agents:
        counts[str(agent.status)] = counts.get(str(agent.status), 0) + 1
    summary = ", ".join(
        f"{n} {s.lower()}" for s, n in sorted(counts.items(), key=lambda i: STATUS_ORDER[AgentStatus(i[0])])
    )
    return "\n".join(lines) + f"\n{len(agents)} agents: {summary}\n"


def agent_detail(agent: AgentRecord, inbox: Sequence[InboxItem], now: datetime) -> str:
    """Everything the registry knows of one agent, and what waits in its inbox."""
    c = agent.counters
    fields = [
        ("agent", agent.agent_id),
        ("repository", agent.repo_full_name),
        ("role", f"{agent.role} ({agent.kind})"),
        ("issue", f"#{agent.issue_number}" if agent.issue_number is not None else "-"),
        ("status", _state(agent)),
        ("generation", str(agent.generation)),
        ("branch", agent.branch or "-"),
        ("pull request", f"#{agent.pr_number}" if agent.pr_number is not None else "-"),
        ("blocked by", ", ".join(f"#{n}" for n in sorted(agent.blocked_by)) or "-"),
        ("created", f"{agent.created_at.isoformat()} ({age(agent.created_at, now)} ago)"),
        ("updated", f"{agent.updated_at.isoformat()} ({age(agent.updated_at, now)} ago)"),
        (
            "heartbeat",
            f"{agent.heartbeat_at.isoformat()} ({age(agent.heartbeat_at, now)} ago)"
            if agent.heartbeat_at
            else "-",
        ),
        ("task", agent.task_arn or "-"),
        (
            "lease",
            f"{agent.lease_owner} until {agent.lease_expires_at.isoformat()}"
            if agent.lease_owner and agent.lease_expires_at
            else "-",
        ),
        ("woken because", agent.wake_reason or "-"),
        ("escalated because", agent.escalation_reason or "-"),
        (
            "counters",
            f"{c.tool_calls} tool calls, {c.turns} turns, {c.iterations} iterations, {c.active_seconds}s active, "
            f"{c.launches} launches, {c.wakes} wakes, {c.recoveries} recoveries, "
            f"{c.ci_failures} CI failures, {c.rejections} rejections",
        ),
    ]
    width = max(len(name) for name, _ in fields)
    lines = [f"{name.ljust(width)}  {value}" for name, value in fields]
    lines.append(f"inbox ({len(inbox)} waiting)" + (":" if inbox else ""))
    lines += [f"  - [{item.kind}] {item.summary}" for item in inbox]
    return "\n".join(lines) + "\n"


def dead_letter_table(messages: Sequence[dict[str, Any]]) -> str:
    if not messages:
        return "the dead-letter queue is empty\n"
    lines = [
        f"{m['message_id']}  group {m['group']}  {m['event']}  delivery {m['delivery_id']}  "
        f"received {m['receive_count']}x  sent {m['sent_at']}"
        for m in messages
    ]
    return "\n".join(lines) + f"\n{len(messages)} messages\n"
