"""One name per agent wherever a person reads it (issue 33, item 4): the dashboard, the local
feed, the event lines of `squadron events tail`, the CLI's tables and the comments Squadron
posts all call the dev agent of issue 38 ``feat-dev-38`` (:func:`squadron.domain.agents.agent_name`);
its id ``1-38-feat-dev`` appears only as the handle commands take (an ``ID`` column, a hidden
marker), never as its name."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from squadron.adapters.event_bus import LoggedEvent
from squadron.domain import dashboard
from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind, agent_name, name_for_id
from squadron.domain.memory import Evidence, MemoryFact
from squadron.local.feed import describe_agent
from squadron.operator_view import agent_detail, memory_table, status_table

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ID = "1-38-feat-dev"
NAME = "feat-dev-38"


def record(status: AgentStatus = AgentStatus.ESCALATED, **changes: object) -> AgentRecord:
    return AgentRecord.model_validate(
        {
            "agent_id": ID,
            "role": "feat-dev",
            "kind": RoleKind.DEV,
            "repo_id": 1,
            "repo_full_name": "octo/shop",
            "installation_id": 7,
            "issue_number": 38,
            "status": status,
            "escalation_reason": "turns reached 20 of 20",
            "created_at": NOW - timedelta(hours=1),
            "updated_at": NOW,
            **changes,
        }
    )


def _visible(markdown: str) -> str:
    """What a person sees of a body: its hidden markers (HTML comments) left out."""
    return re.sub(r"<!--.*?-->", "", markdown, flags=re.DOTALL)


def _fact() -> MemoryFact:
    return MemoryFact.model_validate(
        {
            "fact_id": "m-0123456789ab",
            "repo_id": 1,
            "repo_full_name": "octo/shop",
            "text": "Tests need Redis",
            "kind": "dev",
            "agent_id": ID,
            "role": "feat-dev",
            "issue_number": 38,
            "evidence": Evidence(kind="issue", number=38),
            "created_at": NOW,
            "last_used_at": NOW,
        }
    )


def _status_name_column() -> str:
    header, row = status_table([record()], NOW).splitlines()[:2]
    return row[: header.index("ID")]


SURFACES: list[tuple[str, Callable[[], str]]] = [
    (
        "the dashboard's tables, actions and escalations",
        lambda: _visible(dashboard.render("octo/shop", [record()], now=NOW)),
    ),
    (
        "the dashboard's recently ended",
        lambda: _visible(
            dashboard.render(
                "octo/shop",
                [],
                ended=[record(AgentStatus.CANCELLED, finished_at=NOW, end_reason="#38 was closed by alice")],
                now=NOW,
            )
        ),
    ),
    (
        "the dashboard's memory proposals",
        lambda: _visible(dashboard.render("octo/shop", [], memory=[_fact()], now=NOW)),
    ),
    ("the local feed", lambda: describe_agent(record(AgentStatus.SLEEPING), AgentStatus.ACTIVE)),
    (
        "an event line of events tail",
        lambda: LoggedEvent(
            "agent.slept.v1",
            NOW,
            {"repository": {"id": 1, "full_name": "octo/shop"}, "issue": 38, "agent": ID, "data": {}},
        ).line(),
    ),
    ("the status table's name column", _status_name_column),
    ("agent show", lambda: agent_detail(record(), [], NOW).split("\nid ")[0]),
    ("memory list", lambda: memory_table([_fact()])),
]


@pytest.mark.parametrize("show", [s[1] for s in SURFACES], ids=[s[0] for s in SURFACES])
def test_an_agent_is_called_by_its_one_name_everywhere(show: Callable[[], str]) -> None:
    shown = show()
    assert NAME in shown, shown
    assert ID not in shown, shown


NAMES = [
    ("1-38-feat-dev", "feat-dev-38"),
    ("12-7-pr-review", "pr-review-7"),
    ("1-pm", "pm"),
    ("not-an-id", "not-an-id"),  # shown as it is
]


@pytest.mark.parametrize(("agent_id", "name"), NAMES)
def test_the_name_of_an_id_is_the_record_s_name(agent_id: str, name: str) -> None:
    assert name_for_id(agent_id) == name


def test_the_record_and_the_function_agree() -> None:
    assert record().display_name == agent_name("feat-dev", 38) == NAME
