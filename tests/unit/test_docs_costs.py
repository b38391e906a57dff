"""docs/costs.md, bench/results/cost.json and the cost model say the same idle month.

The model counts what idles from the synthesized template (tests/infra/test_infra_cost.py holds
its count to the real stack); the committed result is the model's (`python -m bench cost`), and
the page quotes each item of it."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from bench import cost

ROOT = Path(__file__).resolve().parents[2]


def _result() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(
        (ROOT / "bench" / "results" / "cost.json").read_text(encoding="utf-8")
    )
    return loaded


def _idle_paragraphs() -> str:
    page = (ROOT / "docs" / "costs.md").read_text(encoding="utf-8")
    return page[page.index("**Idle, about") : page.index("**Per 1,000 events")]


def test_the_committed_result_is_the_models() -> None:
    result = _result()
    assert result["idle_resources"] == json.loads(json.dumps(asdict(cost.DEFAULT_RESOURCES)))
    assert result["idle_month_usd"] == cost.idle_month()
    assert result["nat_opt_in_month_usd"] == cost.nat_month()


def test_the_page_quotes_the_idle_month_item_by_item() -> None:
    result = _result()
    text = re.sub(r"\s+", " ", _idle_paragraphs())
    assert f"**Idle, about {result['idle_month_total_usd']:.2f} USD a month**" in text
    assert f"about {result['idle_month_total_with_nat_usd']:.2f} a month idle" in text
    idle = result["idle_month_usd"]
    assert isinstance(idle, dict)
    for item, usd in idle.items():
        if usd:
            assert f" {usd:.2f}" in text, item
    counts = cost.DEFAULT_RESOURCES
    assert f"{counts.alarms} alarms reading {counts.alarm_metrics} metrics" in text
    assert f"{counts.dns_firewall_domains} without `agent_allowed_domains`" in text


def test_the_page_quotes_the_pipelines_transitions_and_their_price() -> None:
    result = json.loads(
        (ROOT / "bench" / "results" / "pipeline_transitions.json").read_text(encoding="utf-8")
    )
    page = re.sub(r"\s+", " ", (ROOT / "docs" / "costs.md").read_text(encoding="utf-8"))
    lifecycle = result["issue_lifecycle"]
    assert f"**Pipelines, about {lifecycle['usd_per_1000_issues']:.2f} USD per 1,000 issues**" in page
    assert f"(taken as an issue's lifecycle: {lifecycle['usd']:.4f} USD)" in page
    assert f"{result['price']['usd_per_1000_transitions']:.3f} USD per 1,000 state transitions" in page
    runs = result["runs"]
    assert all(run["status"] == "SUCCEEDED" for run in runs.values())
    for name, words in [
        ("pr_lifecycle", "its security review skipped) {} per run"),
        ("pr_lifecycle_one_round_trip", "{} when its approval gate fails once"),
        ("parallel_review", "a gate and a merge {}"),
        ("human_with_reminders", "three reminders then a merge {}"),
    ]:
        assert words.format(runs[name]["transitions"]) in page, name
