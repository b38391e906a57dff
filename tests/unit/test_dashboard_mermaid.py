"""The dashboard's blocker graph, read by Mermaid's own parser (npm ``mermaid`` under Node).

Each scripted blocker graph is rendered into a whole dashboard body, its ```mermaid block taken
out as GitHub finds it, and parsed by mermaid.js: a syntax error fails, and what the parser
understood (its nodes, their labels, its edges) must be the blocker graph, edge for edge.
Broken diagrams are parsed alongside, so a parser that accepts anything fails too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.domain import dashboard
from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from tests.support import mermaid

NOW = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)
HOSTILE = '"]\n  x --> y\nclick i1 "javascript:alert(1)"\n%%{init: {"securityLevel": "loose"}}%%<img src=x>|`'


def agent(number: int | None, status: AgentStatus, role: str = "feat-dev", **changes: Any) -> AgentRecord:
    kind = RoleKind.PM if number is None else RoleKind.REVIEW if "review" in role else RoleKind.DEV
    return AgentRecord.model_validate(
        {
            "agent_id": "1-pm" if number is None else f"1-{number}-{role}",
            "role": "pm" if number is None else role,
            "kind": kind,
            "repo_id": 1,
            "repo_full_name": "octo/shop",
            "installation_id": 77,
            "issue_number": number,
            "status": status,
            "created_at": NOW,
            "updated_at": NOW,
            **changes,
        }
    )


def blocked(number: int, *by: int, status: AgentStatus = AgentStatus.SLEEPING, **changes: Any) -> AgentRecord:
    return agent(number, status, blocked_by=frozenset(by), **changes)


GRAPHS: list[tuple[str, Callable[[], list[AgentRecord]]]] = [
    (
        "two blockers, one shared",
        lambda: [
            blocked(38, 42, 43),
            agent(42, AgentStatus.ACTIVE, pr_number=101),
            agent(43, AgentStatus.ESCALATED, escalation_reason="turns reached 20 of 20"),
            blocked(44, 43, status=AgentStatus.ACTIVE),
        ],
    ),
    ("a chain of five", lambda: [blocked(n, n + 1) for n in range(1, 6)]),
    ("a cycle", lambda: [blocked(7, 8), blocked(8, 7)]),
    (
        "every status on a diamond",
        lambda: [
            blocked(1, 2, 3),
            blocked(2, 4, status=AgentStatus.CREATED),
            blocked(3, 4, status=AgentStatus.ESCALATED),
            agent(4, AgentStatus.COMPLETED),
            blocked(5, 4, status=AgentStatus.CANCELLED),
        ],
    ),
    ("blockers no agent works on", lambda: [blocked(10, 11, 12, 13)]),
    ("issue numbers as large as GitHub's", lambda: [blocked(2**31 - 1, 2**31 - 2, 1)]),
    (
        "a PM and a review agent beside the dev agents",
        lambda: [
            agent(None, AgentStatus.ACTIVE),
            agent(20, AgentStatus.ACTIVE, role="pr-review"),
            blocked(20, 21),
        ],
    ),
    (
        "more issues than the graph draws",
        lambda: [blocked(n, n + 1, n + 2) for n in range(1, dashboard.MAX_GRAPH_NODES + 20)],
    ),
    (
        "hostile text everywhere an agent can put it",
        lambda: [
            blocked(30, 31, escalation_reason=HOSTILE, status=AgentStatus.ESCALATED),
            agent(31, AgentStatus.ACTIVE, branch="feat/x", pr_number=5, escalation_reason=HOSTILE),
        ],
    ),
]


def expected(agents: list[AgentRecord]) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """The blocker graph as a parser should understand it: every issue, labelled with its dev
    agent's status, and an edge from each issue to each of its blockers (the first
    MAX_GRAPH_NODES issues by number)."""
    edges = {(a.issue_number, b) for a in agents if a.issue_number is not None for b in a.blocked_by}
    drawn = sorted({n for edge in edges for n in edge})[: dashboard.MAX_GRAPH_NODES]
    status = {a.issue_number: a.status.value.lower() for a in agents if a.kind is RoleKind.DEV}
    nodes = {f"i{n}": f"#{n} {status[n]}" if n in status else f"#{n}" for n in drawn}
    lines = sorted((f"i{a}", f"i{b}", "blocked by") for a, b in edges if a in drawn and b in drawn)
    return nodes, lines


def _body(agents: list[AgentRecord]) -> str:
    return dashboard.with_marker(dashboard.render("octo/shop", agents, now=NOW))


#: Diagrams Mermaid must refuse: the check is worth something only if it can fail.
BROKEN = [
    ("a quote inside a label", 'flowchart LR\n    i1["#1 "sleeping"]\n    i1 -->|blocked by| i2'),
    ("a pipe inside an edge label", "flowchart LR\n    i1 -->|blocked|by| i2"),
    ("a bracket left open", 'flowchart LR\n    i1["#1'),
    ("a reserved word as a node", "flowchart LR\n    end -->|blocked by| i2"),
]


@pytest.fixture(scope="module")
def parsed() -> dict[str, mermaid.Parsed]:
    """Every diagram of the module, parsed by one Node process."""
    diagrams: dict[str, str] = {}
    for name, make in GRAPHS:
        blocks = mermaid.fenced(_body(make()))
        assert len(blocks) == 1, f"{name}: {len(blocks)} mermaid blocks"
        diagrams[name] = blocks[0]
    diagrams.update(BROKEN)
    return dict(zip(diagrams, mermaid.parse(list(diagrams.values())), strict=True))


@pytest.mark.parametrize("make", [g[1] for g in GRAPHS], ids=[g[0] for g in GRAPHS])
def test_mermaid_parses_the_blocker_graph_as_drawn(
    parsed: dict[str, mermaid.Parsed], make: Callable[[], list[AgentRecord]], request: pytest.FixtureRequest
) -> None:
    name = request.node.callspec.id
    result = parsed[name]
    assert result.ok, f"Mermaid refused the graph: {result.error}\n{dashboard.mermaid_graph(make())}"
    assert result.type == "flowchart-v2"
    nodes, edges = expected(make())
    assert result.nodes == nodes
    assert sorted(result.edges) == edges


@pytest.mark.parametrize("name", [b[0] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_mermaid_refuses_a_broken_diagram(parsed: dict[str, mermaid.Parsed], name: str) -> None:
    result = parsed[name]
    assert not result.ok and result.error, f"Mermaid accepted {name!r}"


def test_no_text_an_agent_wrote_reaches_the_graph() -> None:
    """Only issue numbers and statuses are drawn: the same agents without their words draw the
    same graph."""
    (_, hostile) = GRAPHS[-1]
    agents = hostile()
    plain = [a.model_copy(update={"escalation_reason": None}) for a in agents]
    assert dashboard.mermaid_graph(agents) == dashboard.mermaid_graph(plain)
    assert "javascript" not in _body(agents).split("```mermaid")[1].split("```")[0]


def test_the_parser_is_the_pinned_mermaid() -> None:
    assert mermaid.version() == "12.3.0"
