"""CI: failed checks and statuses on an agent's branch reach its dev agent as rounds; the merge gate re-judges."""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.agents import (
    AgentRecord,
)
from squadron.domain.effects import (
    Discard,
    Effect,
    EvaluateMerge,
)
from squadron.domain.events import (
    EventEnvelope,
)
from squadron.domain.routing.builders import agent_for_commit, evaluate_merge, failed_round
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Handler, Snapshot

FAILED_CHECK_CONCLUSIONS = frozenset(
    {"failure", "timed_out", "cancelled", "action_required", "startup_failure"}
)


FAILED_STATUS_STATES = frozenset({"failure", "error"})


def _ci_round(  # noqa: PLR0917 (one call site per CI signal: checks and statuses)
    agent: AgentRecord | None,
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    sha: str,
    summary: str,
    url: str | None,
) -> list[Effect]:
    """One failing head commit of the agent's PR: a CI round (checks do not name the PR's base)."""
    base = event.repository.default_branch or "main"
    notice = ("check_failed", summary, "", url)
    return failed_round(
        agent, event, snap, policy, trigger="on_ci_failure", round_key=sha, base=base, notice=notice
    )


def _on_check(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    check = event.check
    assert check is not None
    label = check.name or check.kind
    gates: list[Effect] = [evaluate_merge(event, snap, policy, n) for n in check.pull_request_numbers]
    if check.conclusion not in FAILED_CHECK_CONCLUSIONS:
        passed = f"{check.kind} {label} on {check.head_sha[:7]} concluded {check.conclusion}"
        return gates or [Discard(passed)]
    agent = agent_for_commit(snap, policy, None, check.pull_request_numbers)
    summary = f"{check.kind} '{label}' {check.conclusion} on {check.head_sha[:7]}"
    return [*_ci_round(agent, event, snap, policy, check.head_sha, summary, None), *gates]


def _on_status(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    status = event.status
    assert status is not None
    owners = [
        (branch, agent)
        for branch in status.branches
        if (agent := agent_for_commit(snap, policy, branch, ())) is not None
    ][:1]
    gates: list[Effect] = [
        EvaluateMerge(
            event.repository.full_name,
            event.installation_id,
            agent.pr_number,
            agent.role,
            agent.issue_number,
            event.delivery_id,
        )
        for _, agent in owners
        if agent.pr_number is not None and status.context != "squadron/merge"
    ]
    if status.state not in FAILED_STATUS_STATES:
        return gates or [Discard(f"status {status.context} on {status.sha[:7]} is {status.state}")]
    for branch, agent in owners:
        summary = f"status '{status.context}' is {status.state} on {status.sha[:7]} ({branch})"
        return [*_ci_round(agent, event, snap, policy, status.sha, summary, status.target_url), *gates]
    return [
        Discard(
            f"status {status.context} on {status.sha[:7]}: no agent owns {', '.join(status.branches) or 'its branch'}"
        )
    ]


CI_ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("check_run", "completed"): _on_check,
    ("check_suite", "completed"): _on_check,
    ("status", None): _on_status,
}
