"""What `squadron status` and `squadron agent show` print, from registry records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from squadron.domain.agents import AgentRecord, AgentStatus, BreakerCounters, InboxItem, RoleKind
from squadron.domain.usage import ModelTokens
from squadron.operator_view import age, agent_detail, agent_row, dead_letter_table, status_table

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=3)


def record(number: int | None, status: AgentStatus, role: str = "feat-dev", **changes: object) -> AgentRecord:
    return AgentRecord.model_validate(
        {
            "agent_id": f"1-{number}-{role}" if number is not None else "1-pm",
            "role": role,
            "kind": RoleKind.PM if number is None else RoleKind.DEV,
            "repo_id": 1,
            "repo_full_name": "octo/shop",
            "issue_number": number,
            "status": status,
            "created_at": T0,
            "updated_at": T0,
            **changes,
        }
    )


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0s"), (59, "59s"), (60, "1m"), (3_599, "59m"), (3_600, "1h"), (172_800, "2d"), (-5, "0s")],
)
def test_age(seconds: int, said: str) -> None:
    assert age(T0, T0 + timedelta(seconds=seconds)) == said


def test_the_status_table_lists_live_agents_first_with_what_they_wait_for() -> None:
    agents = [
        record(7, AgentStatus.COMPLETED, pr_number=9),
        record(2, AgentStatus.SLEEPING, blocked_by=frozenset({5, 3})),
        record(None, AgentStatus.ACTIVE, role="pm"),
        record(
            4,
            AgentStatus.ACTIVE,
            task_arn="arn:task/1",
            counters=BreakerCounters(tool_calls=12, turns=3, active_seconds=95),
        ),
    ]
    lines = status_table(agents, NOW).splitlines()
    assert lines[0].split() == [
        "AGENT",
        "ID",
        "REPOSITORY",
        "ROLE",
        "ISSUE",
        "STATUS",
        "BLOCKED",
        "BY",
        "PR",
        "AGE",
        "TOOLS",
        "TURNS",
        "ACTIVE",
        "COST",
    ]
    assert [line.split()[:2] for line in lines[1:5]] == [  # its name, then the id commands take
        ["pm", "1-pm"],
        ["feat-dev-4", "1-4-feat-dev"],
        ["feat-dev-2", "1-2-feat-dev"],
        ["feat-dev-7", "1-7-feat-dev"],
    ]
    assert "ACTIVE (idle)" in lines[1] and "ACTIVE (running)" in lines[2]
    assert "#3, #5" in lines[3] and "#9" in lines[4]
    assert lines[2].split()[-4:] == ["12", "3", "95s", "$0.0017"]  # 95 s of task time
    assert "4 agents: 2 active, 1 sleeping, 1 completed" in lines
    assert status_table([], NOW) == "no agents\n"


def test_a_row_for_json_carries_the_counters() -> None:
    row = agent_row(record(2, AgentStatus.SLEEPING, blocked_by=frozenset({3})), NOW)
    assert (row["status"], row["blocked_by"], row["age_seconds"]) == ("SLEEPING", [3], 10_800)
    assert row["counters"]["recoveries"] == 0


def test_one_agent_in_full_with_its_inbox() -> None:
    agent = record(
        2, AgentStatus.ESCALATED, escalation_reason="max_tool_calls 200 reached", branch="feat/issue-2"
    )
    inbox = [
        InboxItem(
            agent_id=agent.agent_id, delivery_id="d", received_at=T0, kind="comment", summary="alice: ping"
        )
    ]
    text = agent_detail(agent, inbox, NOW)
    assert "escalated because  max_tool_calls 200 reached" in text
    assert "branch             feat/issue-2" in text
    assert text.endswith("inbox (1 waiting):\n  - [comment] alice: ping\n")


def test_a_finished_agent_says_when_its_working_copy_and_session_were_removed() -> None:
    finished = T0 + timedelta(minutes=30)
    kept = record(2, AgentStatus.COMPLETED, finished_at=finished)
    assert "finished           2026-11-23T12:30:00+00:00 (2h ago)" in agent_detail(kept, [], NOW)
    assert "working copy       kept with its session" in agent_detail(kept, [], NOW)
    purged = kept.model_copy(update={"purged_at": NOW - timedelta(minutes=5)})
    text = agent_detail(purged, [], NOW)
    assert "working copy       removed 2026-11-23T14:55:00+00:00 (5m ago), with its session" in text
    row = agent_row(purged, NOW)
    assert (row["finished_at"], row["purged_at"]) == (
        finished.isoformat(),
        (NOW - timedelta(minutes=5)).isoformat(),
    )
    assert "finished           -" in agent_detail(record(3, AgentStatus.ACTIVE), [], NOW)


def test_the_dead_letters_in_lines() -> None:
    assert dead_letter_table([]) == "the dead-letter queue is empty\n"
    message = {
        "message_id": "m1",
        "group": "1#2",
        "event": "issues.closed",
        "delivery_id": "d",
        "receive_count": 5,
        "sent_at": "t",
    }
    assert (
        dead_letter_table([message])
        == "m1  group 1#2  issues.closed  delivery d  received 5x  sent t\n1 messages\n"
    )


def test_status_shows_what_each_agent_and_issue_cost_tree_included() -> None:
    sonnet = ModelTokens(model="claude-sonnet-4.5", input_tokens=1_000_000, output_tokens=100_000)
    agents = [
        record(
            4, AgentStatus.SLEEPING, blocked_by=frozenset({5}), counters=BreakerCounters(tokens=(sonnet,))
        ),
        record(5, AgentStatus.ACTIVE, counters=BreakerCounters(tokens=(sonnet,), active_seconds=3600)),
        record(
            6,
            AgentStatus.ACTIVE,
            counters=BreakerCounters(tokens=(ModelTokens(model="house-llm", input_tokens=5),)),
        ),
    ]
    table = status_table(agents, NOW)
    assert "  octo/shop#4  $4.50  (with its blockers $9.06)" in table  # 3 + 1.5; and #5's 4.50 + 0.0634
    assert "  octo/shop#5  $4.56" in table
    assert "  octo/shop#6  $0.00+?" in table
    assert "no price for house-llm" in table
    row = agent_row(agents[1], NOW)
    assert row["cost_usd"] == {"tokens": 4.5, "task": 0.0634, "total": 4.5634, "unpriced_models": []}
