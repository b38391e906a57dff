"""The dashboard issue's "Pipelines" section: each running run's current stages, what they wait
for, and its console link; bounded; text from the repository's configuration shown as text; a
rendering whose Step Functions read fails still shows the rest."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.adapters.step_functions import StepFunctionsUnavailableError
from squadron.domain import dashboard
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.pipeline_runs import RunSummary, Waiting, console_url
from tests.support.events import T0
from tests.unit.test_dashboard_refresh import REPO, Stage

ARN = "arn:aws:states:eu-west-1:123456789012:execution:squadron-dev_42-review:run-{}"
AT = datetime(2026, 11, 28, 1, 5, tzinfo=UTC)


def run(n: int, *waiting: Waiting) -> RunSummary:
    return RunSummary(
        execution_arn=ARN.format(n),
        repository_id=42,
        pipeline="review",
        status="RUNNING",
        started_at=AT,
        version=2,
        issue_number=7,
        waiting=list(waiting),
    )


def human(state: str = "Approve", group: str = "maintainers") -> Waiting:
    return Waiting(
        state=state,
        state_type="Task",
        entered_at=AT,
        stage_type="human",
        config={"human": {"from": group}},
    )


def body(runs: list[RunSummary], more: int = 0) -> str:
    return dashboard.render("octo/repo", [], pipelines=runs, pipelines_more=more, now=AT)


def section(text: str) -> str:
    return text.split("## Pipelines", 1)[1].split("\n## ", 1)[0].split("_Updated", maxsplit=1)[0]


def test_a_running_run_shows_its_stage_what_it_waits_for_and_its_console_link() -> None:
    shown = section(body([run(1, human())]))
    assert f"[review]({console_url(ARN.format(1))})" in shown
    assert "[#7](https://github.com/octo/repo/issues/7)" in shown
    assert "| 2 | Approve | 1 human approval from maintainers | 2026-11-28 01:05 UTC |" in shown


def test_no_runs_no_section() -> None:
    assert "## Pipelines" not in body([])


def test_the_section_is_bounded_and_says_how_many_more() -> None:
    runs = [run(n, human()) for n in range(dashboard.MAX_PIPELINE_RUNS + 2)]
    shown = section(body(runs, more=5))
    assert shown.count("](https://eu-west-1.console.aws.amazon.com/") == dashboard.MAX_PIPELINE_RUNS
    assert "... and 7 more running: `squadron pipelines list --repo octo/repo --status RUNNING`." in shown


@pytest.mark.parametrize(
    ("state", "group"),
    [
        ("@octo/owners", "@octo/security"),
        ("[click](https://evil.example)", "<img src=x onerror=alert(1)>"),
        ("a | b\n## Merged", "#12"),
    ],
)
def test_names_from_the_configuration_are_shown_as_text(state: str, group: str) -> None:
    """A stage or group named to ping, link, inject HTML or break the table: none of it works."""
    shown = section(body([run(1, human(state, group))]))
    assert "@octo" not in shown and "[click](" not in shown and "<img" not in shown
    assert "\n## Merged" not in shown and "#12" not in shown
    row = next(line for line in shown.splitlines() if "console.aws.amazon.com" in line)
    assert row.count(" | ") == 5  # six cells, whatever the names hold


class Runs:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[int, int]] = []

    def __call__(self, repo_id: int, limit: int) -> tuple[list[RunSummary], int]:
        self.asked.append((repo_id, limit))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer, 0


@pytest.mark.parametrize(
    ("answer", "shows_pipelines"),
    [([run(1, human())], True), (StepFunctionsUnavailableError("Step Functions throttled"), False)],
)
def test_the_service_renders_the_repositorys_running_runs(answer: Any, shows_pipelines: bool) -> None:
    stage = Stage()
    runs = Runs(answer)
    stage.service.pipelines = runs
    stage.queue.put(RefreshRequest(repository=REPO, installation=77, cause="sweep"), T0)
    stage.run(1)
    assert runs.asked == [(REPO.id, dashboard.MAX_PIPELINE_RUNS)]
    assert stage.reports and stage.reports[-1].failed == {}
    assert ("## Pipelines" in stage.github.body) is shows_pipelines
    assert "What Squadron's agents are doing" in stage.github.body
