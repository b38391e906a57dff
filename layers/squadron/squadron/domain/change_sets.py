"""Change sets: one issue, pull requests in several repositories of one installation, merged in
dependency order or not at all — pure (docs/change-sets.md).

A :class:`ChangeSet` names its origin (the repository and issue it was proposed on), its members
(each repository, the branch its work goes on, its pull request once opened, that pull request's
own merge gate verdict, and the writer who approved the repository) and the dependencies between
members ("a needs b": b merges first). Its state moves only along :data:`ALLOWED`::

    proposed -> approved -> working -> ready -> merging -> merged
                                        ready -> working (a member's gate went back)
                                                 merging -> failed -> reverting -> reverted -> escalated
                                                            failed -> escalated (nothing had merged)
                                                                      reverting -> escalated (a revert closed unmerged)

Every transition here is a pure function returning the next set (its ``version`` one higher, which
the registry's conditional write checks: a stale writer loses, the state never goes backwards) or
raising :class:`ChangeSetRefusedError` with the reason. What happens on GitHub (branches, pull
requests, merges, reverts, comments) is the shell's; this module decides what should.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from squadron.errors import SquadronError

#: Repositories in one change set at most (docs/limits.md).
MAX_REPOSITORIES = 10
#: Change sets not yet over (merged, or escalated after a failure) per installation at most
#: (docs/limits.md): each holds agents and pull requests in several repositories.
MAX_OPEN_PER_INSTALLATION = 20
#: The one combined status check every pull request of a set carries.
CHECK_NAME = "squadron/change-set"
#: The permissions that let a person approve a repository's part of a set (GitHub's names).
WRITER_PERMISSIONS = frozenset({"admin", "maintain", "write"})
#: GitHub's longest status description.
CHECK_DESCRIPTION_LENGTH = 140

_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


class ChangeSetRefusedError(SquadronError):
    """A change set, or a step of one, that is refused: nothing changed (the reason says why)."""


class SetState(StrEnum):
    PROPOSED = "proposed"
    APPROVED = "approved"
    WORKING = "working"
    READY = "ready"
    MERGING = "merging"
    MERGED = "merged"
    FAILED = "failed"
    REVERTING = "reverting"
    REVERTED = "reverted"
    ESCALATED = "escalated"


#: state -> the states it may move to.
ALLOWED: Mapping[SetState, frozenset[SetState]] = {
    SetState.PROPOSED: frozenset({SetState.APPROVED}),
    SetState.APPROVED: frozenset({SetState.WORKING}),
    SetState.WORKING: frozenset({SetState.READY}),
    SetState.READY: frozenset({SetState.WORKING, SetState.MERGING}),
    SetState.MERGING: frozenset({SetState.MERGED, SetState.FAILED}),
    SetState.MERGED: frozenset(),
    SetState.FAILED: frozenset({SetState.REVERTING, SetState.ESCALATED}),
    SetState.REVERTING: frozenset({SetState.REVERTED, SetState.ESCALATED}),
    SetState.REVERTED: frozenset({SetState.ESCALATED}),
    SetState.ESCALATED: frozenset(),
}
#: States a set is over in (it no longer counts against :data:`MAX_OPEN_PER_INSTALLATION`).
OVER = frozenset({SetState.MERGED, SetState.ESCALATED})

#: A member's pull request's own merge gate verdict (None: not judged yet).
GateVerdict = Literal["ready", "waiting", "blocked"]


class Member(BaseModel):
    """One repository of a set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str = Field(min_length=3, max_length=140)
    repo_id: int = Field(ge=1)
    branch: str = Field(min_length=1, max_length=200)
    pr_number: int | None = Field(default=None, ge=1)
    gate: GateVerdict | None = None
    #: The head commit its gate judged (the merge is pinned to it; None: not recorded).
    head_sha: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    #: The writer of this repository who approved its part (None: not approved yet).
    approved_by: str | None = None
    merged: bool = False
    merge_commit_sha: str | None = None
    #: The revert pull request opened after a later merge failed, and whether it merged.
    revert_pr: int | None = Field(default=None, ge=1)
    reverted: bool = False


class ChangeSet(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^cs-[0-9a-f]{12}$")
    installation_id: int = Field(ge=1)
    origin_repository: str
    origin_repo_id: int = Field(ge=1)
    issue: int = Field(ge=1)
    #: Who proposed it (the PM agent's id, or a person's login).
    proposed_by: str = Field(min_length=1, max_length=100)
    members: tuple[Member, ...]
    #: (a, b): member ``a`` needs member ``b`` (``b`` merges first).
    dependencies: tuple[tuple[str, str], ...] = ()
    state: SetState = SetState.PROPOSED
    #: What went wrong (the failed merge), once it did.
    failure: str | None = None
    version: int = Field(default=1, ge=1)
    created_at: datetime
    updated_at: datetime

    def member(self, repository: str) -> Member:
        for member in self.members:
            if member.repository.lower() == repository.lower():
                return member
        raise ChangeSetRefusedError(f"{repository} is not in change set {self.id}")

    @property
    def over(self) -> bool:
        return self.state in OVER

    def waiting_for_approval(self) -> tuple[str, ...]:
        """The repositories no writer approved yet, in the set's order."""
        return tuple(m.repository for m in self.members if m.approved_by is None)


def change_set_id(installation_id: int, origin_repo_id: int, issue: int, proposal: str) -> str:
    """The set a proposal makes: the same proposal (its delivery) always names the same set."""
    text = f"change-set\x00{installation_id}\x00{origin_repo_id}\x00{issue}\x00{proposal}"
    return "cs-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def branch_for(set_id: str) -> str:
    """The branch every member's work goes on."""
    return f"change-set/{set_id}"


# --- proposing ---------------------------------------------------------------------------------


def find_cycle(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> tuple[str, ...] | None:
    """A dependency cycle among ``nodes`` (``a -> b -> ... -> a``, starting at the first node of
    it in ``nodes``' order), or None."""
    needs: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        needs.setdefault(a, []).append(b)
    for targets in needs.values():
        targets.sort(key=lambda n: nodes.index(n) if n in nodes else len(nodes))
    colour: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> tuple[str, ...] | None:
        colour[node] = 1
        path.append(node)
        for target in needs.get(node, ()):
            if colour.get(target) == 1:
                return (*path[path.index(target) :], target)
            if target not in colour and (found := visit(target)) is not None:
                return found
        path.pop()
        colour[node] = 2
        return None

    for node in nodes:
        if node not in colour and (found := visit(node)) is not None:
            return found
    return None


def merge_order(change_set: ChangeSet) -> tuple[str, ...]:
    """The members' repositories in dependency order (each after what it needs), ties kept in the
    set's own order (stable). Refused when the dependencies form a cycle."""
    names = [m.repository for m in change_set.members]
    return topological(names, change_set.dependencies)


def topological(names: Sequence[str], dependencies: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    edges = list(dependencies)
    cycle = find_cycle(names, edges)
    if cycle is not None:
        raise ChangeSetRefusedError("the dependencies form a cycle: " + " -> ".join(cycle))
    needs = {n: {b for a, b in edges if a == n} for n in names}
    order: list[str] = []
    while len(order) < len(names):
        order.append(next(n for n in names if n not in order and needs[n] <= set(order)))
    return tuple(order)


def propose(
    *,
    set_id: str,
    installation_id: int,
    origin: str,
    issue: int,
    repositories: Sequence[str],
    dependencies: Sequence[tuple[str, str]],
    installation_repositories: Mapping[str, int],
    proposed_by: str,
    open_sets: int,
    at: datetime,
) -> ChangeSet:
    """A new set in ``proposed``: the origin repository and ``repositories`` (the origin added
    first when not named), each on :func:`branch_for`.

    Refused (with the reason) when a name is malformed or named twice, a repository is not one of
    the installation's (``installation_repositories``: full name -> id, what the App's installation
    covers), there are more than :data:`MAX_REPOSITORIES`, a dependency names a repository outside
    the set or itself, the dependencies form a cycle (named), or the installation already has
    :data:`MAX_OPEN_PER_INSTALLATION` sets open.
    """
    by_lower = {name.lower(): (name, repo_id) for name, repo_id in installation_repositories.items()}
    if origin.lower() not in by_lower:
        raise ChangeSetRefusedError(f"{origin} is not a repository of installation {installation_id}")
    named = [origin, *repositories]
    seen: dict[str, str] = {}
    members: list[Member] = []
    branch = branch_for(set_id)
    for index, name in enumerate(named):
        if not _REPOSITORY.match(name):
            raise ChangeSetRefusedError(f"{name!r} is not a repository name (owner/name)")
        if name.lower() in seen:
            if index > 0 and name.lower() == origin.lower():
                continue  # the origin named again among the others
            raise ChangeSetRefusedError(f"{name} is named twice")
        found = by_lower.get(name.lower())
        if found is None:
            raise ChangeSetRefusedError(
                f"{name} is not a repository of installation {installation_id}: "
                "a change set spans only the repositories the App is installed on together"
            )
        seen[name.lower()] = found[0]
        members.append(Member(repository=found[0], repo_id=found[1], branch=branch))
    if len(members) > MAX_REPOSITORIES:
        raise ChangeSetRefusedError(
            f"{len(members)} repositories: a change set holds at most {MAX_REPOSITORIES}"
        )
    if len(members) < 2:
        raise ChangeSetRefusedError("a change set spans at least two repositories")
    edges: list[tuple[str, str]] = []
    for a, b in dependencies:
        for end in (a, b):
            if end.lower() not in seen:
                raise ChangeSetRefusedError(f"the dependency {a} -> {b} names {end}, which is not in the set")
        if a.lower() == b.lower():
            raise ChangeSetRefusedError(f"{a} cannot depend on itself")
        edge = (seen[a.lower()], seen[b.lower()])
        if edge not in edges:
            edges.append(edge)
    topological([m.repository for m in members], edges)  # refuses a cycle, naming it
    if open_sets >= MAX_OPEN_PER_INSTALLATION:
        raise ChangeSetRefusedError(
            f"installation {installation_id} has {open_sets} change sets open: at most "
            f"{MAX_OPEN_PER_INSTALLATION} (one must merge or be escalated first)"
        )
    return ChangeSet(
        id=set_id,
        installation_id=installation_id,
        origin_repository=seen[origin.lower()],
        origin_repo_id=by_lower[origin.lower()][1],
        issue=issue,
        proposed_by=proposed_by,
        members=tuple(members),
        dependencies=tuple(edges),
        created_at=at,
        updated_at=at,
    )


# --- approving ---------------------------------------------------------------------------------


def approve(
    change_set: ChangeSet, by: str, permissions: Mapping[str, str | None], at: datetime
) -> tuple[ChangeSet, tuple[str, ...]]:
    """Record ``by``'s approval of every member repository not approved yet that ``by`` can write
    (``permissions``: repository -> their permission on it as GitHub said, None when GitHub would
    not say: the App cannot see it); the set and the repositories approved now.

    The set becomes ``approved`` once every repository has its writer's approval. Refused when the
    set is past proposing, or when ``by`` can write none of the repositories still waiting (a
    stranger's or a reader's approval changes nothing).
    """
    if change_set.state is not SetState.PROPOSED:
        raise ChangeSetRefusedError(f"change set {change_set.id} is {change_set.state}: nothing to approve")
    approved: list[str] = []
    members: list[Member] = []
    for member in change_set.members:
        if member.approved_by is None and permissions.get(member.repository) in WRITER_PERMISSIONS:
            approved.append(member.repository)
            members.append(member.model_copy(update={"approved_by": by}))
        else:
            members.append(member)
    if not approved:
        waiting = ", ".join(change_set.waiting_for_approval())
        raise ChangeSetRefusedError(
            f"{by} cannot write any repository still waiting for approval ({waiting})"
        )
    state = SetState.APPROVED if all(m.approved_by for m in members) else SetState.PROPOSED
    return _next(change_set, at, members=tuple(members), state=state), tuple(approved)


# --- working, the one check --------------------------------------------------------------------


def start_work(change_set: ChangeSet, at: datetime) -> ChangeSet:
    """``approved`` -> ``working``: every repository had its writer's say."""
    _check(change_set, SetState.WORKING)
    if change_set.waiting_for_approval():
        raise ChangeSetRefusedError(
            "not every repository is approved: " + ", ".join(change_set.waiting_for_approval())
        )
    return _next(change_set, at, state=SetState.WORKING)


def record_pull_request(change_set: ChangeSet, repository: str, pr_number: int, at: datetime) -> ChangeSet:
    """A member's pull request was opened (on its branch)."""
    if change_set.state not in (SetState.WORKING, SetState.READY):
        raise ChangeSetRefusedError(
            f"change set {change_set.id} is {change_set.state}: it opens no pull request"
        )
    member = change_set.member(repository)
    if member.pr_number is not None and member.pr_number != pr_number:
        raise ChangeSetRefusedError(f"{repository} has pull request #{member.pr_number} in the set already")
    return _with_member(change_set, member.model_copy(update={"pr_number": pr_number}), at)


def drop_pull_request(change_set: ChangeSet, repository: str, pr_number: int, at: datetime) -> ChangeSet:
    """A member's pull request was closed without merging (a person's say): it is no longer the
    member's (its gate's verdict goes with it), so the set is not ready (back to ``working``)
    until a pull request from the set's branch is recorded again (reopened, or a new one)."""
    if change_set.state not in (SetState.WORKING, SetState.READY):
        raise ChangeSetRefusedError(f"change set {change_set.id} is {change_set.state}: its members stay")
    member = change_set.member(repository)
    if member.pr_number != pr_number:
        raise ChangeSetRefusedError(f"#{pr_number} is not {repository}'s pull request in the set")
    dropped = member.model_copy(update={"pr_number": None, "gate": None, "head_sha": None})
    updated = _with_member(change_set, dropped, at)
    return updated.model_copy(update={"state": SetState.WORKING})


def record_gate(
    change_set: ChangeSet, repository: str, verdict: GateVerdict, at: datetime, *, head_sha: str | None = None
) -> ChangeSet:
    """A member's pull request's own gate said ``verdict`` (of its head ``head_sha``): the set is
    ``ready`` when every member's says ready, and back to ``working`` when one stops saying it
    before merging starts."""
    if change_set.state not in (SetState.WORKING, SetState.READY):
        raise ChangeSetRefusedError(
            f"change set {change_set.id} is {change_set.state}: its gates no longer count"
        )
    member = change_set.member(repository)
    if member.pr_number is None:
        raise ChangeSetRefusedError(f"{repository} has no pull request in the set yet")
    judged = {"gate": verdict} if head_sha is None else {"gate": verdict, "head_sha": head_sha}
    updated = _with_member(change_set, member.model_copy(update=judged), at)
    every = all(m.gate == "ready" for m in updated.members)
    if every and updated.state is SetState.WORKING:
        return updated.model_copy(update={"state": SetState.READY})
    if not every and updated.state is SetState.READY:
        return updated.model_copy(update={"state": SetState.WORKING})
    return updated


class CombinedCheck(BaseModel):
    """The :data:`CHECK_NAME` status every member's pull request carries (GitHub's commit status)."""

    model_config = ConfigDict(frozen=True)

    state: Literal["pending", "success", "failure"]
    description: str = Field(max_length=CHECK_DESCRIPTION_LENGTH)
    context: str = CHECK_NAME


def combined_check(change_set: ChangeSet) -> CombinedCheck:
    """Success only when every member's pull request passes its own gate (or the set merged);
    failure once the set failed; else pending, saying what it waits for."""
    if change_set.state is SetState.MERGED:
        return CombinedCheck(state="success", description="every pull request of the set merged")
    if change_set.state in (SetState.FAILED, SetState.REVERTING, SetState.REVERTED, SetState.ESCALATED):
        return CombinedCheck(
            state="failure", description=_short(f"the set failed: {change_set.failure or 'see the issue'}")
        )
    waiting = [m.repository for m in change_set.members if m.pr_number is None or m.gate != "ready"]
    if not waiting and change_set.state in (SetState.READY, SetState.MERGING):
        return CombinedCheck(
            state="success", description=f"all {len(change_set.members)} pull requests pass their gates"
        )
    if not waiting:
        return CombinedCheck(state="pending", description=f"the set is {change_set.state}")
    blocked = [m.repository for m in change_set.members if m.gate == "blocked"]
    said = f"blocked: {', '.join(blocked)}" if blocked else f"waiting for {', '.join(waiting)}"
    return CombinedCheck(
        state="pending",
        description=_short(f"{len(waiting)} of {len(change_set.members)} not passing; {said}"),
    )


def _short(text: str) -> str:
    return text if len(text) <= CHECK_DESCRIPTION_LENGTH else text[: CHECK_DESCRIPTION_LENGTH - 1] + "…"


# --- merging, all or nothing -------------------------------------------------------------------


def begin_merging(change_set: ChangeSet, at: datetime) -> ChangeSet:
    """``ready`` -> ``merging``, only when the combined check passes."""
    _check(change_set, SetState.MERGING)
    if combined_check(change_set).state != "success":
        raise ChangeSetRefusedError(
            f"change set {change_set.id} is not ready: {combined_check(change_set).description}"
        )
    return _next(change_set, at, state=SetState.MERGING)


def next_merge(change_set: ChangeSet) -> str | None:
    """The repository whose pull request merges next (None: all merged, or not merging)."""
    if change_set.state is not SetState.MERGING:
        return None
    merged = {m.repository for m in change_set.members if m.merged}
    return next((name for name in merge_order(change_set) if name not in merged), None)


def record_merged(change_set: ChangeSet, repository: str, sha: str | None, at: datetime) -> ChangeSet:
    """The next member in order merged; the set is ``merged`` with its last one. A merge out of
    order is refused (the shell merges only :func:`next_merge`)."""
    expected = next_merge(change_set)
    if expected is None or expected.lower() != repository.lower():
        raise ChangeSetRefusedError(
            f"{repository} is not the next to merge in change set {change_set.id} (next: {expected or 'none'})"
        )
    member = change_set.member(repository).model_copy(update={"merged": True, "merge_commit_sha": sha})
    updated = _with_member(change_set, member, at)
    if all(m.merged for m in updated.members):
        return updated.model_copy(update={"state": SetState.MERGED})
    return updated


class FailurePlan(BaseModel):
    """What follows a failed merge: stop, revert what merged (newest first), tell a person."""

    model_config = ConfigDict(frozen=True)

    failed: str
    reason: str
    #: The merged repositories whose merges are reverted, in this order (reverse merge order).
    reverts: tuple[str, ...]
    #: The repositories never merged (their pull requests stay open, their work stops).
    stopped: tuple[str, ...]
    #: What the escalation on the origin issue says.
    escalation: str


def record_merge_failed(
    change_set: ChangeSet, repository: str, reason: str, at: datetime
) -> tuple[ChangeSet, FailurePlan]:
    """The next member's merge failed (a conflict, branch protection, a check gone red): the set
    is ``failed`` and the plan says what follows."""
    expected = next_merge(change_set)
    if expected is None or expected.lower() != repository.lower():
        raise ChangeSetRefusedError(
            f"{repository} is not the merge in progress in change set {change_set.id} (next: {expected or 'none'})"
        )
    order = merge_order(change_set)
    merged = [name for name in order if change_set.member(name).merged]
    reverts = tuple(reversed(merged))
    stopped = tuple(name for name in order if not change_set.member(name).merged)
    lines = [
        f"Change set {change_set.id} stopped: merging {expected} failed ({reason}).",
        (
            "Merged before it, to be reverted by revert pull requests (gated like any other), in this order: "
            + ", ".join(reverts)
            if reverts
            else "Nothing had merged: no repository is left half-changed."
        ),
        "Not merged: " + ", ".join(stopped) + ".",
    ]
    plan = FailurePlan(
        failed=expected, reason=reason, reverts=reverts, stopped=stopped, escalation="\n".join(lines)
    )
    return _next(change_set, at, state=SetState.FAILED, failure=f"merging {expected} failed: {reason}"), plan


def start_reverting(change_set: ChangeSet, reverts: Mapping[str, int], at: datetime) -> ChangeSet:
    """``failed`` -> ``reverting``: the revert pull requests opened (repository -> number), one for
    every merged member."""
    _check(change_set, SetState.REVERTING)
    merged = {m.repository for m in change_set.members if m.merged}
    named = {change_set.member(name).repository for name in reverts}
    if named != merged:
        raise ChangeSetRefusedError(
            "a revert pull request is needed for exactly the merged repositories: "
            + (", ".join(sorted(merged)) or "none")
        )
    members = tuple(
        m.model_copy(update={"revert_pr": reverts[m.repository]}) if m.repository in reverts else m
        for m in change_set.members
    )
    return _next(change_set, at, members=members, state=SetState.REVERTING)


def record_reverted(change_set: ChangeSet, repository: str, at: datetime) -> ChangeSet:
    """A revert pull request merged; ``reverted`` with the last."""
    if change_set.state is not SetState.REVERTING:
        raise ChangeSetRefusedError(f"change set {change_set.id} is {change_set.state}: it reverts nothing")
    member = change_set.member(repository)
    if member.revert_pr is None:
        raise ChangeSetRefusedError(f"{repository} has no revert pull request in the set")
    updated = _with_member(change_set, member.model_copy(update={"reverted": True}), at)
    if all(m.reverted for m in updated.members if m.revert_pr is not None):
        return updated.model_copy(update={"state": SetState.REVERTED})
    return updated


def record_reverts_closed(change_set: ChangeSet, repositories: Sequence[str], at: datetime) -> ChangeSet:
    """Revert pull requests closed without merging (a person's say): ``reverting`` ->
    ``escalated``, the failure naming them; what they would have undone stays merged, a person
    decides (the shell tells them first)."""
    if change_set.state is not SetState.REVERTING:
        raise ChangeSetRefusedError(f"change set {change_set.id} is {change_set.state}: it reverts nothing")
    named = [change_set.member(name) for name in repositories]
    if not named or any(m.revert_pr is None or m.reverted for m in named):
        raise ChangeSetRefusedError("only an open revert pull request of the set can be closed unmerged")
    closed = ", ".join(f"{m.repository}#{m.revert_pr}" for m in named)
    failure = f"{change_set.failure or 'a merge failed'}; its revert {closed} was closed without merging"
    return _next(change_set, at, state=SetState.ESCALATED, failure=failure)


def escalate(change_set: ChangeSet, at: datetime) -> ChangeSet:
    """The person was told (``failed`` with nothing merged, or ``reverted``): the set is over."""
    _check(change_set, SetState.ESCALATED)
    if change_set.state is SetState.FAILED and any(m.merged for m in change_set.members):
        raise ChangeSetRefusedError(
            f"change set {change_set.id} merged part of itself: its reverts are opened before it is over"
        )
    return _next(change_set, at, state=SetState.ESCALATED)


# --- plumbing ----------------------------------------------------------------------------------


def _check(change_set: ChangeSet, target: SetState) -> None:
    if target not in ALLOWED[change_set.state]:
        raise ChangeSetRefusedError(
            f"change set {change_set.id} is {change_set.state}: it cannot become {target}"
        )


def _next(change_set: ChangeSet, at: datetime, **changes: object) -> ChangeSet:
    return change_set.model_copy(update={**changes, "version": change_set.version + 1, "updated_at": at})


def _with_member(change_set: ChangeSet, member: Member, at: datetime) -> ChangeSet:
    members = tuple(member if m.repository == member.repository else m for m in change_set.members)
    return _next(change_set, at, members=members)
