"""The change-set demo's scripted model (squadron.local.change_set_demo): the PM proposes one set
per issue a person opened (never for the App's own), with the dependencies the scenario plays;
each dev agent writes a file named after its own issue, so that two sets in one repository never
write the same change."""

from __future__ import annotations

from typing import Any

import pytest

from squadron.local.change_set_demo import REPOSITORIES, change_set_policy
from squadron.local.model import Json

SCHEMA, SERVER, CLIENT = REPOSITORIES


def conversation(role: str, *turns: tuple[str, str], prompt: str = "Read your events.") -> Json:
    """A request of ``role``'s agent: its prompt, then each (tool called, what it answered)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"# Agent: {role}\nYou work on {SCHEMA}."},
        {"role": "user", "content": prompt},
    ]
    for number, (tool, answer) in enumerate(turns):
        call = {"id": f"c{number}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{number}", "content": answer},
        ]
    return {"messages": messages, "tools": []}


EVENTS = "#4 opened by octo-human\nRename the field\n#5 opened by squadron[bot]\nA member issue"


def test_the_pm_proposes_one_set_per_persons_issue_and_none_for_the_apps() -> None:
    request = conversation("pm", ("check_for_events", EVENTS))
    assert change_set_policy(request) == (
        "propose_change_set",
        {
            "issue": 4,
            "repositories": [SERVER, CLIENT],
            "dependencies": [
                {"repository": SERVER, "needs": SCHEMA},
                {"repository": CLIENT, "needs": SERVER},
            ],
            "plan": "Rename the field in the schema first, then the server, then the client.",
        },
    )
    after = conversation("pm", ("check_for_events", EVENTS), ("propose_change_set", "{}"))
    assert change_set_policy(after) == (
        "report_complete",
        {"summary": "Proposed a change set for each new issue."},
    )


@pytest.mark.parametrize("issue", [1, 3])
def test_each_dev_agent_writes_a_file_of_its_own_issue_then_opens_its_pull_request(issue: int) -> None:
    start = f'Start on issue #{issue}: "Part". Call check_for_events first.'
    wrote = change_set_policy(conversation("feat-dev", ("check_for_events", "[]"), prompt=start))
    assert isinstance(wrote, tuple) and wrote[0] == "bash"
    assert f"changes/issue-{issue}.md" in wrote[1]["command"]
    opened = change_set_policy(
        conversation("feat-dev", ("check_for_events", "[]"), ("bash", "ok"), prompt=start)
    )
    assert isinstance(opened, tuple) and opened[0] == "open_pr"


def test_anyone_else_is_left_to_the_quiet_model() -> None:
    assert change_set_policy(conversation("pr-review")) is None
