"""Working a change set in its repositories — pure (docs/change-sets.md, "Working a set").

:mod:`squadron.domain.change_sets` decides the set's states; this module decides what working one
writes and whom it believes:

- the member issue the App opens in each repository but the origin (:func:`member_issue_title`,
  :func:`member_issue_body`), keyed by the set and the repository (:func:`member_issue_key`) and
  marked :func:`member_marker` so the router puts its dev agent on the set's branch
  (:func:`set_branch_of_issue`: only a marker the framework wrote counts);
- which pull request is a member's (:func:`member_pull_request`: the App's own, from the set's
  branch of that repository, never a fork's or a person's);
- the ``squadron/change-set`` status with the set's version in its words
  (:func:`versioned_check`, :func:`posted_version`), so an older verdict never replaces a newer one;
- what a member's own ``squadron/merge`` says while the set decides (:func:`held_merge_status`);
- the App's word to the other members when one pushes (:func:`pushed_notice`, keyed by the sha).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from squadron.domain.app_acts import is_app
from squadron.domain.change_sets import (
    CHECK_DESCRIPTION_LENGTH,
    CHECK_NAME,
    ChangeSet,
    ChangeSetRefusedError,
    CombinedCheck,
    branch_for,
    combined_check,
    merge_order,
)

#: The hidden line that makes an issue the App opened a member issue of a set.
MEMBER_MARKER = "<!-- squadron:change-set {set_id} -->"
_MEMBER = re.compile(r"<!-- squadron:change-set (cs-[0-9a-f]{12}) -->")
#: The set's branch name, and the set it names.
_BRANCH = re.compile(r"^change-set/(cs-[0-9a-f]{12})$")
#: How ``squadron/merge`` reads on a member whose own gate is ready while the set is not.
WAITS_FOR_SET = "ready; waits for change set"
#: And once the whole set is ready: the set merges it, in order (the gate never does).
SET_MERGES = "ready; the change set merges it in order"
_VERSION = re.compile(r"\(v(\d+)\)$")


def member_marker(set_id: str) -> str:
    return MEMBER_MARKER.format(set_id=set_id)


def marked_set(body: str) -> str | None:
    """The set a body's member marker names (None: it carries none)."""
    found = _MEMBER.search(body)
    return found.group(1) if found else None


def set_of_branch(branch: str) -> str | None:
    """The set whose branch ``branch`` is (``change-set/<id>``), or None."""
    found = _BRANCH.match(branch)
    return found.group(1) if found else None


def set_branch_of_issue(body: str, *, framework: bool, author: str | None, bot_login: str) -> str | None:
    """The branch a dev agent of this issue works on when the issue is a member issue of a set.

    Only the framework's marker counts: in a framework command's issue (the framework wrote its
    fields), or in the body of an issue the App opened as GitHub shows it (the App escapes every
    ``<!--`` an agent writes, :func:`squadron.domain.markers.inert`). A person's issue carrying
    the same words, or an agent's report, chooses nothing."""
    trusted = framework or (author is not None and is_app(author, bot_login))
    set_id = marked_set(body) if trusted else None
    return branch_for(set_id) if set_id is not None else None


def member_issue_key(set_id: str, repository: str) -> str:
    """The key of the member issue of ``repository`` (the same on every attempt)."""
    text = f"change-set-member\x00{set_id}\x00{repository.lower()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def pushed_key(set_id: str, repository: str, sha: str, to: str) -> str:
    """The key of the App's word to ``to`` that ``repository`` pushed ``sha``."""
    text = f"change-set-pushed\x00{set_id}\x00{repository.lower()}\x00{sha}\x00{to.lower()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def started_key(set_id: str) -> str:
    """The key of the App's word on the origin issue that the set's work started."""
    return hashlib.sha256(f"change-set-started\x00{set_id}".encode()).hexdigest()[:24]


def _plan(change_set: ChangeSet) -> list[str]:
    order = merge_order(change_set)
    lines = [
        f"- Repositories, merged in this order: {', '.join(f'`{name}`' for name in order)}.",
    ]
    lines += [f"- `{a}` needs `{b}` (`{b}` merges first)." for a, b in change_set.dependencies]
    lines += [
        f"- Every repository works on the branch `{branch_for(change_set.id)}` and opens one pull "
        "request from it into its default branch.",
        f"- Every pull request of the set carries the status `{CHECK_NAME}`: it passes only when "
        "every pull request passes its own merge gate. Squadron then merges them in the order above; "
        "no pull request of the set is merged on its own.",
        "- Each repository's agents work under that repository's own roles, configuration and "
        "containment: the set gives no agent any right to another repository.",
    ]
    return lines


def member_issue_title(change_set: ChangeSet, repository: str) -> str:
    return f"Change set {change_set.id}: {repository}'s part of {change_set.origin_repository}#{change_set.issue}"


def member_issue_body(change_set: ChangeSet, repository: str) -> str:
    """The member issue of ``repository``: the framework's words only (no text of the origin
    issue, whose author may be anyone), ending with the member marker."""
    if repository.lower() == change_set.origin_repository.lower():
        raise ChangeSetRefusedError(f"{repository} works on the origin issue itself")
    member = change_set.member(repository)
    origin = f"https://github.com/{change_set.origin_repository}/issues/{change_set.issue}"
    lines = [
        f"This issue is `{member.repository}`'s part of change set `{change_set.id}`, proposed on "
        f"{change_set.origin_repository}#{change_set.issue} ({origin}) and approved by a writer of "
        f"every repository of the set (here: @{member.approved_by}).",
        "",
        "The change is described on the origin issue. What this repository must do is for a writer "
        "of it to say here when the origin issue cannot be read from this repository.",
        "",
        f"**Work on the branch `{member.branch}`** and open your pull request from it.",
        "",
        "The plan:",
        *_plan(change_set),
        "",
        member_marker(change_set.id),
    ]
    return "\n".join(lines)


def started_notice(change_set: ChangeSet, issues: Mapping[str, int]) -> str:
    """The App's word on the origin issue once the set's work started: its branch and where each
    repository works (``issues``: repository -> its member issue)."""
    where = [
        f"- `{name}`: " + ("this issue" if name == change_set.origin_repository else f"{name}#{issues[name]}")
        for name in (m.repository for m in change_set.members)
        if name == change_set.origin_repository or name in issues
    ]
    return "\n".join(
        [
            f"Change set `{change_set.id}` is approved in every repository: its work starts on the "
            f"branch `{branch_for(change_set.id)}` in each of them.",
            "",
            *where,
            "",
            "The plan:",
            *_plan(change_set),
        ]
    )


def pushed_notice(change_set: ChangeSet, repository: str, branch: str, sha: str, pr_number: int) -> str:
    """The App's word to the other members that ``repository`` pushed ``sha`` (no one's text)."""
    return (
        f"Change set `{change_set.id}`: `{repository}` pushed `{branch}` at `{sha}` (its pull request "
        f"#{pr_number} there). Build against it if your part depends on it; your own pull request "
        "merges only together with the whole set."
    )


def member_pull_request(
    change_set: ChangeSet,
    repository: str,
    *,
    author: str | None,
    head_ref: str,
    head_repo: str | None,
    bot_login: str,
) -> bool:
    """Whether a pull request of ``repository`` is its member's: the App opened it (its agent),
    from the set's branch of that very repository (not a fork's branch of the same name)."""
    member = next((m for m in change_set.members if m.repository.lower() == repository.lower()), None)
    return (
        member is not None
        and head_ref == member.branch
        and author is not None
        and is_app(author, bot_login)
        and head_repo is not None
        and head_repo.lower() == repository.lower()
    )


def versioned_check(change_set: ChangeSet) -> CombinedCheck:
    """:func:`combined_check` with the set's version at the end of its words: ``(v7)``."""
    check = combined_check(change_set)
    suffix = f" (v{change_set.version})"
    room = CHECK_DESCRIPTION_LENGTH - len(suffix)
    text = check.description if len(check.description) <= room else check.description[: room - 1] + "…"
    return check.model_copy(update={"description": text + suffix})


def posted_version(statuses: Any) -> int | None:
    """The version of the newest ``squadron/change-set`` status among a combined status's
    ``statuses`` (GitHub lists the latest per context), or None."""
    for status in statuses or ():
        if isinstance(status, Mapping) and status.get("context") == CHECK_NAME:
            found = _VERSION.search(str(status.get("description") or ""))
            return int(found.group(1)) if found else 0
    return None


def status_of(statuses: Any, context: str) -> tuple[str, str] | None:
    """(state, description) of ``context`` among a combined status's ``statuses``, or None."""
    for status in statuses or ():
        if isinstance(status, Mapping) and status.get("context") == context:
            return str(status.get("state") or ""), str(status.get("description") or "")
    return None


def held_merge_status(change_set: ChangeSet, own_state: str) -> tuple[str, str] | None:
    """What a member's ``squadron/merge`` says when its own verdict is ``own_state`` (the gate's
    status state): None (its own words stand) unless it is ready, then pending while the set's
    check does not pass, and success saying the set merges it once it does."""
    if own_state != "success":
        return None
    check = combined_check(change_set)
    if check.state == "success":
        return "success", SET_MERGES
    text = f"{WAITS_FOR_SET} {change_set.id}: {check.description}"
    return "pending", text if len(text) <= CHECK_DESCRIPTION_LENGTH else text[
        : CHECK_DESCRIPTION_LENGTH - 1
    ] + "…"
