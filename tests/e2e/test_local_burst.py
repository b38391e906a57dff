"""A burst: 40 issues across 8 repositories, each opened, commented on and closed, all at once.

Through the whole local stack (sandbox webhooks, the ingress handler, events.fifo on moto with
one message group per issue, the router in batches, a PM agent per repository as a local
process). Every event is routed exactly once, each issue's events in the order GitHub sent them,
and the registry ends with every issue closed.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from squadron.domain.agents import AgentStatus
from tests.e2e.conftest import Human, StackFactory, agent, eventually, launches, registry

pytestmark = pytest.mark.e2e

#: Enough groups and interleaving to exercise batches, per-group order and one PM per repository
#: (bench/local.py measures throughput at larger sizes; this is about order and exactly-once).
REPOS = [f"octo/burst-{n:02d}" for n in range(8)]
ISSUES_PER_REPO = 5
ISSUES = len(REPOS) * ISSUES_PER_REPO


def test_a_burst_of_issues_across_repositories_keeps_each_issues_order(
    local_stack: StackFactory,
) -> None:
    # The PMs linger as deployed: each repository's stays up while its part of the burst comes in.
    stack = local_stack(repo=REPOS[0], extra_repos=tuple(REPOS[1:]), pm_linger_seconds=30)
    assert stack.sandbox is not None
    people = {name: Human(stack, repo=name) for name in REPOS}
    # The burst arrives faster than it is routed: it waits in events.fifo, then drains in batches.
    stack.pause_routing()
    # Round-robin across repositories: every issue's events interleave with all the others'.
    for _ in range(ISSUES_PER_REPO):
        for name in REPOS:
            people[name].open_issue("Burst", body="One of many.")
    for number in range(1, ISSUES_PER_REPO + 1):
        for name in REPOS:
            people[name].comment(number, f"A note on #{number}.")
    for number in range(1, ISSUES_PER_REPO + 1):
        for name in REPOS:
            people[name].close(number)

    sent: dict[str, list[str]] = defaultdict(list)  # group -> delivery ids, in the order sent
    for delivery in stack.sandbox.deliveries:
        if delivery.payload["sender"]["login"] == "octo-human":
            group = f"{delivery.payload['repository']['id']}#{delivery.payload['issue']['number']}"
            sent[group].append(delivery.guid)
    assert len(sent) == ISSUES and all(len(ids) == 3 for ids in sent.values())
    stack.sandbox.wait_for_deliveries(timeout=300)
    stack.resume_routing()
    wanted = {guid for ids in sent.values() for guid in ids}

    def routed() -> dict[str, list[str]]:
        seen: dict[str, list[str]] = defaultdict(list)
        for record in list(stack.routed):
            if record["delivery"] in wanted and not record["failed"]:
                seen[record["group"]].append(record["delivery"])
        return seen

    eventually(
        lambda: sum(len(ids) for ids in routed().values()) >= len(wanted),
        "every event of the burst to be routed",
        timeout=600,
    )
    assert routed() == sent  # each exactly once, in each issue's own order
    view = registry(stack)
    for repo_id in range(1, len(REPOS) + 1):
        for number in range(1, ISSUES_PER_REPO + 1):
            assert view.issue_view(repo_id, number).state == "closed", (repo_id, number)
    # Every repository's PM heard of its issues (and none is left running when the stack stops).
    for repo_id in range(1, len(REPOS) + 1):
        pm = agent(stack, f"{repo_id}-pm")
        assert pm is not None and pm.status is AgentStatus.ACTIVE
    pm_runs = sum(len(launches(stack, f"{r}-pm")) for r in range(1, len(REPOS) + 1))
    print(f"PM runs for the burst: {pm_runs}")  # batched: far fewer than one per issue
    assert stack.errors == []
