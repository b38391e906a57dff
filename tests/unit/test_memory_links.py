"""Where memory's links and hints lead: a fact's evidence links to the deployment's GitHub (its
web side, derived from the configured API URL as everywhere else: github.com, a GitHub Enterprise
Server, the local sandbox), and every hint to `squadron memory` names the repository it needs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from squadron.domain import dashboard
from squadron.domain.app_manifest import web_url_for
from squadron.domain.memory import Evidence, MemoryFact, MemoryPolicy, MemoryRefusedError, Writer
from squadron.operator_view import memory_detail
from squadron.shell.memory import Memory
from tests.support.fake_memory import FakeMemory

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
REPO = "octo/repo"


def fact(n: int, *, status: str = "confirmed", evidence: Evidence | None = None) -> MemoryFact:
    return MemoryFact(
        fact_id=f"m-{n:012x}",
        repo_id=1,
        repo_full_name=REPO,
        text=f"fact {n}",
        evidence=evidence or Evidence(kind="issue", number=38),
        agent_id="1-38-feat-dev",
        role="feat-dev",
        kind="dev",
        issue_number=38,
        status=status,
        created_at=NOW,
        last_used_at=NOW,
    )


#: (the configured GitHub API URL, GitHub's web side the links must lead to)
GITHUBS = [
    ("https://api.github.com", "https://github.com"),
    ("https://ghe.example.com/api/v3", "https://ghe.example.com"),
    ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
]
IDS = ["github.com", "enterprise server", "local sandbox"]

#: (evidence, its page under the web side)
EVIDENCE = [
    (Evidence(kind="issue", number=38), f"/{REPO}/issues/38"),
    (Evidence(kind="pull_request", number=40), f"/{REPO}/pull/40"),
    (Evidence(kind="comment", number=38, comment_id=7), f"/{REPO}/issues/38#issuecomment-7"),
]


@pytest.mark.parametrize(("api_url", "web"), GITHUBS, ids=IDS)
@pytest.mark.parametrize(("evidence", "page"), EVIDENCE, ids=["issue", "pull request", "comment"])
def test_the_dashboard_links_a_facts_evidence_on_the_configured_github(
    api_url: str, web: str, evidence: Evidence, page: str
) -> None:
    body = dashboard.render(
        REPO, [], memory=[fact(1, evidence=evidence)], web_url=web_url_for(api_url), now=NOW
    )
    assert f"({web}{page})" in body
    if web != "https://github.com":
        assert "https://github.com" not in body


@pytest.mark.parametrize(("api_url", "web"), GITHUBS, ids=IDS)
@pytest.mark.parametrize(("evidence", "page"), EVIDENCE, ids=["issue", "pull request", "comment"])
def test_memory_show_links_a_facts_evidence_on_the_configured_github(
    api_url: str, web: str, evidence: Evidence, page: str
) -> None:
    shown = memory_detail(fact(1, evidence=evidence), web_url=web_url_for(api_url))
    assert f"{web}{page}" in shown
    if web != "https://github.com":
        assert "https://github.com" not in shown


def test_the_dashboards_hints_to_squadron_memory_name_the_repository() -> None:
    proposals = [fact(n, status="proposed") for n in range(dashboard.MAX_PROPOSALS + 1)]
    body = dashboard.render(REPO, [], memory=[fact(999), *proposals], now=NOW)
    hints = [line for line in body.splitlines() if "squadron memory" in line]
    assert len(hints) == 2, hints
    for line in hints:
        assert f"`squadron memory list --repo {REPO}`" in line, line


def test_a_full_memorys_refusal_names_the_repository_in_its_hint() -> None:
    policy = MemoryPolicy(max_facts=1)
    store = FakeMemory()
    memory = Memory(store, clock=lambda: NOW)
    writer = Writer(agent_id="1-38-feat-dev", role="feat-dev", kind="dev", repo_id=1, repo_full_name=REPO)
    memory.remember(writer, text="kept", evidence="#38", audience="repository", policy=policy)
    memory.confirm(1, [f.fact_id for f in store.facts(1)], by="alice", how="cli", policy=policy)
    with pytest.raises(MemoryRefusedError) as refused:
        memory.remember(writer, text="one more", evidence="#38", audience="repository", policy=policy)
    assert f"`squadron memory forget m-... --repo {REPO}`" in str(refused.value)
