"""The merge gate — pure: is a pull request ready to merge under its approval flow, and why not.

1. The effective flow: the base branch's flow (defaults + every matching branch
   rule, strictest wins: :func:`squadron.domain.repo_config.flows.resolve_flow`), plus what
   the protected paths among the PR's changed files add (reviews, a human).
2. The verdict over what GitHub says about the PR's head commit: agent reviews
   as ``squadron/<role>`` statuses, human reviews (latest per reviewer, the
   author's own never counted, and only under the authority rule of
   :mod:`squadron.domain.authority`: a reviewer without write access, or a bot,
   neither approves nor blocks; one whose access is unknown keeps the PR from
   merging), required status checks (CI), draft, conflicts.
3. In words, for the ``squadron/merge`` status (at most 140 characters), and
   whether the framework merges: only when everything is met, the flow allows
   auto-merge, and no human must merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from squadron.domain.app_acts import is_app
from squadron.domain.authority import Rule, decide
from squadron.domain.repo_config.flows import merge_reviews, resolve_flow
from squadron.domain.repo_config.limits import (
    MAX_CHANGED_FILES,
    MAX_CHANGED_PATH_LENGTH,
    MAX_LISTED,
    MAX_MATCH_WORK,
)
from squadron.domain.repo_config.models import ApprovalFlow, ApprovalFlowsFile, ReviewRequirement

AGENT = "agent:"
GROUP = "human_group:"
MERGE_CONTEXT = "squadron/merge"
PASSED = frozenset({"success", "neutral", "skipped"})
FAILED = frozenset({"failure", "error", "timed_out", "cancelled", "action_required", "startup_failure"})

Verdict = Literal["ready", "waiting", "blocked"]
#: Review states that count toward a gate (an approval or a change request).
STANDING_VERDICTS = frozenset({"APPROVED", "CHANGES_REQUESTED"})


@dataclass(frozen=True)
class EffectiveFlow:
    flow: ApprovalFlow
    require_human: bool
    #: Why reviews were added beyond the branch's flow (protected paths that matched).
    added_by: tuple[str, ...] = ()


#: Roles whose pull requests a person must always approve and merge, whatever the flow says: a
#: retrospective proposes changes to Squadron's own policy (``.squadron/``).
PEOPLE_ONLY_ROLES = frozenset({"retrospective"})


def held_for_people(effective: EffectiveFlow, author_role: str | None) -> EffectiveFlow:
    """``effective``, with a person required when the pull request's agent is of a
    :data:`PEOPLE_ONLY_ROLES` role."""
    if author_role not in PEOPLE_ONLY_ROLES or effective.require_human:
        return effective
    return replace(
        effective, require_human=True, added_by=(*effective.added_by, f"a {author_role} agent's PR")
    )


def reads_changed_files(flows: ApprovalFlowsFile, base_branch: str, changed_count: int | None = None) -> bool:
    """Whether the changed files of a PR into ``base_branch`` (GitHub counts ``changed_count``)
    can change its effective flow, so are worth a read: only when the flow into that base protects
    paths, and GitHub does not count more than :data:`MAX_CHANGED_FILES` (past the cap every
    protected path applies unread; see :func:`effective_flow`)."""
    if changed_count is not None and changed_count > MAX_CHANGED_FILES:
        return False
    return bool(resolve_flow(flows, base_branch).protected_paths)


def effective_flow(
    flows: ApprovalFlowsFile,
    base_branch: str,
    changed_files: Iterable[str],
    *,
    changed_count: int | None = None,
) -> EffectiveFlow:
    """The flow of a PR into ``base_branch`` changing ``changed_files`` (GitHub counts
    ``changed_count`` of them). Past :data:`MAX_CHANGED_FILES` files, or a path longer than
    :data:`MAX_CHANGED_PATH_LENGTH`, the files are not matched: every protected path applies
    (fail closed — the humans and reviews they require decide); so does a match that would take
    more than :data:`MAX_MATCH_WORK`."""
    flow = resolve_flow(flows, base_branch)
    files = list(changed_files)
    globs = sum(len(protected.paths) for protected in flow.protected_paths)
    unmatched = unmatched_files(files, changed_count, globs=globs) if globs else None
    reviews = list(flow.required_reviews)
    require_human = flow.merge_policy.require_human
    added: list[str] = []
    for protected in flow.protected_paths:
        touched = unmatched or next((path for path in files if protected.matches(path)), None)
        if touched is None:
            continue
        reviews = merge_reviews(reviews, protected.required_reviews)
        require_human = require_human or protected.require_human
        added.append(f"{touched} ({protected.description or ', '.join(protected.paths)})")
    return EffectiveFlow(flow.model_copy(update={"required_reviews": reviews}), require_human, tuple(added))


def unmatched_files(files: list[str], changed_count: int | None = None, *, globs: int = 1) -> str | None:
    """Why a PR's changed files are not matched against ``globs`` path globs (None: they are)."""
    count = max(len(files), changed_count or 0)
    if count > MAX_CHANGED_FILES:
        return f"{count} changed files, over the {MAX_CHANGED_FILES} matched (MAX_CHANGED_FILES)"
    if len(files) < count:
        return f"{count} changed files but {len(files)} listed"
    longest = max((len(path) for path in files), default=0)
    if longest > MAX_CHANGED_PATH_LENGTH:
        return f"a changed path of {longest} characters (MAX_CHANGED_PATH_LENGTH)"
    work = sum(len(path) for path in files) * globs
    if work > MAX_MATCH_WORK:
        return f"{work} path characters x globs to match, over {MAX_MATCH_WORK} (MAX_MATCH_WORK)"
    return None


@dataclass(frozen=True)
class PullRequestState:
    """What GitHub says about the PR now (its head commit's statuses and checks, its reviews)."""

    number: int
    head_sha: str
    author: str
    draft: bool = False
    #: GitHub's ``mergeable_state``: clean, dirty (conflicts), behind, blocked, unstable, unknown.
    mergeable_state: str | None = None
    #: The dev role whose agent wrote the PR: its own review role never counts.
    author_role: str | None = None
    #: Status contexts (``squadron/<role>``, CI statuses) and check-run names -> their outcome.
    checks: Mapping[str, str] = field(default_factory=dict)
    #: Latest review state per reviewer: APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED.
    reviews: Mapping[str, str] = field(default_factory=dict)
    #: Each reviewer's repository permission as GitHub's permission endpoint said (a reviewer
    #: missing here is unknown: their review counts for nothing and the PR does not merge).
    permissions: Mapping[str, str] = field(default_factory=dict)
    #: Reviewers that are bots (GitHub's user type): their reviews never count.
    bots: frozenset[str] = frozenset()
    #: The PR has more reviews than the gate read (:data:`MAX_LISTED`): a later change request
    #: might be among the unread, so it never merges.
    reviews_cut: bool = False


@dataclass(frozen=True)
class GateResult:
    verdict: Verdict
    reasons: tuple[str, ...]
    #: The framework merges now (ready, auto_merge on, no human needed).
    merge: bool
    method: str
    delete_branch: bool
    #: Reviews that did not count under the authority rule: ``login (rule)`` each.
    ignored: tuple[str, ...] = ()

    @property
    def status_state(self) -> Literal["success", "pending", "failure"]:
        return {"ready": "success", "waiting": "pending", "blocked": "failure"}[self.verdict]  # type: ignore[return-value]

    @property
    def description(self) -> str:
        """One line for the squadron/merge status (GitHub keeps 140 characters)."""
        if self.verdict == "ready":
            text = (
                "ready: merging"
                if self.merge
                else f"ready: {self.reasons[0] if self.reasons else 'a human merges'}"
            )
        else:
            text = f"{self.verdict}: " + "; ".join(self.reasons)
        return text if len(text) <= 140 else text[:139] + "…"


def _outcome(value: str | None) -> Literal["passed", "failed", "pending"]:
    if value in PASSED:
        return "passed"
    if value in FAILED:
        return "failed"
    return "pending"


def evaluate(
    effective: EffectiveFlow, pr: PullRequestState, groups: Mapping[str, Iterable[str]], *, bot_login: str
) -> GateResult:
    """The verdict on ``pr`` under ``effective``: blocked (something failed), waiting, or ready."""
    flow, policy = effective.flow, effective.flow.merge_policy
    blocked: list[str] = []
    waiting: list[str] = []
    if pr.draft:
        waiting.append("draft")
    if pr.mergeable_state == "dirty":
        blocked.append("merge conflict with the base branch")
    if pr.reviews_cut:
        blocked.append(f"over {MAX_LISTED} reviews, more than the gate reads (MAX_LISTED)")
    humans, ignored, unchecked = _human_reviews(pr, bot_login)
    for login, state in sorted(humans.items()):
        if state == "CHANGES_REQUESTED":
            blocked.append(f"changes requested by @{login}")
    for review in flow.required_reviews:
        if review.required:
            _review(review, pr, humans, groups, blocked=blocked, waiting=waiting)
    if policy.require_ci_pass:
        for context in flow.required_status_checks:
            outcome = _outcome(pr.checks.get(context))
            if outcome == "failed":
                blocked.append(f"{context} failing")
            elif outcome == "pending":
                waiting.append(f"waiting on {context}")
    approvals = [login for login, state in humans.items() if state == "APPROVED"]
    if effective.require_human and not approvals:
        waiting.append("a human approval")
    if unchecked:
        # Fail closed: an unknown reviewer might have requested changes with authority.
        waiting.append(f"access of {len(unchecked)} reviewer{'s' if len(unchecked) > 1 else ''} unchecked")
    method, delete = policy.method, policy.delete_branch
    if blocked or waiting:
        verdict: Verdict = "blocked" if blocked else "waiting"
        return GateResult(verdict, tuple(blocked + waiting), False, method, delete, ignored)
    if effective.require_human:
        return GateResult("ready", ("a human merges (require_human)",), False, method, delete, ignored)
    if not policy.auto_merge:
        return GateResult("ready", ("a human merges (auto_merge off)",), False, method, delete, ignored)
    return GateResult("ready", (), True, method, delete, ignored)


def counted_human_reviews(
    pr: PullRequestState, bot_login: str
) -> tuple[dict[str, str], tuple[str, ...], list[str]]:
    """The authority rule over ``pr``'s reviews (see :func:`_human_reviews`); a pipeline's gate
    judges reviews with it too (:mod:`squadron.domain.pipelines.authority`)."""
    return _human_reviews(pr, bot_login)


def _human_reviews(pr: PullRequestState, bot_login: str) -> tuple[dict[str, str], tuple[str, ...], list[str]]:
    """The reviews that count (by authorised humans), the ones ignored, and unknown reviewers.

    The author's own review and the App's (its review agents speak through
    ``squadron/<role>`` statuses) are no human review at all. Of the rest, only reviews
    whose author has authority count; an approval or change request of a reviewer whose
    permission is unknown is ``unchecked`` (the shell asks GitHub for a bounded number).
    """
    counted: dict[str, str] = {}
    ignored: list[str] = []
    unchecked: list[str] = []
    for login, state in sorted(pr.reviews.items()):
        if login.casefold() == pr.author.casefold() or is_app(login, bot_login):
            continue
        authority = decide(
            login, is_bot=login in pr.bots, bot_login=bot_login, permission=pr.permissions.get(login)
        )
        if authority.authorised:
            counted[login] = state
        elif authority.rule is Rule.UNKNOWN_PERMISSION and state in STANDING_VERDICTS:
            unchecked.append(login)
        elif state in STANDING_VERDICTS:
            ignored.append(f"{login} ({authority.rule})")
    return counted, tuple(ignored), unchecked


def _review(
    review: ReviewRequirement,
    pr: PullRequestState,
    humans: Mapping[str, str],
    groups: Mapping[str, Iterable[str]],
    *,
    blocked: list[str],
    waiting: list[str],
) -> None:
    if review.role.startswith(AGENT):
        role = review.role.removeprefix(AGENT)
        if role == pr.author_role:
            blocked.append(f"{role} cannot review its own PR")
            return
        outcome = _outcome(pr.checks.get(f"squadron/{role}"))
        if outcome == "failed":
            blocked.append(f"{role} requested changes")
        elif outcome == "pending":
            waiting.append(f"waiting on {role}")
        return
    group = review.role.removeprefix(GROUP)
    members = set(groups.get(group, ()))
    approved = sorted(login for login in members if humans.get(login) == "APPROVED")
    if len(approved) < review.min_approvals:
        have = f" ({len(approved)}/{review.min_approvals})" if review.min_approvals > 1 else ""
        waiting.append(f"waiting on {group}{have}")
