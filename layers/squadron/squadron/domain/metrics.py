"""What Squadron counts: the metric catalogue and pure functions from outcomes to data points.

Every metric any component publishes is declared here once (name, unit, the one dimension
it is broken down by, who publishes it, what it means): the handlers publish only points
these functions build, the CDK dashboard and alarms are drawn from the same catalogue, and
a test checks that nothing is published or graphed that is not in it.

A point with a dimension is published twice: as the total (dimension ``service`` only, what
alarms and the dashboard's lines use) and broken down (``service`` plus its dimension, what
the dashboard's stacked views search for). Dimension values come from small closed sets
(outcome codes, event names, effect names, statuses, limits), never from ids, so the number
of CloudWatch metrics stays bounded; a metric is billed only in the hours it is published,
so an idle installation costs nothing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Unit = Literal["Count", "Seconds", "Milliseconds", "Megabytes"]
Service = Literal["ingress", "router", "reconciler", "gateway", "agent"]

#: The CloudWatch namespace of a stage: one installation's metrics never mix with another's.
NAMESPACE_PREFIX = "Squadron"


def namespace(stage: str) -> str:
    return f"{NAMESPACE_PREFIX}/{stage}"


@dataclass(frozen=True)
class MetricPoint:
    name: str
    value: float = 1.0
    unit: Unit = "Count"
    #: (dimension, value) of the breakdown, or None for a metric published as a total only.
    dimension: tuple[str, str] | None = None


@dataclass(frozen=True)
class MetricSpec:
    name: str
    service: Service
    unit: Unit
    description: str
    dimension: str | None = None


_SPECS = (
    # --- ingress ---------------------------------------------------------------------------
    MetricSpec("WebhooksReceived", "ingress", "Count", "requests that reached the ingress"),
    MetricSpec("WebhooksEnqueued", "ingress", "Count", "deliveries put on events.fifo", "Event"),
    MetricSpec("WebhooksRejected", "ingress", "Count", "refused with a 4xx (bad signature, ...)", "Reason"),
    MetricSpec("WebhooksDropped", "ingress", "Count", "valid but not for the router (202)", "Reason"),
    MetricSpec(
        "WebhooksFailed", "ingress", "Count", "answered 5xx: GitHub keeps them to redeliver", "Reason"
    ),
    MetricSpec("WebhooksPinged", "ingress", "Count", "GitHub's ping on (re)configuring the hook"),
    # --- router ----------------------------------------------------------------------------
    MetricSpec("DeliveriesRouted", "router", "Count", "deliveries routed to the end", "Event"),
    MetricSpec("DeliveriesDuplicate", "router", "Count", "deliveries already routed (changed nothing)"),
    MetricSpec("DeliveriesDiscarded", "router", "Count", "deliveries whose only effect was a discard"),
    MetricSpec("DeliveriesFailed", "router", "Count", "deliveries that failed and went back to the queue"),
    MetricSpec(
        "HumanInputsRefused",
        "router",
        "Count",
        "inputs without authority, discarded (the authority rule)",
        "Rule",
    ),
    MetricSpec(
        "DeliveriesPaused", "router", "Count", "deliveries of a repository whose configuration is invalid"
    ),
    MetricSpec("RoutingEffects", "router", "Count", "effects applied, by kind", "Effect"),
    MetricSpec("AgentLaunches", "router", "Count", "agent tasks started for new work"),
    MetricSpec("AgentWakes", "router", "Count", "sleeping, idle or escalated agents woken"),
    MetricSpec("AgentSleeps", "router", "Count", "agents put to sleep on a blocker"),
    MetricSpec("AgentCompletions", "router", "Count", "agents whose work ended (issue closed, merged)"),
    MetricSpec("Escalations", "router", "Count", "agents handed to humans by the router or reconciler"),
    MetricSpec(
        "AgentLaunchesHeld",
        "router",
        "Count",
        "launches RunTask refused (quota, capacity): retried with back-off",
    ),
    MetricSpec(
        "EffectsFailed",
        "router",
        "Count",
        "effects of committed decisions not carried out for good (GitHub 404/410/422, or given up)",
    ),
    # --- reconciler ------------------------------------------------------------------------
    MetricSpec("ReconcilerRuns", "reconciler", "Count", "runs that finished (missing data: not running)"),
    MetricSpec("ReconcilerRepairs", "reconciler", "Count", "repairs made, by kind", "Kind"),
    MetricSpec("ReconcilerProblems", "reconciler", "Count", "things a run could not read or do"),
    MetricSpec("AgentsByStatus", "reconciler", "Count", "agents in each live status, each run", "Status"),
    MetricSpec("SilentAgents", "reconciler", "Count", "live agents whose task stopped heartbeating"),
    # --- agent gateway ---------------------------------------------------------------------
    MetricSpec("GatewayCalls", "gateway", "Count", "agent tasks' calls answered, by operation", "Op"),
    MetricSpec(
        "GatewayRefusals",
        "gateway",
        "Count",
        "agent tasks' calls refused (wrong, replaced or expired secret, lease, role)",
        "Reason",
    ),
    MetricSpec("TokensVended", "gateway", "Count", "narrowed installation tokens given to agent tasks"),
    # --- agent host ------------------------------------------------------------------------
    MetricSpec("AgentTasks", "agent", "Count", "agent tasks that ended, by how", "Outcome"),
    MetricSpec("AgentEscalations", "agent", "Count", "agents that handed their issue to humans"),
    MetricSpec("BreakerTrips", "agent", "Count", "circuit breakers tripped, by limit", "Limit"),
    MetricSpec("AgentToolCalls", "agent", "Count", "tool calls made by agents"),
    MetricSpec("AgentTurns", "agent", "Count", "model turns taken by agents"),
    MetricSpec("AgentActiveSeconds", "agent", "Seconds", "time agents spent working (the model's bill)"),
    MetricSpec("AgentTokens", "agent", "Count", "model tokens agents' tasks read and wrote", "Direction"),
    MetricSpec("AgentCost", "agent", "Count", "USD agents' tasks cost (tokens and task time, priced)"),
    MetricSpec("SessionStartSeconds", "agent", "Seconds", "creating or resuming a session", "Mode"),
    # --- every component that talks to GitHub ---------------------------------------------
    MetricSpec("GitHubCalls", "router", "Count", "GitHub REST requests sent (with retries)"),
    MetricSpec("GitHubRetries", "router", "Count", "requests retried after a 5xx or network failure"),
    MetricSpec("GitHubRateLimitWaits", "router", "Count", "waits for a primary or secondary rate limit"),
    MetricSpec("GitHubRateLimitRemaining", "router", "Count", "x-ratelimit-remaining, lowest seen"),
    MetricSpec(
        "GitHubNotModified", "router", "Count", "conditional GETs answered 304 from the ETag cache (free)"
    ),
)

CATALOGUE: Mapping[str, MetricSpec] = {spec.name: spec for spec in _SPECS}
#: Published by every component that calls GitHub, not only the router (its nominal owner).
GITHUB_METRICS = frozenset(
    {"GitHubCalls", "GitHubRetries", "GitHubRateLimitWaits", "GitHubRateLimitRemaining", "GitHubNotModified"}
)


def point(name: str, value: float = 1.0, dimension: str | None = None) -> MetricPoint:
    spec = CATALOGUE[name]
    if (spec.dimension is None) != (dimension is None):
        raise ValueError(f"{name} is broken down by {spec.dimension!r}, not {dimension!r}")
    return MetricPoint(
        name,
        value,
        spec.unit,
        None if spec.dimension is None or dimension is None else (spec.dimension, dimension),
    )


# --- ingress ----------------------------------------------------------------------------------

_INGRESS_OUTCOMES = {
    "accepted": "WebhooksEnqueued",
    "rejected": "WebhooksRejected",
    "dropped": "WebhooksDropped",
    "failed": "WebhooksFailed",
}


def ingress_points(outcome: str, code: str) -> list[MetricPoint]:
    """One request's answer: ``outcome`` accepted|rejected|dropped|failed|pong, ``code`` its reason
    (the event's name when accepted)."""
    points = [point("WebhooksReceived")]
    if outcome == "pong":
        return [*points, point("WebhooksPinged")]
    return [*points, point(_INGRESS_OUTCOMES[outcome], dimension=code)]


# --- router -----------------------------------------------------------------------------------


def routing_points(summary: Mapping[str, object]) -> list[MetricPoint]:
    """One routed delivery, from the dispatcher's summary (event, effects, launches, transitions,
    and the authority rule that refused it, if one did)."""
    effects = [str(name) for name in _strings(summary.get("effects"))]
    points = [point("DeliveriesRouted", dimension=str(summary.get("event", "unknown")))]
    if summary.get("paused"):
        points.append(point("DeliveriesPaused"))
    if effects and all(name == "Discard" for name in effects):
        points.append(point("DeliveriesDiscarded"))
    points.extend(point("HumanInputsRefused", dimension=rule) for rule in _strings(summary.get("refused")))
    points.extend(point("RoutingEffects", dimension=name) for name in effects)
    for purpose in _strings(summary.get("launches")):
        points.append(point("AgentLaunches" if purpose == "start" else "AgentWakes"))
    points.extend(point("AgentLaunchesHeld") for _ in _strings(summary.get("held")))
    points.extend(point("EffectsFailed") for _ in _strings(summary.get("failed")))
    for change in _strings(summary.get("transitions")):
        before, _, after = change.partition(">")
        if after == "SLEEPING" and before != "SLEEPING":
            points.append(point("AgentSleeps"))
        elif after == "COMPLETED":
            points.append(point("AgentCompletions"))
        elif after == "ESCALATED":
            points.append(point("Escalations"))
    return points


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list | tuple) else []


# --- reconciler -------------------------------------------------------------------------------


def reconcile_points(
    *,
    repairs: Mapping[str, int],
    problems: int,
    by_status: Mapping[str, int],
    silent: int,
) -> list[MetricPoint]:
    """One reconciler run. ``ReconcilerRuns`` is published every run (its alarm's missing data means
    "not running"); the gauges only when they are not zero: a metric is billed for every month it is
    published in, and an idle installation should cost nothing here (the alarm on silent agents
    treats missing data as none)."""
    points = [point("ReconcilerRuns")]
    if problems:
        points.append(point("ReconcilerProblems", problems))
    if silent:
        points.append(point("SilentAgents", silent))
    points.extend(point("ReconcilerRepairs", count, kind) for kind, count in sorted(repairs.items()) if count)
    points.extend(
        point("AgentsByStatus", count, status) for status, count in sorted(by_status.items()) if count
    )
    return points


# --- agent gateway ----------------------------------------------------------------------------


def gateway_points(op: str, refused: str | None) -> list[MetricPoint]:
    """One call of an agent task to the gateway: answered (and a token vended), or refused why."""
    if refused is not None:
        return [point("GatewayRefusals", dimension=refused)]
    points = [point("GatewayCalls", dimension=op)]
    if op == "github_token":
        points.append(point("TokensVended"))
    return points


# --- agent host -------------------------------------------------------------------------------


def agent_task_points(
    *,
    outcome: str,
    tool_calls: int,
    turns: int,
    active_seconds: float,
    tripped: str | None,
    session_mode: str | None,
    session_seconds: float | None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_usd: float = 0.0,
) -> list[MetricPoint]:
    """One agent task, when it ends: how it ended, what it used and cost, which breaker tripped."""
    points = [
        point("AgentTasks", dimension=outcome),
        point("AgentToolCalls", tool_calls),
        point("AgentTurns", turns),
        point("AgentActiveSeconds", round(active_seconds, 3)),
        point("AgentTokens", input_tokens, "input"),
        point("AgentTokens", output_tokens, "output"),
        point("AgentCost", round(cost_usd, 6)),
    ]
    if outcome == "escalated":
        points.append(point("AgentEscalations"))
    if tripped is not None:
        points.append(point("BreakerTrips", dimension=tripped))
    if session_mode is not None and session_seconds is not None:
        points.append(point("SessionStartSeconds", round(session_seconds, 3), session_mode))
    return points


# --- GitHub -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GitHubTraffic:
    """What a GitHub transport sent over some span (the adapter counts, the handler drains)."""

    calls: int = 0
    retries: int = 0
    rate_limit_waits: int = 0
    #: The lowest ``x-ratelimit-remaining`` GitHub answered with (None: no answer carried it).
    lowest_remaining: int | None = None
    #: Calls answered 304 Not Modified (counted in ``calls``; not against the primary rate limit).
    not_modified: int = 0


def github_points(traffic: GitHubTraffic) -> list[MetricPoint]:
    """GitHub traffic since the last drain (nothing when there was none)."""
    if not traffic.calls:
        return []
    points = [
        point("GitHubCalls", traffic.calls),
        point("GitHubRetries", traffic.retries),
        point("GitHubRateLimitWaits", traffic.rate_limit_waits),
        point("GitHubNotModified", traffic.not_modified),
    ]
    if traffic.lowest_remaining is not None:
        points.append(point("GitHubRateLimitRemaining", traffic.lowest_remaining))
    return points


def totals(points: Iterable[MetricPoint]) -> dict[str, float]:
    """The sum per metric name."""
    out: dict[str, float] = {}
    for point in points:
        out[point.name] = out.get(point.name, 0.0) + point.value
    return out
