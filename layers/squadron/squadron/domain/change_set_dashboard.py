"""The "Change sets" section of a repository's dashboard issue — pure (docs/change-sets.md).

Each change set that includes the repository: its id and state, its origin issue, each member
with its pull request and gate, and what the set waits for. A set's other repositories are named
by their full names and their pull requests as ``owner/repo#n`` in code spans (GitHub neither
links nor cross-references them), so a dashboard says nothing another repository's issue list
does not: the set was approved in each repository it names.
"""

from __future__ import annotations

from collections.abc import Sequence

from squadron.domain.change_sets import ChangeSet, Member, SetState

#: States a set is over in: shown only while recent (the listing is newest first).
_OVER = frozenset({SetState.MERGED, SetState.REVERTED})
#: The most sets one dashboard shows.
MAX_SETS = 10


def includes(change_set: ChangeSet, repository: str) -> bool:
    return any(m.repository == repository for m in change_set.members)


def _member(m: Member, here: str) -> str:
    pr = f"#{m.pr_number}" if m.pr_number else "no PR yet"
    if m.repository != here and m.pr_number:
        pr = f"{m.repository}#{m.pr_number}"
    facts = [f"`{m.repository}` `{pr}`", f"gate {m.gate}" if m.gate else "gate not judged"]
    if m.merged:
        facts.append("merged")
    if m.revert_pr:
        facts.append(f"revert `#{m.revert_pr}`" + (" merged" if m.reverted else ""))
    return " ".join(facts)


def waits_for(change_set: ChangeSet) -> str:
    """What the set waits for, in a few words."""
    state = change_set.state
    if state in _OVER:
        return "nothing (over)"
    if state in (SetState.FAILED, SetState.ESCALATED):
        return "a person (escalated on the origin issue)"
    unapproved = [m.repository for m in change_set.members if m.approved_by is None]
    if unapproved:
        return "a writer's approval in " + ", ".join(f"`{r}`" for r in unapproved)
    no_pr = [m.repository for m in change_set.members if m.pr_number is None]
    if no_pr:
        return "the pull request of " + ", ".join(f"`{r}`" for r in no_pr)
    not_ready = [m.repository for m in change_set.members if m.gate != "ready" and not m.merged]
    if not_ready:
        return "the gate of " + ", ".join(f"`{r}`" for r in not_ready)
    if state == SetState.REVERTING:
        return "its revert pull requests"
    unmerged = [m.repository for m in change_set.members if not m.merged]
    return "merging " + ", ".join(f"`{r}`" for r in unmerged) if unmerged else "nothing"


def change_sets_section(repository: str, change_sets: Sequence[ChangeSet]) -> list[str]:
    """The section's lines (none when no set includes ``repository``)."""
    shown = [s for s in change_sets if includes(s, repository)][:MAX_SETS]
    if not shown:
        return []
    lines = [
        "### Change sets",
        "",
        "| Set | State | Origin | Members (PR, gate) | Waits for |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in shown:
        origin = f"#{s.issue}" if s.origin_repository == repository else f"{s.origin_repository}#{s.issue}"
        members = "<br>".join(_member(m, repository) for m in s.members)
        lines.append(f"| `{s.id}` | {s.state} | `{origin}` | {members} | {waits_for(s)} |")
    return [*lines, "", "Details: `squadron change-sets show <set>`.", ""]
