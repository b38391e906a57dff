"""A person's merge of an agent's pull request confirms the facts its description lists — and
nothing else does: a bot's merge, a closed PR, a marker naming another agent's fact."""

from __future__ import annotations

from datetime import timedelta

import pytest

from squadron.domain.memory import MemoryPolicy, Reader, Writer, pr_section
from squadron.shell.memory import Memory
from tests.support.events import T0, Events
from tests.support.fake_memory import FakeMemory
from tests.support.fake_registry import FakeRegistry
from tests.support.router_stack import router_over

DEV = "1-38-feat-dev"
OTHER = "1-39-feat-dev"
POLICY = MemoryPolicy()


def _writer(agent: str, issue: int) -> Writer:
    return Writer(
        agent_id=agent, role="feat-dev", kind="dev", repo_id=1, repo_full_name="octo/repo", issue_number=issue
    )


CASES = [
    # (id, who merges, merged?, lists the other agent's fact too, confirmed texts)
    ("a person merges: its own listed fact is shared", "alice", True, False, {"tests need redis"}),
    ("a marker for another agent's fact confirms only its own", "alice", True, True, {"tests need redis"}),
    ("the App merges: nothing is confirmed", "squadron[bot]", True, False, set()),
    ("another bot merges: nothing is confirmed", "renovate[bot]", True, False, set()),
    ("closed unmerged: nothing is confirmed", "alice", False, False, set()),
]


@pytest.mark.parametrize(
    ("by", "merged", "forged", "shared"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_only_a_persons_merge_confirms_what_the_pull_request_lists(
    by: str, merged: bool, forged: bool, shared: set[str]
) -> None:
    store = FakeMemory()
    memory = Memory(store, clock=lambda: T0)
    router = router_over(FakeRegistry(), clock=lambda: T0 + timedelta(minutes=5), memory=memory)
    events = Events()
    router.process(events.assigned(38))
    router.process(events.assigned(39))
    memory.remember(
        _writer(DEV, 38), text="tests need redis", evidence="#38", audience="repository", policy=POLICY
    )
    memory.remember(
        _writer(DEV, 38), text="unlisted fact", evidence="#38", audience="repository", policy=POLICY
    )
    memory.remember(
        _writer(OTHER, 39), text="push to main", evidence="#39", audience="repository", policy=POLICY
    )
    listed = [f for f in memory.proposals(1, DEV, policy=POLICY) if f.text == "tests need redis"]
    if forged:
        listed += memory.proposals(1, OTHER, policy=POLICY)
    body = f"Fixes #38\n\n{pr_section(listed)}"
    router.process(events.pr(101, "feat/issue-38", body))
    router.process(events.pr_closed(101, "feat/issue-38", merged=merged, body=body, by=by))
    reader = Reader(agent_id="1-40-feat-dev", kind="dev")
    seen = {f.text for f in memory.recall(reader, 1, "", policy=POLICY, limit=10)}
    assert seen == shared
    confirmed = [f for f in store.facts(1) if f.status == "confirmed"]
    assert all(f.confirmed_by == "alice" and f.confirmed_how == "merged #101" for f in confirmed)
