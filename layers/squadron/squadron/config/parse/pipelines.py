"""``pipelines:`` in config.yaml: what is read before the model, and the checks across pipelines.

Before validation (:func:`prepare_pipelines`): ``custom_gates`` (the reference's Python gate
classes) is refused with the reason, and a parallel branch without ``type`` is an agent branch,
as in the reference. After it (:func:`check_pipeline_references`): the pure
:func:`~squadron.domain.pipelines.checks.check_pipelines` against the repository's roles and
human groups, and :func:`~squadron.domain.pipelines.overrides.override_problems` against the
built-in default pipelines, each problem at its line and column. Pipeline problems carry their column
(:func:`with_columns`): a stage list is long, and ``file:line:col`` points at the key.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from squadron.config.default_pipelines import default_pipelines
from squadron.config.parse.documents import ParseContext
from squadron.config.parse.references import RoleDirectory
from squadron.config.parse.salvage import salvage
from squadron.config.yamlsource import KeyPath, LineMap, dotted
from squadron.domain.pipelines.checks import check_pipelines
from squadron.domain.pipelines.models import Pipeline, Stage
from squadron.domain.pipelines.overrides import override_problems
from squadron.domain.pipelines.types import ID_PATTERN, RESERVED_IDS
from squadron.domain.repo_config.constants import CONFIG_FILE
from squadron.domain.repo_config.errors import Problem

_STAGE: TypeAdapter[Any] = TypeAdapter(Stage)
_ID = re.compile(ID_PATTERN)

#: What ``custom_gates`` is told: the reference imports a Python class named in the file.
CUSTOM_GATES_PROBLEM = (
    "custom gate checks are not supported: the reference imports a Python module named in the "
    "configuration, and a repository's configuration never loads code into the framework "
    "(every repository's events run there). Use a built-in check (a command: `check: ci_status` "
    "on the CI job that runs it)"
)


def prepare_pipelines(ctx: ParseContext, raw: dict[str, Any], lines: LineMap) -> None:
    """Refuse ``custom_gates`` (top level or under ``pipeline_settings``) and give branches
    their default type, in ``raw`` (config.yaml merged over the defaults) before validation."""
    if "custom_gates" in raw:
        ctx.add(CONFIG_FILE, lines.line_of(("custom_gates",)), ("custom_gates",), CUSTOM_GATES_PROBLEM)
        del raw["custom_gates"]
    settings = raw.get("pipeline_settings")
    if isinstance(settings, dict) and "custom_gates" in settings:
        path = ("pipeline_settings", "custom_gates")
        ctx.add(CONFIG_FILE, lines.line_of(path), path, CUSTOM_GATES_PROBLEM)
        del settings["custom_gates"]
        if not settings:
            del raw["pipeline_settings"]
    pipelines = raw.get("pipelines")
    if not isinstance(pipelines, dict):
        return
    for pipeline in pipelines.values():
        stages = pipeline.get("stages") if isinstance(pipeline, dict) else None
        for stage in stages if isinstance(stages, list) else []:
            branches = stage.get("branches") if isinstance(stage, dict) else None
            for branch in branches if isinstance(branches, list) else []:
                if isinstance(branch, dict) and "type" not in branch:
                    branch["type"] = "agent"  # the reference's default


def salvage_pipelines(raw: Any) -> tuple[dict[str, Pipeline], list[KeyPath]]:
    """The pipelines of ``raw`` (config.yaml's ``pipelines:``) as far as they are valid, and the
    key paths left out to get them, so the checks across pipelines run in the same pass as the
    schema's problems.

    A stage the schema refuses stands in as a stage of the same id that does nothing (so the
    references to it, and the other stages' indexes, still hold); what else a pipeline refuses
    is removed as :func:`~squadron.config.parse.salvage.salvage` does.
    """
    if not isinstance(raw, dict):
        return {}, []
    pipelines: dict[str, Pipeline] = {}
    removed: list[KeyPath] = []
    for name, data in raw.items():
        at: KeyPath = ("pipelines", name)
        if not isinstance(name, str) or not isinstance(data, dict):
            removed.append(at)
            continue
        try:
            pipelines[name] = Pipeline.model_validate(data)
            continue
        except ValidationError:
            pass
        patched = copy.deepcopy(data)
        stages = patched.get("stages")
        if not isinstance(stages, list):
            stages = []
        for index, stage in enumerate(stages):
            try:
                _STAGE.validate_python(stage)
            except ValidationError:
                stage_id = stage.get("id") if isinstance(stage, dict) else None
                if not isinstance(stage_id, str) or not _ID.fullmatch(stage_id) or stage_id in RESERVED_IDS:
                    stage_id = f"invalid-stage-{index}"
                stages[index] = {
                    "id": stage_id,
                    "type": "delay",
                    "duration": 1,
                    "on_complete": "__complete__",
                }
                removed.append((*at, "stages", index))
        model, left_out = salvage(Pipeline, patched)
        removed.extend((*at, *path) for path in left_out)
        if model is None:
            removed.append(at)
        else:
            pipelines[name] = model
    return pipelines, removed


def check_pipeline_references(
    ctx: ParseContext, pipelines: Mapping[str, Pipeline], lines: LineMap, directory: RoleDirectory
) -> None:
    """Every problem across pipelines and with the repository's roles and human groups."""
    found = check_pipelines(pipelines, roles=directory.roles, human_groups=directory.human_groups)
    found += override_problems(pipelines, default_pipelines())
    for path, message in found:
        ctx.add(CONFIG_FILE, lines.line_of(path), path, message)


def with_columns(problems: list[Problem], file: str, lines: LineMap) -> list[Problem]:
    """``problems`` with the column of each one under ``pipelines`` in ``file`` filled in."""
    columns = {dotted(path): column for path, column in lines.columns.items()}
    known = {dotted(path) for path in lines.lines}
    result = []
    for problem in problems:
        if (
            problem.file == file
            and problem.column is None
            and problem.line is not None
            and _under_pipelines(problem)
        ):
            key = problem.key_path
            while key and key not in known:
                key = key.rpartition(".")[0]
            column = columns.get(key)
            if column is not None:
                result.append(
                    Problem(problem.file, problem.line, problem.key_path, problem.message, column=column)
                )
                continue
        result.append(problem)
    return result


def _under_pipelines(problem: Problem) -> bool:
    return problem.key_path == "pipelines" or problem.key_path.startswith("pipelines.")
