"""Resolve the approval flow of a pull request from its base branch — pure.

``default`` applies to every PR; each matching branch rule overrides the keys it
sets. When several rules match, they are combined with the default and the
most restrictive requirement wins:

- required reviews: the union by principal, with the highest ``min_approvals``;
  a review is required (or auto-assigned) if any source says so;
- required status checks and protected paths: the union, in order of appearance;
- merge policy: ``require_ci_pass`` and ``require_human`` if any source asks,
  ``auto_merge`` only if every source allows it; ``method`` and
  ``delete_branch`` come from the last matching rule that sets them;
- escalation: per trigger, the fewest retries and the shortest wait, the union
  of who is notified and assigned, the last label set.
"""

from __future__ import annotations

from collections.abc import Iterable

from squadron.domain.repo_config.models import (
    ApprovalFlow,
    ApprovalFlowsFile,
    EscalationRule,
    FlowEscalation,
    MergePolicy,
    ProtectedPath,
    ReviewRequirement,
)

AGENT_PREFIX = "agent:"


def resolve_flow(flows: ApprovalFlowsFile, base_branch: str) -> ApprovalFlow:
    """The flow of a PR into ``base_branch``: the default combined with every matching rule."""
    flow = flows.default
    for rule in flows.rules_for(base_branch):
        merge = flow.merge_policy
        override = rule.merge_policy
        if override is not None:
            merge = MergePolicy(
                method=override.method or merge.method,
                auto_merge=merge.auto_merge and (override.auto_merge is not False),
                require_ci_pass=merge.require_ci_pass or bool(override.require_ci_pass),
                require_human=merge.require_human or bool(override.require_human),
                delete_branch=merge.delete_branch
                if override.delete_branch is None
                else override.delete_branch,
            )
        escalation = flow.escalation
        if rule.escalation is not None:
            escalation = FlowEscalation(
                on_ci_failure=_stricter(escalation.on_ci_failure, rule.escalation.on_ci_failure),
                on_review_rejection=_stricter(
                    escalation.on_review_rejection, rule.escalation.on_review_rejection
                ),
                on_timeout=_stricter(escalation.on_timeout, rule.escalation.on_timeout),
            )
        flow = ApprovalFlow(
            required_reviews=merge_reviews(flow.required_reviews, rule.required_reviews or ()),
            required_status_checks=_union(flow.required_status_checks, rule.required_status_checks or ()),
            merge_policy=merge,
            protected_paths=_union_paths(flow.protected_paths, rule.protected_paths or ()),
            escalation=escalation,
        )
    return flow


def agent_review_roles(
    reviews: Iterable[ReviewRequirement], *, auto_assigned_only: bool = True
) -> tuple[str, ...]:
    """The agent roles among ``reviews`` (``agent:<role>``), in order."""
    return tuple(
        review.role.removeprefix(AGENT_PREFIX)
        for review in reviews
        if review.role.startswith(AGENT_PREFIX) and (review.auto_assign or not auto_assigned_only)
    )


def merge_reviews(
    base: Iterable[ReviewRequirement], extra: Iterable[ReviewRequirement]
) -> list[ReviewRequirement]:
    merged: dict[str, ReviewRequirement] = {}
    for review in [*base, *extra]:
        seen = merged.get(review.role)
        merged[review.role] = (
            review
            if seen is None
            else ReviewRequirement(
                role=review.role,
                min_approvals=max(seen.min_approvals, review.min_approvals),
                auto_assign=seen.auto_assign or review.auto_assign,
                required=seen.required or review.required,
            )
        )
    return list(merged.values())


def _union(base: Iterable[str], extra: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in [*base, *extra]:
        if item not in out:
            out.append(item)
    return out


def _union_paths(base: Iterable[ProtectedPath], extra: Iterable[ProtectedPath]) -> list[ProtectedPath]:
    out: list[ProtectedPath] = []
    for path in [*base, *extra]:
        if path not in out:
            out.append(path)
    return out


def _min(a: float | None, b: float | None) -> float | None:
    present = [v for v in (a, b) if v is not None]
    return min(present) if present else None


def _stricter(base: EscalationRule, override: EscalationRule | None) -> EscalationRule:
    if override is None:
        return base
    retries = _min(base.max_retries, override.max_retries)
    return EscalationRule(
        max_retries=None if retries is None else int(retries),
        hours=_min(base.hours, override.hours),
        notify=_union(base.notify, override.notify),
        label=override.label or base.label,
        assign=_union(base.assign, override.assign),
    )
