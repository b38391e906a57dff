"""Change sets: the PM proposes one change across several repositories of the App's installation
(docs/change-sets.md). The gateway stores it on the PM's own repository and issue and posts the
proposal there; nothing starts before a writer of each repository approves it."""

from __future__ import annotations

from squadron.agent.tools.base import BaseTools
from squadron.agent.tools.params import ProposeChangeSet
from squadron.domain.permissions import Action, check


class ChangeSetTools(BaseTools):
    def propose_change_set(self, params: ProposeChangeSet) -> str:
        check(self.github.caller, Action.PROPOSE_CHANGE_SET)
        answer = self.door.propose_change_set(
            params.issue,
            list(params.repositories),
            [(d.repository, d.needs) for d in params.dependencies],
            params.plan,
        )
        waiting = ", ".join(answer.repositories)
        return (
            f"Proposed change set {answer.set_id} ({answer.state}) on #{params.issue}: {waiting}; merge order "
            f"{' -> '.join(answer.merge_order)}. Your plan is kept as {answer.plan}. Nothing starts until a "
            f"writer of each repository comments `{answer.approve_with}` on #{params.issue}; "
            "the proposal was posted there."
        )
