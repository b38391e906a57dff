"""A retrospective end to end in the local stack: a week of agent work (an issue, its agent's pull
request, a person's merge) becomes history; the reconciler keeps the repository's EventBridge
Scheduler schedule, whose firing (sent as Scheduler sends it) opens the retrospective's issue with the
figures code computed from that history; its agent (the real Copilot CLI against the scripted
model) comments, opens an action item, and proposes a change to `.squadron/` as a pull request
that touches nothing else and that the merge gate holds for a person; the retrospective is
recorded with what it proposed and its completion is a domain event.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from squadron.adapters.confinement import AgentDirs
from squadron.adapters.dynamo_memory import DynamoMemory
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.domain.agents import AgentStatus
from squadron.local.model import Json, Turn, calls_since_prompt
from tests.e2e.conftest import Human, StackFactory, agent, eventually, issue_of, prompts

pytestmark = pytest.mark.e2e

LESSON = "- Agents: pin WIDGET_CLOCK=fixed in CI (the midnight failures of #1)."


class Script:
    """#1's dev agent opens a PR; the retrospective's agent (its issue's number is GitHub's: the
    dashboard issue may come first) does its job."""

    def __init__(self, agents_root: Any) -> None:
        self.agents_root = agents_root
        self.seen: dict[int, list[Json]] = {}
        self.retro_number = -1
        self._lock = threading.Lock()

    def __call__(self, request: Json) -> Turn | None:
        number = issue_of(request)
        if number is None:
            return None  # the PM
        with self._lock:
            self.seen.setdefault(number, []).append(request)
        retro = f"1-{number}-retrospective"
        if number != 1 and "Retrospective" in (prompts(request) or [""])[0]:
            self.retro_number = number
        plans: dict[int, list[Turn]] = {
            1: [
                ("bash", {"command": "printf 'WIDGET_CLOCK=fixed\\n' > .env.test", "description": "pin"}),
                ("open_pr", {"title": "Pin the widget tests' clock", "body": "Closes #1."}),
                ("report_complete", {"summary": "PR open."}),
                "Done.",
            ],
            self.retro_number: [
                ("read_issue", {}),
                (
                    "comment",
                    {
                        "body": "What went well: #2 merged in one round.\n\nAction items:\n- Pin the clock in CI"
                    },
                ),
                (
                    "create_issue",
                    {"title": "Pin the clock in CI", "body": f"From the retrospective #{number}."},
                ),
                (
                    "edit",
                    {
                        "path": str(AgentDirs(self.agents_root, retro).work / ".squadron" / "context.md"),
                        "old_str": "# What every agent should know about Squadron\n",
                        "new_str": f"# What every agent should know about Squadron\n\n{LESSON}\n",
                    },
                ),
                (
                    "open_pr",
                    {"title": "Retrospective: pin the clock", "body": "Answers the midnight failures."},
                ),
                ("report_complete", {"summary": "Retrospective held."}),
                "Done.",
            ],
        }
        plan = plans.get(number, ["Done."])
        done = calls_since_prompt(request)
        return plan[len(done)] if len(done) < len(plan) else "Done."

    def told(self, number: int) -> str:
        with self._lock:
            last = self.seen[number][-1]
        return "\n".join(str(m.get("content") or "") for m in last.get("messages", []))


def _status(stack: Any, agent_id: str) -> AgentStatus | None:
    record = agent(stack, agent_id)
    return record.status if record is not None else None


def test_a_retrospective_of_a_week_opens_its_issue_and_a_pull_request_held_for_a_person(
    local_stack: StackFactory,
) -> None:
    holder: dict[str, Script] = {}

    def policy(request: Json) -> Turn | None:
        return holder["script"](request)

    stack = local_stack(policy)
    holder["script"] = script = Script(stack.repo_root(1))
    assert stack.sandbox is not None and stack.resources is not None
    human = Human(stack)
    repo = stack.sandbox.repos[stack.options.repo]

    # The week: #1's agent opens PR #2, a person merges it.
    human.open_issue("Widget tests fail at midnight", assign=True)
    pr = eventually(lambda: repo.pulls.get(2), "#1's pull request")
    human.call("PUT", f"/pulls/{pr['number']}/merge", merge_method="squash")
    eventually(lambda: _status(stack, "1-1-feat-dev") is AgentStatus.COMPLETED, "#1's agent to complete")

    # The reconciler keeps the repository's schedule (weekly by default); it fires a minute from now.
    stack.reconcile()
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
    assert stack.fire_schedule(1, now) is not None
    issue = eventually(
        lambda: next(
            (i for i in repo.issues.values() if any(x["name"] == "retrospective" for x in i["labels"])), None
        ),
        "the retrospective's issue",
    )
    number = issue["number"]
    body = issue["body"]
    assert "## Figures" in body and "not by a model" in body
    assert "| merged | 1 | \\#&#8203;2 |" in body or "| merged | 1 | #2 |" in body

    retro_pr = eventually(
        lambda: next(
            (p for p in repo.pulls.values() if p["head"]["ref"] == f"squadron/retro-{number}"), None
        ),
        "the retrospective's pull request",
    )
    eventually(
        lambda: _status(stack, f"1-{number}-retrospective") is AgentStatus.COMPLETED,
        "the retrospective's agent to complete",
    )
    # It changes .squadron/ only, and waits for a person.
    files = human.call("GET", f"/pulls/{retro_pr['number']}/files")
    assert [f["filename"] for f in files] == [".squadron/context.md"]
    assert repo.pulls[retro_pr["number"]]["merged"] is False
    # What it proposed is tracked for the next retrospective, and its completion was published.
    (record,) = DynamoMemory(stack.resources.table_name).retrospectives(1)
    assert record.issue_number == number and record.pull_request == retro_pr["number"]
    assert [i.kind for i in record.items] == ["issue", "pull_request"]
    events = DynamoRegistry(stack.resources.table_name).history(
        1, now - timedelta(days=8), datetime.now(UTC) + timedelta(minutes=5)
    )
    (completed,) = [e for e in events if e.detail_type == "retrospective.completed.v1"]
    assert completed.data["proposals"] == 2 and completed.data["pull_request"] == retro_pr["number"]
    assert "## Figures" in script.told(number)  # its agent read the figures
    assert stack.errors == []
