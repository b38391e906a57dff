"""A change-set command from the outbox: ``/squadron change-set approve <id>`` carried to the desk
and answered on the origin issue once (docs/change-sets.md).

The router decided the command (:func:`squadron.domain.change_set_commands.change_set_command`)
and committed it as an :class:`~squadron.domain.effects.ApproveChangeSet`; the outbox hands it
here under the effect's key. :meth:`ChangeSetCommands.approve` asks the desk
(:class:`~squadron.shell.change_sets.ChangeSetDesk`: GitHub says what the commenter may write in
each repository, the step is stored with its events on the version it read), calls
:attr:`ChangeSetCommands.on_approved` when the approval made the set ``approved``, and answers on
the issue under the effect's key.

A retry after a crash (the approval stored, its answer not posted) finds the commenter already
among the set's approvers: it is answered as the first attempt would have been, and the answer
posted once (it is looked up by its key first). A refused command is answered only to a writer of
the issue's repository (``answer_refusal``); anyone else's is silent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from squadron.domain.change_set_commands import approved_answer, refused_answer
from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError, SetState
from squadron.domain.effects import ApproveChangeSet
from squadron.ports import RouterGitHub
from squadron.shell.change_sets import ChangeSetDesk

logger = logging.getLogger(__name__)

#: Who the answers are written as (the framework, on behalf of its change-set desk).
AUTHOR = "framework"
#: What happens once a set is ``approved``: the set's work starts (its caller may be called again
#: for the same set, on a retry or a later command of an approver: it must be idempotent).
OnApproved = Callable[[ChangeSet], None]


def _nothing(change_set: ChangeSet) -> None:
    logger.info("change set %s is approved; nothing starts its work here", change_set.id)


@dataclass
class ChangeSetCommands:
    desk: ChangeSetDesk
    #: Called when an approval leaves the set ``approved``.
    on_approved: OnApproved = _nothing

    def approve(
        self, effect: ApproveChangeSet, key: str, github: RouterGitHub, look_since: datetime | None
    ) -> str:
        """Carry ``effect`` out and answer it (once, under ``key``); what was done, for the log."""
        try:
            change_set: ChangeSet | None = self.desk.approve(
                set_id=effect.set_id,
                login=effect.login,
                installation_id=effect.installation_id,
                repository=effect.repo_full_name,
                issue=effect.number,
                delivery=effect.delivery,
            ).change_set
        except ChangeSetRefusedError as exc:
            change_set = self._approved_already(effect)
            if change_set is None:
                if not effect.answer_refusal:
                    return f"refused, unanswered ({effect.login} cannot write {effect.repo_full_name}): {exc}"
                self._answer(
                    effect, key, github, look_since, refused_answer(effect.set_id, effect.login, str(exc))
                )
                return f"refused: {exc}"
        assert change_set is not None
        if change_set.state is SetState.APPROVED:
            self.on_approved(change_set)
        self._answer(effect, key, github, look_since, approved_answer(change_set, effect.login))
        return f"{effect.login} approved; the set is {change_set.state}"

    def _approved_already(self, effect: ApproveChangeSet) -> ChangeSet | None:
        """The set when ``effect``'s commenter approved part of it already on this issue (this
        command's own earlier attempt, or an earlier command): answered as an approval."""
        found = self.desk.registry.get_change_set(effect.set_id)
        if (
            found is None
            or found.state not in (SetState.PROPOSED, SetState.APPROVED)
            or found.installation_id != effect.installation_id
            or (found.origin_repository.lower(), found.issue)
            != (effect.repo_full_name.lower(), effect.number)
            or not any(m.approved_by == effect.login for m in found.members)
        ):
            return None
        return found

    @staticmethod
    def _answer(
        effect: ApproveChangeSet, key: str, github: RouterGitHub, look_since: datetime | None, body: str
    ) -> None:
        inst, repo, number = effect.installation_id, effect.repo_full_name, effect.number
        if look_since is not None and github.find_comment(inst, repo, number, key, look_since):
            logger.info("answer %s on %s#%s was posted already", key, repo, number)
            return
        github.comment(inst, repo, number, body, AUTHOR, key=key)
