"""Calls over one issue's lifecycle through the real router Lambda on moto (bench/router_calls.py),
bounded from above: a change that costs more DynamoDB or GitHub calls per issue fails here.

The bounds are what was measured (``python -m bench router_calls``, bench/results/router_calls.json):
112 DynamoDB calls (86 before each decision's outbox was claimed by one executor and each of
its effects recorded done, 26 more over the lifecycle); 30 GitHub requests (29 before an opened
issue's author's permission was asked, to know whether a writer vouched for it), 9 of them
answered 304 Not Modified through the transport's
ETag cache, so 20 against the rate limit (34 GitHub requests, all against the rate limit, before
conditional requests and the merge gate's skipped file reads). Lower them when the router gets
cheaper; never raise them without saying why in docs/limits.md ("Limits", GitHub).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.router_calls import bench_router_calls

BOUNDS: list[tuple[str, str, int]] = [
    # (figure over the 11-event lifecycle, its key in the benchmark's totals, at most)
    ("DynamoDB calls", "dynamodb_total", 112),
    ("GitHub requests", "github", 30),
    ("GitHub requests against the rate limit", "github_rate_limited", 20),
]
#: Fewer 304s than this would mean the conditional requests stopped working (more rate limit spent).
LEAST_NOT_MODIFIED = 9


@pytest.fixture(scope="module")
def lifecycle() -> dict[str, Any]:
    # The fixed routing's lifecycle; the default pipelines' is the bench's (python -m bench router_calls).
    return bench_router_calls(pipelines=False)


def _by_event(lifecycle: dict[str, Any], figure: str) -> str:
    return ", ".join(f"{name} {counts[figure]}" for name, counts in lifecycle["events"].items())


@pytest.mark.parametrize(("figure", "most"), [b[1:] for b in BOUNDS], ids=[b[0] for b in BOUNDS])
def test_one_issues_lifecycle_stays_within_its_call_budget(
    lifecycle: dict[str, Any], figure: str, most: int
) -> None:
    assert lifecycle["lifecycle_events"] == 11
    total = lifecycle["lifecycle_total"][figure]
    assert 0 < total <= most, f"{figure}: {total} (by event: {_by_event(lifecycle, figure)})"


def test_the_repeated_reads_are_conditional(lifecycle: dict[str, Any]) -> None:
    total = lifecycle["lifecycle_total"]
    assert total["github_not_modified"] >= LEAST_NOT_MODIFIED, _by_event(lifecycle, "github_not_modified")
    assert total["github_rate_limited"] == total["github"] - total["github_not_modified"]


def test_a_merge_gate_judgement_reads_again_only_what_changed(lifecycle: dict[str, Any]) -> None:
    """The gate's repeated reads are conditional: unchanged resources come back 304."""
    events = lifecycle["events"]
    status = events["status"]["github_by_route"]
    # A status event changes the combined status only: the PR, its reviews and check runs are 304s.
    assert events["status"]["github_not_modified"] == 3
    assert status["GET /repos/{owner}/{repo}/commits/{sha}/status"] == 1
    assert "GET /repos/{owner}/{repo}/pulls/{n}/files" not in status  # no protected path: not read
    assert events["pull_request.opened"]["github_not_modified"] == 0  # everything new
