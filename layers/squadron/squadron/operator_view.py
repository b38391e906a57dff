"""What `squadron status`, `squadron agent show` and `squadron dlq list` print: pure functions
from registry records and queue messages to rows, tables and JSON-ready dicts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from squadron.domain.agents import AgentRecord, AgentStatus, InboxItem, name_for_id
from squadron.domain.cost import DEFAULT_PRICES, Cost, PriceTable, agent_cost, issue_costs, usd
from squadron.domain.memory import MemoryFact
from squadron.domain.outbox import FailedEffect

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
    "ID",
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
    "COST",
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
        "cost_usd": _cost_json(agent_cost(agent)),
        "escalation_reason": agent.escalation_reason,
        "finished_at": agent.finished_at.isoformat() if agent.finished_at else None,
        "purged_at": agent.purged_at.isoformat() if agent.purged_at else None,
    }


def _cost_json(cost: Cost) -> dict[str, Any]:
    return {
        "tokens": round(cost.tokens_usd, 6),
        "task": round(cost.task_usd, 6),
        "total": round(cost.total_usd, 6),
        "unpriced_models": sorted(cost.unpriced),
    }


def sort_agents(agents: Iterable[AgentRecord]) -> list[AgentRecord]:
    return sorted(
        agents, key=lambda a: (STATUS_ORDER[a.status], a.repo_full_name, a.issue_number or 0, a.agent_id)
    )


def _cost_cell(cost: Cost) -> str:
    return usd(cost.total_usd) + ("+?" if cost.unpriced else "")


def repository_issue_costs(
    agents: Sequence[AgentRecord], prices: PriceTable = DEFAULT_PRICES
) -> dict[tuple[str, int], tuple[Cost, Cost]]:
    """Per (repository, issue): what its agents cost, and with the issues blocking it (its tree)."""
    by_repo: dict[str, list[AgentRecord]] = {}
    for agent in agents:
        by_repo.setdefault(agent.repo_full_name, []).append(agent)
    return {
        (repo, number): costs
        for repo, theirs in sorted(by_repo.items())
        for number, costs in issue_costs(theirs, prices).items()
    }


def cost_lines(agents: Sequence[AgentRecord], prices: PriceTable = DEFAULT_PRICES) -> list[str]:
    """ "cost per issue" lines: each issue's agents, and with the issues blocking it."""
    lines = []
    for (repo, number), (own, tree) in repository_issue_costs(agents, prices).items():
        line = f"  {repo}#{number}  {_cost_cell(own)}"
        if tree.total_usd != own.total_usd:
            line += f"  (with its blockers {_cost_cell(tree)})"
        lines.append(line)
    unpriced = sorted({m for a in agents for m in agent_cost(a, prices).unpriced})
    if unpriced:
        lines.append(
            f"  +? no price for {', '.join(unpriced)} (not counted: add it to pricing in .squadron/config.yaml)"
        )
    return ["cost per issue:", *lines] if lines else []


def status_table(agents: Sequence[AgentRecord], now: datetime, prices: PriceTable = DEFAULT_PRICES) -> str:
    """One line per agent under a header, a count per status, then the cost per issue."""
    if not agents:
        return "no agents\n"
    rows = [
        (
            a.display_name,
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
            _cost_cell(agent_cost(a, prices)),
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
    costs = cost_lines(agents, prices)
    return "\n".join([*lines, f"{len(agents)} agents: {summary}", *costs]) + "\n"


def agent_detail(agent: AgentRecord, inbox: Sequence[InboxItem], now: datetime) -> str:
    """Everything the registry knows of one agent, and what waits in its inbox."""
    c = agent.counters
    fields = [
        ("agent", agent.display_name),
        ("id", agent.agent_id),
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
        (
            "finished",
            f"{agent.finished_at.isoformat()} ({age(agent.finished_at, now)} ago)"
            if agent.finished_at
            else "-",
        ),
        (
            "working copy",
            f"removed {agent.purged_at.isoformat()} ({age(agent.purged_at, now)} ago), with its session"
            if agent.purged_at
            else "kept with its session (on the agents' volume)",
        ),
        ("woken because", agent.wake_reason or "-"),
        ("escalated because", agent.escalation_reason or "-"),
        (
            "counters",
            f"{c.tool_calls} tool calls, {c.turns} turns, {c.iterations} iterations, {c.active_seconds}s active, "
            f"{c.launches} launches, {c.wakes} wakes, {c.recoveries} recoveries, "
            f"{c.ci_failures} CI failures, {c.rejections} rejections",
        ),
        (
            "cost",
            f"{_cost_cell(agent_cost(agent))} ("
            + (
                ", ".join(f"{t.model}: {t.input_tokens} in, {t.output_tokens} out" for t in c.tokens)
                or "no tokens"
            )
            + f", {c.active_seconds}s of task time)",
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


def memory_table(facts: Sequence[MemoryFact]) -> str:
    """A repository's memory, one fact per line: id, status, uses, provenance, text."""
    if not facts:
        return "memory is empty\n"
    lines = [f"{'FACT':<15} {'STATUS':<10} {'USES':>4}  {'FROM':<10} {'BY':<22} TEXT"]
    for fact in facts:
        status = "pinned" if fact.pinned else fact.status
        text = fact.text if len(fact.text) <= 80 else fact.text[:79] + "…"
        lines.append(
            f"{fact.fact_id:<15} {status:<10} {fact.use_count:>4}  {fact.evidence.label():<10} {name_for_id(fact.agent_id):<22} {text}"
        )
    return "\n".join(lines) + "\n"


def memory_detail(fact: MemoryFact, *, web_url: str) -> str:
    """One fact, whole, with where it came from (a link on GitHub's web side ``web_url``) and who
    confirmed it."""
    status = "pinned" if fact.pinned else fact.status
    rows = [
        ("fact", fact.fact_id),
        ("text", fact.text),
        ("status", status),
        ("evidence", f"{fact.evidence.label()} {fact.evidence.url(fact.repo_full_name, web_url=web_url)}"),
        (
            "learned by",
            name_for_id(fact.agent_id),
        ),
        ("audience", "every agent" if fact.audience == "repository" else f"{fact.kind} agents"),
        ("created", fact.created_at.isoformat()),
        ("last used", f"{fact.last_used_at.isoformat()} ({fact.use_count} uses)"),
        (
            "confirmed",
            f"by {fact.confirmed_by} ({fact.confirmed_how}) at {fact.confirmed_at.isoformat()}"
            if fact.confirmed_at
            else "not yet",
        ),
    ]
    return "".join(f"{name + ':':<12} {value}\n" for name, value in rows)


def failed_effects_table(failed: Sequence[FailedEffect], now: datetime) -> str:
    """The effects Squadron decided and will never carry out (GitHub refused them for good, or
    they failed too often), newest first; empty when there are none."""
    if not failed:
        return ""
    lines = ["", "NOT CARRIED OUT (GitHub refused for good, or failed too often):"]
    for effect in failed:
        where = (
            f"{effect.repo_full_name}#{effect.number}" if effect.number is not None else effect.repo_full_name
        )
        lines.append(f"  {age(effect.at, now):>4} ago  {where}  {effect.effect}: {effect.reason}")
    return "\n".join(lines) + "\n"
