"""The change-set command people write on GitHub, and what the App answers — pure
(docs/change-sets.md).

``/squadron change-set approve cs-0123456789ab``, alone on a line of a new comment on the set's
origin issue, is a command, not a message: the router carries it to the change-set desk
(:class:`~squadron.domain.effects.ApproveChangeSet`, carried out from the outbox), and it never
reaches an agent (no inbox item, no wake, never quoted to a model), whoever wrote it. Who may
approve which repository is asked of GitHub for each repository of the set when the command is
carried out (:mod:`squadron.shell.change_sets`); the router's one authority rule
(:mod:`squadron.domain.authority`) judges the origin repository only, so it is not what lets a
command through. It only says whether a refusal is answered: a person who cannot write the
issue's repository gets no answer to a refused command (as every stranger's input gets none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from squadron.domain.app_acts import is_app
from squadron.domain.authority import WRITE_PERMISSIONS
from squadron.domain.change_sets import ChangeSet, SetState, merge_order
from squadron.domain.effects import ApproveChangeSet, Discard, Effect
from squadron.domain.events import EventEnvelope

#: ``/squadron change-set approve cs-0123456789ab`` (alone on a line of a comment).
COMMAND = re.compile(r"^\s*/squadron\s+change-set\s+approve\s+(?P<id>cs-[0-9a-f]{12})\s*$", re.MULTILINE)


def approval_command(body: str) -> str | None:
    """The set a comment approves (the first command in it), or None."""
    found = COMMAND.search(body)
    return found.group("id") if found else None


def is_change_set_command(event: EventEnvelope) -> bool:
    """Whether ``event`` is a comment holding a change-set command: a command only, never a
    message nor a person's comment answering a pipeline's human stage."""
    comment = event.comment
    return (
        event.event == "issue_comment" and comment is not None and approval_command(comment.body) is not None
    )


def command_text(set_id: str) -> str:
    """The exact command that approves ``set_id``."""
    return f"/squadron change-set approve {set_id}"


def change_set_command(
    event: EventEnvelope, *, bot_login: str, permissions: Mapping[str, str]
) -> list[Effect] | None:
    """What the router does with a comment holding a change-set command (None: ``event`` holds
    none, it is routed as usual). ``permissions``: what GitHub said the comment's author may do
    on the issue's repository (the snapshot's)."""
    if (event.event, event.action) not in {("issue_comment", "created"), ("issue_comment", "edited")}:
        return None
    comment = event.comment
    set_id = approval_command(comment.body) if comment is not None else None
    if comment is None or set_id is None:
        return None
    login = comment.author.login
    if event.origin != "github":
        return [Discard(f"change set {set_id}: only a comment on GitHub is a command")]
    if event.action == "edited":
        return [Discard(f"change set {set_id}: a command is read from a new comment, never from an edit")]
    if is_app(login, bot_login) or comment.author.type == "Bot":
        return [Discard(f"change set {set_id}: {login} is a bot; only a person approves")]
    if event.installation_id is None or event.issue is None:
        return [Discard(f"change set {set_id}: the comment names no installation or issue")]
    return [
        ApproveChangeSet(
            repo_id=event.repository.id,
            repo_full_name=event.repository.full_name,
            installation_id=event.installation_id,
            number=event.issue.number,
            set_id=set_id,
            login=login,
            delivery=event.delivery_id,
            answer_refusal=permissions.get(login) in WRITE_PERMISSIONS,
        )
    ]


def _names(repositories: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"`{name}`" for name in repositories)


def approved_answer(change_set: ChangeSet, login: str) -> str:
    """The App's answer to ``login``'s command that counted: what they approved, and what still
    waits for which repository's writer (or that the set is approved, and its merge order)."""
    mine = [m.repository for m in change_set.members if m.approved_by == login]
    lines = [f"Change set `{change_set.id}`: @{login} approved {_names(mine)}."]
    waiting = change_set.waiting_for_approval()
    if waiting:
        lines.append(
            f"Still waiting for the approval of a writer of each of {_names(waiting)}: such a writer "
            f"comments `{command_text(change_set.id)}` on this issue."
        )
    elif change_set.state is SetState.APPROVED:
        order = " -> ".join(f"`{name}`" for name in merge_order(change_set))
        lines.append(f"Every repository is approved; the set is `approved`. Merge order: {order}.")
    return "\n\n".join(lines)


def refused_answer(set_id: str, login: str, reason: str) -> str:
    """The App's answer to a writer's command that changed nothing: the precise reason."""
    return f"Change set `{set_id}`: @{login}'s approval changed nothing: {reason}."


def proposal_answer(change_set: ChangeSet, plan: str) -> str:
    """The App's comment on the origin issue naming a proposed set: its repositories, the merge
    order, where its plan is kept and the exact command that approves it."""
    order = " -> ".join(f"`{name}`" for name in merge_order(change_set))
    needs = [f"- `{a}` needs `{b}`" for a, b in change_set.dependencies]
    lines = [
        f"Change set `{change_set.id}` is proposed by {change_set.proposed_by}: one change across "
        f"{_names([m.repository for m in change_set.members])}, on branch "
        f"`{change_set.members[0].branch}` in each.",
        *(["Dependencies:", *needs] if needs else []),
        f"Merge order (all or nothing): {order}.",
        f"The plan is kept as the artifact {plan}.",
        "Nothing starts before a writer of each repository approves it: a writer comments, alone on a line,",
        f"\n```text\n{command_text(change_set.id)}\n```\n",
        "on this issue; it approves every repository of the set that the writer can write.",
    ]
    return "\n".join(lines)
