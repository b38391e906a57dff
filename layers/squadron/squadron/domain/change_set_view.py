"""What `squadron change-sets list|show` prints of change sets — pure (docs/change-sets.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError, combined_check, merge_order


def change_set_row(change_set: ChangeSet) -> dict[str, Any]:
    """One set as ``--json`` prints it: the set whole, its merge order and combined check."""
    try:
        order: list[str] | None = list(merge_order(change_set))
    except ChangeSetRefusedError:  # never stored so; said rather than raised
        order = None
    check = combined_check(change_set)
    return {
        **change_set.model_dump(mode="json"),
        "merge_order": order,
        "check": {"context": check.context, "state": check.state, "description": check.description},
    }


def change_sets_table(change_sets: Sequence[ChangeSet]) -> str:
    if not change_sets:
        return "no change sets\n"
    rows = [("SET", "STATE", "ORIGIN", "REPOSITORIES", "APPROVED", "CREATED")]
    for found in change_sets:
        approved = sum(m.approved_by is not None for m in found.members)
        rows.append(
            (
                found.id,
                str(found.state),
                f"{found.origin_repository}#{found.issue}",
                str(len(found.members)),
                f"{approved}/{len(found.members)}",
                found.created_at.strftime("%Y-%m-%d %H:%M"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows
    )


def change_set_detail(change_set: ChangeSet) -> str:
    check = combined_check(change_set)
    row = change_set_row(change_set)
    lines = [
        f"change set {change_set.id}: {change_set.state} (version {change_set.version})",
        f"  origin: {change_set.origin_repository}#{change_set.issue} (installation {change_set.installation_id}), "
        f"proposed by {change_set.proposed_by}",
        f"  check {check.context}: {check.state}: {check.description}",
        "  merge order: " + (" -> ".join(row["merge_order"]) if row["merge_order"] else "(a cycle)"),
    ]
    if change_set.failure:
        lines.append(f"  failure: {change_set.failure}")
    lines.append("  repositories:")
    for m in change_set.members:
        needs = [b for a, b in change_set.dependencies if a == m.repository]
        facts = [
            f"branch {m.branch}",
            f"approved by {m.approved_by}" if m.approved_by else "waiting for a writer's approval",
            f"PR #{m.pr_number}" if m.pr_number else "no PR yet",
            f"gate {m.gate}" if m.gate else "",
            "merged" if m.merged else "",
            f"revert PR #{m.revert_pr}" + (" merged" if m.reverted else "") if m.revert_pr else "",
            f"needs {', '.join(needs)}" if needs else "",
        ]
        lines.append(f"    {m.repository}: " + "; ".join(f for f in facts if f))
    return "\n".join(lines) + "\n"
