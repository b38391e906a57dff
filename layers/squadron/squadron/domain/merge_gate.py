"""The merge gate's choices — pure: given what GitHub says of a pull request, what the gate does.

The shell (:mod:`squadron.shell.merge_gate`) reads, asks here, and carries out:

1. :func:`not_gated`: a closed or merged pull request is not judged.
2. :func:`reads_files` and :func:`reviewers_to_check`: which of the optional reads the judgement
   needs (the changed files only when a protected path could use them; the permission of each
   human with a standing approval or change request, change requests first, at most
   :data:`MAX_REVIEWERS_CHECKED`).
3. :func:`judge`: the verdict (:func:`squadron.domain.approval.evaluate`) and the
   :class:`GateDecision` that follows from it: the statuses to post (``squadron/merge`` on the
   head and, for a merge group GitHub asks checks of, Squadron's statuses on the group's head),
   the conflict to report to the dev agent (AD-005), whether the base's merge queue rules are
   worth reading, whether to merge (the flow's consent, its method, pinned to the judged head)
   and which branch to delete after.
4. :func:`branch_after_queue_merge`: GitHub's merge queue merged it; the branch the flow deletes.
5. :func:`merged_event`: the ``pull_request`` ``closed`` webhook GitHub sends for the App's own
   merge (the ingress drops it), put on events.fifo for the router.

What the gate does about a merge queue entry is :func:`squadron.domain.merge_queue.queue_step`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from squadron.domain.app_acts import is_app
from squadron.domain.approval import (
    MERGE_CONTEXT,
    STANDING_VERDICTS,
    GateResult,
    PullRequestState,
    effective_flow,
    evaluate,
    held_for_people,
    reads_changed_files,
)
from squadron.domain.commands import ReportConflict
from squadron.domain.event_fields import is_bot_account
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.merge_queue import group_statuses
from squadron.domain.permissions import MergeConsent
from squadron.domain.repo_config.limits import MAX_LISTED
from squadron.domain.repo_config.models import ApprovalFlowsFile

Json = Mapping[str, Any]

#: Review states that stand until replaced (a later COMMENTED review does not revoke an approval).
STANDING = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})
#: Reviewers whose permission one judgement asks GitHub for, at most (change requests first);
#: the verdict of a PR with more waits for a human (an unknown reviewer's review never counts).
MAX_REVIEWERS_CHECKED = 20


@dataclass(frozen=True)
class PostStatus:
    """A commit status the gate posts."""

    sha: str
    state: str
    context: str
    description: str


@dataclass(frozen=True)
class GateDecision:
    """What the gate does with an open pull request, once judged."""

    pr_number: int
    head_sha: str
    base: str
    result: GateResult
    #: In order: ``squadron/merge`` on the head, then the merge group's statuses (if asked).
    statuses: tuple[PostStatus, ...]
    #: The conflict its dev agent resolves first (AD-005), told through events.fifo
    #: (:func:`conflict_envelope`): the PR is ``dirty`` and linked to an issue.
    conflict: ReportConflict | None
    #: This head was judged ready before: the base's rules are read for a merge queue (the App
    #: queues no other head; a first merge tries REST, whose 405 names the queue).
    reads_queue_rules: bool
    #: The flow's consent to merge (None: the verdict is not to merge).
    consent: MergeConsent | None
    #: The branch deleted after the merge (the flow says so, and it is this repository's).
    delete_branch: str | None


def not_gated(pr: Json, number: int) -> str | None:
    """Why pull request ``number`` (``pr``) is not judged (closed or merged), or None when it is open."""
    if pr.get("state") != "open" or pr.get("merged"):
        return f"PR #{number} is {pr.get('state')}; nothing to gate"
    return None


def head_sha(pr: Json) -> str:
    return str((pr.get("head") or {}).get("sha") or "")


def base_ref(pr: Json) -> str:
    return str((pr.get("base") or {}).get("ref") or "")


def changed_count(pr: Json) -> int | None:
    """GitHub's count of the PR's changed files, when it gives one."""
    count = pr.get("changed_files")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def reads_files(pr: Json, flows: ApprovalFlowsFile) -> bool:
    """Whether the judgement reads the changed files: only a flow that protects paths uses them
    (past the cap, every protected path applies unread)."""
    return reads_changed_files(flows, base_ref(pr), changed_count(pr))


def latest_reviews(reviews: Iterable[Json]) -> dict[str, str]:
    """Each reviewer's standing review state (GitHub lists reviews oldest first)."""
    latest: dict[str, str] = {}
    for review in reviews:
        login = str((review.get("user") or {}).get("login") or "")
        state = str(review.get("state") or "")
        if login and state in STANDING:
            latest[login] = state
    return latest


def bot_reviewers(reviews: Iterable[Json]) -> frozenset[str]:
    """Reviewers GitHub marks as bots (or whose login says so)."""
    return frozenset(
        str(user.get("login"))
        for review in reviews
        if (user := review.get("user") or {}).get("login")
        and is_bot_account(user.get("type"), str(user.get("login")))
    )


def reviewers_to_check(
    reviews: Mapping[str, str], *, author: str, bot_login: str, bots: frozenset[str]
) -> list[str]:
    """Whose permission a judgement needs: humans with a standing approval or change request.

    Change requests first (a missed one could let a PR merge), then by login; at most
    :data:`MAX_REVIEWERS_CHECKED`.
    """
    wanted = [
        login
        for login, state in reviews.items()
        if state in STANDING_VERDICTS
        and login not in bots
        and login.casefold() != author.casefold()
        and not is_app(login, bot_login)
    ]
    wanted.sort(key=lambda login: (reviews[login] != "CHANGES_REQUESTED", login))
    return wanted[:MAX_REVIEWERS_CHECKED]


def author_of(pr: Json) -> str:
    return str((pr.get("user") or {}).get("login") or "")


def permissions_wanted(pr: Json, listed: Sequence[Json], bot_login: str) -> list[str]:
    """The reviewers of ``pr`` (its listed reviews) whose repository permission the judgement asks."""
    return reviewers_to_check(
        latest_reviews(listed), author=author_of(pr), bot_login=bot_login, bots=bot_reviewers(listed)
    )


#: The prefix of the App's own verdict statuses (``squadron/<role>``, ``squadron/merge``).
APP_CONTEXT_PREFIX = "squadron/"
#: The App whose check runs a repository's GitHub Actions workflows report under.
ACTIONS_APP = "github-actions"


def is_fork(pr: Json) -> bool:
    """The pull request's head is another repository's (a fork's)."""
    head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
    base_repo = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
    return bool(head_repo and base_repo and head_repo != base_repo)


def untrusted_run(run: Json, *, fork: bool) -> str | None:
    """Why a check run may not speak for its name (None: it may). The App's verdicts are commit
    statuses, never check runs, so a check run named ``squadron/...`` is somebody else's; on a
    fork's pull request, a GitHub Actions job ran the fork author's own workflow file."""
    name = str(run.get("name") or "")
    app = str((run.get("app") or {}).get("slug") or "")
    if name.startswith(APP_CONTEXT_PREFIX):
        return f"a check run by {app or 'another source'}: only the App's own status carries a squadron/ name"
    if fork and app == ACTIONS_APP:
        return "a fork's GitHub Actions job: the fork's author wrote its workflow"
    return None


def check_outcomes(combined: Json, runs: Iterable[Json], *, fork: bool = False) -> dict[str, str]:
    """Status contexts and check-run names -> success/failure/pending/... (check runs win on a
    tie), leaving out the check runs that may not speak for their name (:func:`untrusted_run`)."""
    out = {
        str(s.get("context")): str(s.get("state")) for s in combined.get("statuses") or [] if s.get("context")
    }
    for run in runs:
        name = str(run.get("name") or "")
        if name and untrusted_run(run, fork=fork) is None:
            out[name] = str(run.get("conclusion") or run.get("status") or "pending")
    return out


def _branch_to_delete(pr: Json, repo: str, delete: bool) -> str | None:
    """The PR's head branch, if the flow deletes it and it is a branch of ``repo`` (not a fork's)."""
    head = pr.get("head") or {}
    same_repo = (head.get("repo") or {}).get("full_name") in (None, repo)
    return str(head["ref"]) if delete and same_repo and head.get("ref") else None


@dataclass(frozen=True)
class GateReads:
    """What the shell read of an open pull request for one judgement."""

    number: int
    pr: Json
    #: Its changed files (empty unless :func:`reads_files`).
    files: Sequence[str]
    #: Its reviews, as GitHub lists them (oldest first, at most :data:`MAX_LISTED`).
    reviews: Sequence[Json]
    #: The repository permission of each of :func:`permissions_wanted`.
    permissions: Mapping[str, str]
    #: Its head's combined status and check runs.
    combined: Json
    runs: Sequence[Json]


def judge(
    reads: GateReads,
    *,
    repo: str,
    flows: ApprovalFlowsFile,
    groups: Mapping[str, Iterable[str]],
    bot_login: str,
    author_role: str | None,
    issue_number: int | None = None,
    merge_group: str | None = None,
) -> GateDecision:
    """What the gate does with the open pull request ``reads`` tells of.

    ``merge_group``: the head sha of a merge group GitHub asks checks of for this PR (its Squadron
    statuses are posted there too). ``issue_number``: the issue the PR is linked to (a conflict is
    reported to its dev agent)."""
    pr = reads.pr
    number = reads.number
    sha, base, count = head_sha(pr), base_ref(pr), changed_count(pr)
    reviews, bots = latest_reviews(reads.reviews), bot_reviewers(reads.reviews)
    state = PullRequestState(
        number=number,
        head_sha=sha,
        author=author_of(pr),
        draft=bool(pr.get("draft")),
        mergeable_state=pr.get("mergeable_state"),
        author_role=author_role,
        checks=check_outcomes(reads.combined, reads.runs, fork=is_fork(pr)),
        reviews=reviews,
        permissions=reads.permissions,
        bots=bots,
        reviews_cut=len(reads.reviews) >= MAX_LISTED,
    )
    head_statuses = list(reads.combined.get("statuses") or [])
    result = evaluate(
        held_for_people(effective_flow(flows, base, reads.files, changed_count=count), author_role),
        state,
        groups,
        bot_login=bot_login,
    )
    statuses = [PostStatus(sha, result.status_state, MERGE_CONTEXT, result.description)]
    if merge_group:
        statuses += [
            PostStatus(merge_group, state_of, context, text)
            for context, state_of, text in group_statuses(
                head_statuses, verdict_state=result.status_state, verdict=result.description
            )
        ]
    conflict = (  # AD-005: the dev agent resolves its conflict first (the router decides who acts)
        ReportConflict(issue_number=issue_number, pr_number=number, head_sha=sha, base=base)
        if state.mergeable_state == "dirty" and issue_number is not None
        else None
    )
    was_ready = any(
        st.get("context") == MERGE_CONTEXT and st.get("state") == "success" for st in head_statuses
    )
    consent = (
        MergeConsent(number, True, "every requirement of the approval flow is met") if result.merge else None
    )
    return GateDecision(
        pr_number=number,
        head_sha=sha,
        base=base,
        result=result,
        statuses=tuple(statuses),
        conflict=conflict,
        reads_queue_rules=was_ready,
        consent=consent,
        delete_branch=_branch_to_delete(pr, repo, result.delete_branch) if consent is not None else None,
    )


def conflict_envelope(
    conflict: ReportConflict,
    pr: Json,
    *,
    repo: str,
    installation_id: int | None,
    cause: str,
    now: datetime,
) -> EventEnvelope:
    """The conflict report as a framework command for events.fifo (one per head and cause)."""
    return command_envelope(
        conflict,
        repository=(pr.get("base") or {}).get("repo") or {"full_name": repo},
        installation_id=installation_id,
        delivery_id=f"conflict-{conflict.pr_number}-{conflict.head_sha[:12]}-{cause or 'gate'}",
        now=now,
    )


def branch_after_queue_merge(
    pr: Json, files: Sequence[str], *, repo: str, flows: ApprovalFlowsFile, author_role: str | None
) -> str | None:
    """GitHub's merge queue merged ``pr``: the branch to delete, as after the gate's own merge."""
    flow = held_for_people(
        effective_flow(flows, base_ref(pr), files, changed_count=changed_count(pr)), author_role
    )
    return _branch_to_delete(pr, repo, flow.flow.merge_policy.delete_branch)


def merged_event(
    pr: Json, merged: Json, *, installation_id: int | None, bot_login: str, now: datetime
) -> EventEnvelope:
    """The pull_request.closed webhook GitHub sends for a merge, which the ingress drops for the App."""
    stamp = now.isoformat().replace("+00:00", "Z")
    closed = {
        **pr,
        "state": "closed",
        "merged": True,
        "merged_at": stamp,
        "closed_at": stamp,
        "updated_at": stamp,
    }
    base_repo = (pr.get("base") or {}).get("repo") or {}
    payload = {
        "action": "closed",
        "pull_request": closed,
        "repository": base_repo,
        "sender": {"login": bot_login, "id": 0, "type": "Bot"},
        "installation": {"id": installation_id} if installation_id else None,
    }
    envelope = build_envelope(
        event="pull_request",
        delivery_id=f"echo-merge-{base_repo.get('id')}-{pr['number']}-{str(merged.get('sha') or '')[:12]}",
        payload=payload,
        received_at=now,
    )
    return EventEnvelope.model_validate({**envelope.model_dump(), "origin": "squadron"})
