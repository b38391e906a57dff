"""GitHub's merge queue: its ``merge_group`` webhooks reach the merge gate and the dev agent.

- ``checks_requested``: the gate judges the pull request again and posts Squadron's statuses on
  the group's head too (branch protection requires them there);
- ``destroyed`` with ``merged``: what follows the App's own merge follows (the gate deletes the
  branch if the flow says so; the ``pull_request`` ``closed`` webhook does the rest);
- ``destroyed`` with ``dequeued``: the group failed (or someone took it out): the pull request's
  dev agent is told and woken, a CI round once per group (escalated past the flow's retries);
- ``destroyed`` with ``invalidated``: an entry ahead left the queue; GitHub builds the group
  again, nothing to do.

The pull request is the one the group's branch names (``gh-readonly-queue/<base>/pr-<n>-<sha>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from squadron.domain.effects import Discard, Effect
from squadron.domain.events import EventEnvelope
from squadron.domain.routing.builders import dev_agent_for_pr, evaluate_merge, failed_round
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Handler, Snapshot


def _checks_requested(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    group = event.merge_group
    if group is None or group.pr_number is None:
        return [Discard("merge_group.checks_requested: not a merge queue branch")]
    return [replace(evaluate_merge(event, snap, policy, group.pr_number), merge_group=group.head_sha)]


def _destroyed(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    group = event.merge_group
    if group is None or group.pr_number is None:
        return [Discard("merge_group.destroyed: not a merge queue branch")]
    number = group.pr_number
    if group.reason == "merged":
        return [replace(evaluate_merge(event, snap, policy, number), queue_merged=True)]
    if group.reason != "dequeued":
        return [Discard(f"merge group of PR #{number} {group.reason or 'destroyed'}: GitHub builds it again")]
    agent = dev_agent_for_pr(event, snap, policy, number)
    summary = (
        f"the merge queue took PR #{number} out: its merge group {group.head_sha[:7]} failed a required "
        "check (or a person removed it); see the checks of that commit, fix, and push"
    )
    base = group.base_ref.removeprefix("refs/heads/")
    notice = ("check_failed", summary, "", None)
    # A CI round like a failing check on the PR (once per group; past the flow's retries, escalated).
    return failed_round(
        agent,
        event,
        snap,
        policy,
        trigger="on_ci_failure",
        round_key=group.head_sha,
        base=base,
        notice=notice,
    )


MERGE_QUEUE_ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("merge_group", "checks_requested"): _checks_requested,
    ("merge_group", "destroyed"): _destroyed,
}
