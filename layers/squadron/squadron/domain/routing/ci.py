"""CI: failed checks and statuses on an agent's branch reach its dev agent as rounds; the merge gate re-judges.

A check's name and a status's context and description are their source's words: the app that
ran the check (a workflow's job name, which whoever controls that workflow chooses) or whoever
posted the status. No authority rule vouches for them, so they are never in a summary (which
becomes a wake reason); they travel as the item's body under their source's name, and the agent
host shows them by that source's trust (:mod:`squadron.domain.trust`): as they are when it is the
App or a person with write access, else withheld or fenced.
"""

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
from squadron.domain.routing.builders import agent_for_commit, count_round, judge_merge
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
    said: tuple[str, str],
) -> list[Effect]:
    """One failing head commit of the agent's PR: a CI round (checks do not name the PR's base).

    ``said`` is (source, text): whose words the check's name (a status's context) is, and them.
    """
    base = event.repository.default_branch or "main"
    source, text = said
    notice = ("check_failed", summary, text, url)
    return count_round(
        agent,
        event,
        snap,
        policy,
        trigger="on_ci_failure",
        round_key=sha,
        base=base,
        notice=notice,
        unvetted_author=source,
    )


def _app_login(slug: str | None) -> str:
    """The login a GitHub App's check runs are written under (``<slug>[bot]``); a bot's either way."""
    return f"{slug or 'unknown-app'}[bot]"


def _on_check(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    check = event.check
    assert check is not None
    label = check.name or check.kind
    gates: list[Effect] = [judge_merge(event, snap, policy, n) for n in check.pull_request_numbers]
    if check.conclusion not in FAILED_CHECK_CONCLUSIONS:
        passed = f"{check.kind} {label} on {check.head_sha[:7]} concluded {check.conclusion}"
        return gates or [Discard(passed)]
    agent = agent_for_commit(snap, policy, None, check.pull_request_numbers)
    kind = check.kind.replace("_", " ")
    summary = f"a {kind} failed ({check.conclusion}) on {check.head_sha[:7]}: its name follows"
    said = (_app_login(check.app_slug), f"{kind} name: {label}")
    return [*_ci_round(agent, event, snap, policy, check.head_sha, summary, None, said), *gates]


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
        summary = f"a commit status is {status.state} on {status.sha[:7]} ({branch}): its context follows"
        text = f"status context: {status.context}" + (
            f"\nstatus description: {status.description}" if status.description else ""
        )
        said = (event.sender.login, text)
        return [*_ci_round(agent, event, snap, policy, status.sha, summary, status.target_url, said), *gates]
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
