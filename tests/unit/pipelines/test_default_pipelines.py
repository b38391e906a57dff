"""The built-in default pipelines (issue 30, item 3): today's flow as data in the package, loaded,
checked against the documented default roles, compiled within Step Functions' size, and
overridden by a repository's pipeline of the same name."""

from __future__ import annotations

import textwrap

import pytest

from squadron.config import ConfigError, parse_files
from squadron.config.default_pipelines import default_pipelines, default_pipelines_text
from squadron.config.migration import migration
from squadron.domain.pipelines.checks import check_pipelines
from squadron.domain.pipelines.compile import MAX_DEFINITION_BYTES, compile_pipeline
from squadron.domain.pipelines.models import AgentStage, GateStage, MergePrStage
from squadron.domain.pipelines.overrides import overridden, override_problems
from squadron.domain.repo_config.models import RepoConfig
from tests.unit.pipelines.test_compile import QUEUE

BUILTINS = ("triage", "feature-development", "bug-development", "approval-default")


def test_the_built_in_pipelines_ship_in_the_package_and_validate() -> None:
    pipelines = default_pipelines()
    config = RepoConfig()

    assert tuple(pipelines) == BUILTINS
    assert check_pipelines(pipelines, roles=config.roles, human_groups=config.human_groups) == []
    assert "pipelines:" in default_pipelines_text()


@pytest.mark.parametrize("name", BUILTINS)
def test_each_built_in_compiles_within_step_functions_size(name: str) -> None:
    compiled = compile_pipeline(name, default_pipelines(), queue_url=QUEUE, repository_id=7, children={})

    assert len(compiled.text.encode()) <= MAX_DEFINITION_BYTES
    assert compiled.definition["StartAt"]


@pytest.mark.parametrize(
    ("name", "event", "agents", "gate_on_fail", "merges"),
    [
        ("triage", "issues.opened", ["pm"], None, None),
        ("feature-development", "issues.assigned", ["feat-dev", "pr-review"], "implement", "implement"),
        ("bug-development", "issues.assigned", ["bug-fix", "pr-review"], "fix", "fix"),
        ("approval-default", "pull_request.opened", [], None, None),
    ],
)
def test_the_built_ins_say_today_s_flow(
    name: str, event: str, agents: list[str], gate_on_fail: str | None, merges: str | None
) -> None:
    pipeline = default_pipelines()[name]

    assert pipeline.trigger is not None and pipeline.trigger.event == event
    assert [s.agent for s in pipeline.stages if isinstance(s, AgentStage)] == agents
    gates = [s for s in pipeline.stages if isinstance(s, GateStage)]
    failing = [gate.fail_transition() for gate in gates]
    assert [f.goto for f in failing if f is not None] == ([gate_on_fail] if gate_on_fail else [])
    # A development pipeline reviews, judges and merges the pull request its dev stage opened (the
    # framework's pr_number), never the run's issue; approval-default has no merge_pr (the default
    # flow's auto_merge is off: a person merges).
    pr = f"{{{{ stages.{merges}.outputs.pr_number }}}}" if merges else None
    assert [s.config.pr for s in pipeline.stages if isinstance(s, MergePrStage)] == ([pr] if pr else [])
    reviews = [s for s in pipeline.stages if isinstance(s, AgentStage) and s.agent == "pr-review"]
    assert [s.pr for s in reviews] == ([pr] if pr else [])
    assert all(c.pr == pr for gate in gates for c in gate.conditions or ())


def test_approval_default_is_the_documented_default_flow_migrated() -> None:
    """The shipped approval-default is exactly what --migrate gives for a repository without
    workflows/approval-flows.yaml (so the two cannot drift apart)."""
    migrated = migration(parse_files({})).models()

    assert migrated == {"approval-default": default_pipelines()["approval-default"]}


def _config(pipelines: str) -> dict[str, str]:
    return {"config.yaml": textwrap.dedent(pipelines)}


OVERRIDE = """\
pipelines:
  triage:
    description: "Ours: a person triages"
    trigger: {event: issues.opened}
    stages:
      - {id: ask, type: action, action: add_label, config: {label: needs-triage}}
"""

SUB_PIPELINE_NAMED_LIKE_A_BUILT_IN = """\
pipelines:
  release:
    trigger: {event: issues.labeled, conditions: {label: release}}
    stages:
      - {id: run, type: pipeline, pipeline: triage}
  triage:
    stages:
      - {id: say, type: action, action: comment, config: {message: hi}}
"""


def test_a_pipeline_of_a_built_in_s_name_overrides_it_whole() -> None:
    pipelines = parse_files(_config(OVERRIDE)).config.pipelines

    assert overridden(pipelines, default_pipelines()) == ["triage"]
    assert override_problems(pipelines, default_pipelines()) == []
    assert [stage.id for stage in pipelines["triage"].stages] == ["ask"]  # nothing merged from the built-in


def test_a_sub_pipeline_named_like_a_built_in_is_refused_at_its_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_files(_config(SUB_PIPELINE_NAMED_LIKE_A_BUILT_IN))

    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.key_path) == (".squadron/config.yaml", 6, "pipelines.triage")
    assert problem.message.startswith(
        "'triage' is the name of a built-in default pipeline (started on issues.opened), which a pipeline "
        "of the same name overrides; this one is a sub-pipeline (no trigger)"
    )
