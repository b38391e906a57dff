"""The task's own course: what happened since the agent last looked, and how the task ends.

Tools that end the task (report_complete, escalate_to_human) tell the host through
:class:`~.base.HostState`; the host acts on it after the turn.
"""

from __future__ import annotations

from squadron.agent.reading import vetted
from squadron.agent.tools.base import BaseTools
from squadron.agent.tools.params import EscalateToHuman, NoParams, ReportComplete


class TaskTools(BaseTools):
    def check_for_events(self, params: NoParams) -> str:
        items, more = self.door.inbox_page()
        if not items:
            return "No new events."
        shown = vetted(items, self.authors(), self.reads)  # before the ack: a refusal loses nothing
        self.door.ack_inbox(self.agent.agent_id, items)
        lines = [
            f"- [{item.kind}] {item.summary}" + (f"\n  {item.body}" if item.body else "") for item in shown
        ]
        if more:
            lines.append(f"({more} more event{'s' if more > 1 else ''} waiting: call check_for_events again)")
        return "\n".join(lines)

    def report_complete(self, params: ReportComplete) -> str:
        number = self.agent.issue_number if self.agent.pr_number is None else self.agent.pr_number
        if number is not None:
            self.writes.comment(number, params.summary)
        self.state.ending = "complete"
        self.state.reason = params.summary
        self.state.outputs = dict(params.outputs)
        return "Recorded. Your task ends now; you will be woken by the next event for you."

    def escalate_to_human(self, params: EscalateToHuman) -> str:
        self.state.ending = "escalate"
        self.state.reason = params.reason
        return "Escalated: humans will take it from here. End your turn with a short summary."
