"""GitHub branch protection from the approval flows — pure (AD-016: GitHub is the hard backstop).

For each protected branch: the required status checks are the flow's CI
contexts, one ``squadron/<role>`` per required agent review and
``squadron/merge`` (the gate's verdict), the Squadron ones pinned to the App's
id so that nobody else can satisfy them; required approving reviews are the
largest ``min_approvals`` of the flow's human groups; stale approvals are
dismissed on new commits; the branch must be up to date before merging.

Classic branch protection names one branch; a rule whose pattern has
wildcards applies to the existing branches it matches (listed when applied).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from squadron.domain.approval import AGENT, GROUP, MERGE_CONTEXT
from squadron.domain.repo_config.flows import resolve_flow
from squadron.domain.repo_config.globs import fnmatch_matches
from squadron.domain.repo_config.models import ApprovalFlowsFile

_WILDCARDS = frozenset("*?[")


@dataclass(frozen=True)
class BranchProtection:
    branch: str
    #: The body of ``PUT /repos/{owner}/{repo}/branches/{branch}/protection``.
    body: dict[str, Any]
    #: What the protection asks, in words (for the CLI's report).
    summary: str


def protected_branches(flows: ApprovalFlowsFile, default_branch: str, existing: Iterable[str]) -> list[str]:
    """The default branch, every rule naming one branch, and existing branches matching a wildcard rule."""
    names = [default_branch]
    branches = list(existing)
    for rule in flows.branch_rules:
        if _WILDCARDS & set(rule.pattern):
            names += [b for b in branches if fnmatch_matches(b, rule.pattern)]
        else:
            names.append(rule.pattern)
    return list(dict.fromkeys(names))


def protection_for(flows: ApprovalFlowsFile, branch: str, *, app_id: int) -> BranchProtection:
    flow = resolve_flow(flows, branch)
    required = [r for r in flow.required_reviews if r.required]
    agent_contexts = [f"squadron/{r.role.removeprefix(AGENT)}" for r in required if r.role.startswith(AGENT)]
    squadron = [*agent_contexts, MERGE_CONTEXT]
    ci = list(flow.required_status_checks) if flow.merge_policy.require_ci_pass else []
    checks: list[dict[str, Any]] = [{"context": context, "app_id": app_id} for context in squadron]
    # CI contexts come from whatever CI the repository uses: not pinned to an app.
    checks += [{"context": context} for context in ci if context not in squadron]
    approvals = max((r.min_approvals for r in required if r.role.startswith(GROUP)), default=0)
    if flow.merge_policy.require_human:
        approvals = max(approvals, 1)
    reviews: dict[str, Any] | None = None
    if approvals:
        reviews = {"dismiss_stale_reviews": True, "required_approving_review_count": min(approvals, 6)}
    body: dict[str, Any] = {
        # ``contexts`` is deprecated but still required by the API: empty, ``checks`` carries them.
        "required_status_checks": {"strict": True, "contexts": [], "checks": checks},
        "enforce_admins": False,
        "required_pull_request_reviews": reviews,
        "restrictions": None,
    }
    words = [f"checks {', '.join(str(c['context']) for c in checks)}"]
    words.append(f"{approvals} approving review(s)" if approvals else "no approving reviews")
    return BranchProtection(branch, body, f"{branch}: " + "; ".join(words))
