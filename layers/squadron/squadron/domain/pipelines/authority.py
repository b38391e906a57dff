"""Whose word a gate check counts — pure: the merge gate's authority rule, applied to a pipeline's
gate (docs/pipelines.md, "Gate checks"; docs/security.md, the threat model).

A gate can let a run comment, label, close a pull request, call a webhook or start an agent: a
check that a person without write access could satisfy would hand them that action. So a gate
judges reviews, agent verdicts and checks exactly as the merge gate does, with its pieces
(:mod:`squadron.domain.merge_gate`, :mod:`squadron.domain.approval`, :mod:`squadron.domain.authority`):

* **Human reviews** (:func:`human_reviews`): each reviewer's latest standing review
  (:func:`~squadron.domain.merge_gate.latest_reviews`); the pull request's author, the App and
  bots are no human reviewers; of the rest only those whose repository permission GitHub gives as
  write, maintain or admin count — an approval *and* a change request. A stranger's or a
  read-only collaborator's change request blocks nothing, as on the merge gate (the author
  answers only those with authority). The permission is read for at most
  :data:`~squadron.domain.merge_gate.MAX_REVIEWERS_CHECKED` reviewers (change requests first):
  a reviewer past the bound is *unchecked*: their approval counts for nothing and their change
  request — like any unchecked one — fails ``no_changes_requested`` (fail closed, as the merge
  gate waits).
* **Agent verdicts** (:func:`agent_approvals`): the App's review agents approve through a
  ``squadron/<role>`` commit status the App posts (``success``), never through a review: no
  review counts as an agent's, whatever its author is called, nor a check run named like one.
  A status whose creator GitHub names must be the App.
* **CI** (:func:`trusted_checks`): a check run or status counts under its name, except a name
  ``squadron/…`` that is not the App's status, and — on a pull request from a fork — a GitHub
  Actions check run: ``pull_request`` workflows run the fork's own workflow files, so whoever
  opened it names those jobs and decides their outcome. A commit status needs push access to
  post (GitHub refuses anyone else), so it is a writer's or an installed App's word.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from squadron.domain.app_acts import is_app
from squadron.domain.approval import PullRequestState, counted_human_reviews
from squadron.domain.merge_gate import ACTIONS_APP, APP_CONTEXT_PREFIX, MAX_REVIEWERS_CHECKED, latest_reviews

if TYPE_CHECKING:
    from squadron.domain.pipelines.judge import CheckResult, Facts

__all__ = [
    "ACTIONS_APP",
    "APP_CONTEXT_PREFIX",
    "MAX_REVIEWERS_CHECKED",
    "CountedReviews",
    "agent_approvals",
    "human_reviews",
    "trusted_checks",
]


@dataclass(frozen=True)
class CountedReviews:
    """A pull request's reviews under the authority rule."""

    #: Reviewer -> standing state (APPROVED, CHANGES_REQUESTED, DISMISSED) of those with authority.
    counted: Mapping[str, str]
    #: ``login (rule)`` of each standing approval or change request that does not count.
    ignored: tuple[str, ...]
    #: Reviewers with a standing verdict whose permission was not read (past the bound).
    unchecked: tuple[str, ...]
    #: Which of ``unchecked`` request changes.
    unchecked_changes: tuple[str, ...]

    def approvals(self) -> list[str]:
        return sorted(login for login, state in self.counted.items() if state == "APPROVED")

    def changes_requested(self) -> list[str]:
        return sorted(login for login, state in self.counted.items() if state == "CHANGES_REQUESTED")


def human_reviews(facts: Facts) -> CountedReviews:
    """``facts``' reviews as the merge gate counts them (see the module)."""
    listed = [{"user": {"login": review.login}, "state": review.state.upper()} for review in facts.reviews]
    standing = latest_reviews(listed)
    state = PullRequestState(
        number=facts.number,
        head_sha=facts.head_sha,
        author=facts.author,
        reviews=standing,
        permissions=facts.permissions,
        bots=frozenset(review.login for review in facts.reviews if review.bot),
    )
    counted, ignored, unchecked = counted_human_reviews(state, facts.app_login)
    return CountedReviews(
        counted=counted,
        ignored=ignored,
        unchecked=tuple(unchecked),
        unchecked_changes=tuple(login for login in unchecked if standing.get(login) == "CHANGES_REQUESTED"),
    )


def _apps_status(result: CheckResult, app_login: str) -> bool:
    """A commit status the App posted (or one whose creator GitHub does not name: only a writer
    or an installed App can post a status)."""
    return result.kind == "status" and (not result.creator or is_app(result.creator, app_login))


def agent_approvals(facts: Facts) -> list[str]:
    """The roles whose ``squadron/<role>`` status, posted by the App, says ``success``."""
    return sorted(
        {
            result.name.removeprefix(APP_CONTEXT_PREFIX)
            for result in facts.checks
            if result.name.startswith(APP_CONTEXT_PREFIX)
            and result.name != f"{APP_CONTEXT_PREFIX}merge"
            and result.conclusion == "success"
            and _apps_status(result, facts.app_login)
        }
    )


def trusted_checks(facts: Facts) -> tuple[tuple[CheckResult, ...], tuple[str, ...]]:
    """The head's checks and statuses a ``ci_status`` counts, and ``name (why)`` of those it does not."""
    kept: list[CheckResult] = []
    dropped: list[str] = []
    for result in facts.checks:
        why = _untrusted(result, facts)
        if why is None:
            kept.append(result)
        else:
            dropped.append(f"{result.name} ({why})")
    return tuple(kept), tuple(dropped)


def _untrusted(result: CheckResult, facts: Facts) -> str | None:
    if result.name.startswith(APP_CONTEXT_PREFIX) and not _apps_status(result, facts.app_login):
        who = result.creator or result.app or "another source"
        return f"{result.kind} by {who}: only the App's own status carries a squadron/ name"
    if result.kind == "check_run" and facts.fork and result.app == ACTIONS_APP:
        return "a fork's GitHub Actions job: the fork's author wrote its workflow"
    return None
