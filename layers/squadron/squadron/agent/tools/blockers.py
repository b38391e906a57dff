"""Blockers: the agent's issue waits for another (its session sleeps), or one issue is recorded as blocking another.

What the router must hear (a blocker) goes through the agent gateway, which stamps who sent it.
"""

from __future__ import annotations

from squadron.adapters.github.blockers import blocker_refused
from squadron.agent.tools.base import BaseTools
from squadron.agent.tools.params import CreateBlockerIssue, RegisterBlockerParams, ReportBlocked
from squadron.domain.permissions import Action, check


class BlockerTools(BaseTools):
    def report_blocked(self, params: ReportBlocked) -> str:
        if self.agent.issue_number is None:
            return "Only an agent working on an issue can be blocked."
        if params.blocker_issue == self.agent.issue_number:
            return f"#{params.blocker_issue} is your own issue; it cannot block itself."
        return self._sleep_on(params.blocker_issue, params.reason)

    def create_blocker_issue(self, params: CreateBlockerIssue) -> str:
        own = self.agent.issue_number
        if own is None:
            return "Only an agent working on an issue can be blocked."
        body = f"{params.body}\n\nBlocks #{own}: {params.reason}"
        # The gateway tells the router (the App's own issues.opened webhook is dropped at the
        # ingress), so the PM triages the new issue like any other.
        issue = self.writes.create_issue(params.title, body)
        number = int(issue["number"])
        return f"Filed #{number}. " + self._sleep_on(number, params.reason)

    def _sleep_on(self, blocker: int, reason: str) -> str:
        own = self.agent.issue_number
        assert own is not None
        check(self.github.caller, Action.REGISTER_BLOCKER)
        # The gateway refuses a blocker that is not an open issue (the same check, blocker_refused,
        # as GitHub has it when it registers): asked here first, so a refused one says nothing on
        # the issue. The comment goes before the registration, which puts the agent to sleep: a
        # sleeping agent's task writes nothing, and the sooner it winds down, the sooner a wake
        # finds its lease free.
        refused = blocker_refused(self.github, blocker)
        if refused is not None:
            return f"Not registered: {refused}"
        self.writes.comment(own, f"Blocked by #{blocker}: {reason}")
        self.door.register_blocker(own, blocker, sleep=True, note=reason, what=f"blocked-{blocker}")
        self.state.ending = "sleep"
        self.state.reason = f"blocked by #{blocker}: {reason}"
        self.state.commands.append(f"register_blocker #{blocker}")
        return (
            f"Registered: #{own} is blocked by #{blocker}. Your work in progress will be pushed and "
            "your session sleeps; it wakes when the blocker closes. End your turn with a one-line status."
        )

    def register_blocker(self, params: RegisterBlockerParams) -> str:
        check(self.github.caller, Action.REGISTER_BLOCKER)
        if params.issue == params.blocked_by:
            return f"#{params.issue} cannot block itself."
        self.door.register_blocker(
            params.issue,
            params.blocked_by,
            sleep=False,
            note=params.reason,
            what=f"blocker-{params.issue}-{params.blocked_by}",
        )
        return (
            f"Sent: #{params.issue} is blocked by #{params.blocked_by}. Squadron refuses it if "
            f"#{params.blocked_by} is closed, would close a cycle or is too deep; the issue's agent, if "
            "any, waits for it."
        )
