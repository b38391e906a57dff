"""What no one model sees: pipelines checked against each other and against the repository.

:func:`check_pipelines` takes the validated ``pipelines:``, the repository's roles and human
groups, and gives every problem as (key path, message), the key path from the top of
config.yaml (``("pipelines", "pr-lifecycle", "stages", 3, "on_fail", "goto")``) so the caller
puts it at its line. Checked, for every pipeline:

* stage and branch ids unique in the pipeline;
* every stage reference (``on_complete``, ``on_pass``, ``on_success``, ``on_fail``/``goto``,
  ``on_error.then``, ``skip_to``, ``on_conflict``, ``invalidate``, ``restart_from``) names a
  stage of the pipeline;
* roles (``agent:``) and human groups (``human.from``, ``notify.target``) exist;
* no loop of transitions without a bound (only a gate's ``on_fail`` loops, ``max_iterations``
  times);
* a stage's ``condition`` nests at most MAX_CONDITION_DEPTH deep; a delay polls a check it can run;
* no gate has a ``command`` check (the framework runs no repository's commands), and a gate's
  ``file_exists`` checks name at most MAX_GATE_PATHS paths;

and across pipelines: a sub-pipeline exists and has no trigger, no cycle of sub-pipelines,
nesting at most MAX_NESTING_DEPTH deep, and at most MAX_EXPANDED_STAGES stages once every
sub-pipeline is expanded in place.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from squadron.domain.pipelines.conditions import (
    CHECKS_WITH_REQUIRED_FIELDS,
    GATE_CHECKS,
    AllCondition,
    AnyCondition,
    CommandCheck,
)
from squadron.domain.pipelines.limits import (
    MAX_CONDITION_DEPTH,
    MAX_EXPANDED_STAGES,
    MAX_GATE_PATHS,
    MAX_NESTING_DEPTH,
)
from squadron.domain.pipelines.models import (
    AgentBranch,
    AgentStage,
    DelayStage,
    GateStage,
    Goto,
    HumanStage,
    InvalidateAndRestart,
    MergePrStage,
    Notify,
    NotifyHandler,
    OnFail,
    ParallelStage,
    Pipeline,
    PipelineBranch,
    PipelineStage,
    WebhookStage,
)
from squadron.domain.pipelines.repo_paths import paths_read
from squadron.domain.pipelines.templates import template_problem
from squadron.domain.pipelines.types import SPECIAL_TARGETS

#: What labels an edge of a graph searched for cycles (a stage's transition key, a call's path).
Label = TypeVar("Label")

KeyPath = tuple[str | int, ...]
Found = tuple[KeyPath, str]


def check_pipelines(
    pipelines: Mapping[str, Pipeline], *, roles: Collection[str], human_groups: Collection[str]
) -> list[Found]:
    """Every problem of ``pipelines`` that crosses models (see the module's docstring)."""
    found: list[Found] = []
    for name, pipeline in pipelines.items():
        found.extend(_pipeline_problems(("pipelines", name), pipeline, roles, human_groups))
    found.extend(_sub_pipeline_problems(pipelines))
    return found


def _hint(value: str, choices: Iterable[str]) -> str:
    names = [name for name in choices if len(name) <= 64]
    if len(value) > 64 or len(names) > 200:
        return ""
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- one pipeline --------------------------------------------------------------------------------


def _pipeline_problems(
    at: KeyPath, pipeline: Pipeline, roles: Collection[str], human_groups: Collection[str]
) -> Iterator[Found]:
    checker = _Checker(at, pipeline, roles, human_groups)
    yield from checker.ids()
    for index, stage in enumerate(pipeline.stages):
        yield from checker.stage((*at, "stages", index), stage)
    for event, handler in pipeline.on_events.items():
        yield from checker.handler((*at, "on_events", event), handler)
    yield from _unbounded_loops(at, pipeline)
    yield from _free_form_templates(at, pipeline)


class _Checker:
    """The checks of one pipeline against its own stages and the repository's names."""

    def __init__(
        self, at: KeyPath, pipeline: Pipeline, roles: Collection[str], human_groups: Collection[str]
    ) -> None:
        self.at = at
        self.pipeline = pipeline
        self.roles = roles
        self.human_groups = human_groups
        self.stage_ids: dict[str, KeyPath] = {}
        for index, stage in enumerate(pipeline.stages):
            self.stage_ids.setdefault(stage.id, (*at, "stages", index, "id"))

    def ids(self) -> Iterator[Found]:
        seen: dict[str, KeyPath] = {}
        for index, stage in enumerate(self.pipeline.stages):
            path = (*self.at, "stages", index, "id")
            if stage.id in seen:
                yield path, f"duplicate stage id {stage.id!r} (first at {_dotted(seen[stage.id])})"
            else:
                seen[stage.id] = path
        for index, stage in enumerate(self.pipeline.stages):
            for b_index, branch in enumerate(stage.branches if isinstance(stage, ParallelStage) else []):
                path = (*self.at, "stages", index, "branches", b_index, "id")
                if branch.id in seen:
                    yield (
                        path,
                        f"duplicate id {branch.id!r} (first at {_dotted(seen[branch.id])}): branch ids "
                        "are unique among the pipeline's stages and branches",
                    )
                else:
                    seen[branch.id] = path

    def stage_ref(self, path: KeyPath, target: str, *, special: bool = True) -> Iterator[Found]:
        if target in self.stage_ids or (special and target in SPECIAL_TARGETS):
            return
        yield (
            path,
            f"unknown stage {target!r}{_hint(target, self.stage_ids)}: the pipeline's stages are "
            + ", ".join(self.stage_ids),
        )

    def role(self, path: KeyPath, name: str) -> Iterator[Found]:
        if name not in self.roles:
            yield path, f"unknown role {name!r}{_hint(name, self.roles)} (a key of roles)"

    def group(self, path: KeyPath, name: str | None) -> Iterator[Found]:
        if name is not None and name not in self.human_groups:
            yield (
                path,
                f"unknown human group {name!r}{_hint(name, self.human_groups)} (define it under human_groups)",
            )

    def notify(self, path: KeyPath, value: Notify | None) -> Iterator[Found]:
        if value is not None:
            yield from self.group((*path, "target"), value.target)

    def stage(self, here: KeyPath, stage: Any) -> Iterator[Found]:
        for key in ("on_complete", "on_pass", "on_success"):
            value = getattr(stage, key, None)
            if isinstance(value, str):
                yield from self.stage_ref((*here, key), value)
            elif isinstance(value, Goto):
                yield from self.stage_ref((*here, key, "goto"), value.goto)
        if stage.skip_to is not None:
            yield from self.stage_ref((*here, "skip_to"), stage.skip_to)
            if stage.condition is None:
                yield (*here, "skip_to"), "skip_to has no effect without a condition"
        if stage.on_error is not None and stage.on_error.then not in (None, "escalate", "fail"):
            yield from self.stage_ref((*here, "on_error", "then"), str(stage.on_error.then))
        if stage.on_timeout is not None:
            yield from self.notify((*here, "on_timeout", "notify"), stage.on_timeout.notify)
        if stage.condition is not None:
            yield from _condition_depth((*here, "condition"), stage.condition, 1)
        yield from self.typed(here, stage)

    def typed(self, here: KeyPath, stage: Any) -> Iterator[Found]:
        """What only some stage types have."""
        if isinstance(stage, GateStage):
            yield from _gate_checks(here, stage)
            if isinstance(stage.on_fail, str):
                yield from self.stage_ref((*here, "on_fail"), stage.on_fail)
            elif isinstance(stage.on_fail, OnFail):
                yield from self.stage_ref((*here, "on_fail", "goto"), stage.on_fail.goto)
        elif isinstance(stage, MergePrStage) and stage.on_conflict is not None:
            yield from self.stage_ref((*here, "on_conflict"), stage.on_conflict)
        elif isinstance(stage, AgentStage):
            yield from self.role((*here, "agent"), stage.agent)
        elif isinstance(stage, HumanStage):
            yield from self.group((*here, "human", "from"), stage.human.from_)
        elif isinstance(stage, DelayStage) and stage.poll is not None and stage.poll.check is not None:
            check = stage.poll.check
            if check not in GATE_CHECKS:
                yield (*here, "poll", "check"), f"unknown check {check!r}{_hint(check, GATE_CHECKS)}"
            elif check in CHECKS_WITH_REQUIRED_FIELDS:
                yield (
                    (*here, "poll", "check"),
                    f"{check!r} needs fields of its own: poll a check without "
                    "(ci_status, branch_up_to_date...) or a condition",
                )
        elif isinstance(stage, ParallelStage):
            for b_index, branch in enumerate(stage.branches):
                b_here = (*here, "branches", b_index)
                if isinstance(branch, AgentBranch):
                    yield from self.role((*b_here, "agent"), branch.agent)
                if branch.condition is not None:
                    yield from _condition_depth((*b_here, "condition"), branch.condition, 1)

    def handler(self, here: KeyPath, handler: Any) -> Iterator[Found]:
        if isinstance(handler, InvalidateAndRestart):
            for index, target in enumerate(handler.invalidate):
                yield from self.stage_ref((*here, "invalidate", index), target, special=False)
            if handler.restart_from != "current":
                yield from self.stage_ref((*here, "restart_from"), handler.restart_from, special=False)
        if isinstance(handler, NotifyHandler):
            yield from self.notify((*here, "notify"), handler.notify)


#: What ``check: command`` is told (docs/pipelines.md, "Extensions and deviations").
COMMAND_PROBLEM = (
    "`command` is not run by Squadron: a gate is judged by the framework's router, which runs "
    "every repository's events on AWS Lambda and never runs a repository's commands (nor waits on "
    "an agent). Run the command in CI and gate on its job with `check: ci_status` "
    "(`workflows: [<its check name>]`), or ask an agent stage to run it in its sandbox"
)


def _gate_checks(here: KeyPath, stage: GateStage) -> Iterator[Found]:
    """A gate's ``command`` checks (refused), and the paths its ``file_exists`` checks read."""
    key = "conditions" if stage.conditions is not None else "any_of"
    checks = stage.conditions if stage.conditions is not None else stage.any_of or []
    for index, check in enumerate(checks):
        if isinstance(check, CommandCheck):
            yield (*here, key, index, "check"), COMMAND_PROBLEM
    paths = paths_read(checks)
    if len(paths) > MAX_GATE_PATHS:
        yield (
            (*here, key),
            f"its file_exists checks name {len(paths)} paths, over the limit of {MAX_GATE_PATHS} "
            "(MAX_GATE_PATHS)",
        )


def _free_form_templates(at: KeyPath, pipeline: Pipeline) -> Iterator[Found]:
    """Templates inside free-form values (``context:``, a webhook's ``body``), which no field type checks."""
    values: list[tuple[KeyPath, Any]] = [((*at, "context"), pipeline.context)]
    for index, stage in enumerate(pipeline.stages):
        here = (*at, "stages", index)
        values.append(((*here, "context"), stage.context))
        if isinstance(stage, WebhookStage):
            values.append(((*here, "request", "body"), stage.request.body))
        if isinstance(stage, ParallelStage):
            for b_index, branch in enumerate(stage.branches):
                if isinstance(branch, PipelineBranch):
                    values.append(((*here, "branches", b_index, "context"), branch.context))
    for event, handler in pipeline.on_events.items():
        values.append(((*at, "on_events", event, "context"), handler.context))
    for path, value in values:
        stack: list[tuple[KeyPath, Any]] = [(path, value)]
        while stack:
            where, item = stack.pop()
            if isinstance(item, str):
                problem = template_problem(item)
                if problem is not None:
                    yield where, f"template {problem}"
            elif isinstance(item, dict):
                stack.extend(((*where, str(key)), child) for key, child in item.items())
            elif isinstance(item, list):
                stack.extend(((*where, i), child) for i, child in enumerate(item))


def _condition_depth(path: KeyPath, condition: Any, depth: int) -> Iterator[Found]:
    if depth > MAX_CONDITION_DEPTH:
        yield path, f"conditions nest more than {MAX_CONDITION_DEPTH} levels deep (MAX_CONDITION_DEPTH)"
        return
    if isinstance(condition, AnyCondition | AllCondition):
        key = "any" if isinstance(condition, AnyCondition) else "all"
        for index, sub in enumerate(getattr(condition, key)):
            yield from _condition_depth((*path, key, index), sub, depth + 1)


def _transitions(stage: BaseModel) -> Iterator[tuple[str, str]]:
    """(key, target stage) of each transition of ``stage`` that may repeat without a bound."""
    for key in ("on_complete", "on_pass", "on_success", "skip_to", "on_conflict"):
        value = getattr(stage, key, None)
        if isinstance(value, str):
            yield key, value
        elif isinstance(value, Goto):
            yield key, value.goto
    on_error = getattr(stage, "on_error", None)
    if on_error is not None and on_error.then not in (None, "escalate", "fail"):
        yield "on_error", on_error.then


def _unbounded_loops(at: KeyPath, pipeline: Pipeline) -> Iterator[Found]:
    """A cycle of transitions none of which is bounded (a gate's ``on_fail`` is, by max_iterations)."""
    index_of = {stage.id: index for index, stage in enumerate(pipeline.stages)}
    if len(index_of) != len(pipeline.stages):
        return  # duplicate ids: which stage a transition names is unknown (the duplicate is told)
    edges: dict[str, list[tuple[str | None, str]]] = {}
    for index, stage in enumerate(pipeline.stages):
        explicit: list[tuple[str | None, str]] = [
            (key, target) for key, target in _transitions(stage) if target in index_of
        ]
        onward = any(
            getattr(stage, key, None) is not None for key in ("on_complete", "on_pass", "on_success")
        )
        if not onward and index + 1 < len(pipeline.stages):
            explicit.append((None, pipeline.stages[index + 1].id))  # falls through to the next stage
        edges.setdefault(stage.id, explicit)
    for node, key, loop in _closing_edges(edges):
        where: KeyPath = (*at, "stages", index_of[node])
        yield (
            where if key is None else (*where, key),
            f"the stages loop ({' -> '.join(loop)}) with no bound: loop back through a gate's "
            "on_fail (goto, max_iterations) so the run cannot go round forever",
        )


def _closing_edges(
    edges: Mapping[str, Sequence[tuple[Label, str]]],
) -> Iterator[tuple[str, Label, list[str]]]:
    """(node, the edge's label, the loop) for every edge that closes a cycle of ``edges`` (a node's
    labelled edges to other nodes; targets that are not nodes are left out).

    Colour-marking depth-first search, iterative (no recursion limit for a hostile config): each
    cycle is found once, at the edge closing it.
    """
    state: dict[str, int] = {}
    for start in edges:
        if state.get(start):
            continue
        stack: list[tuple[str, Iterator[tuple[Label, str]]]] = [(start, iter(edges[start]))]
        trail = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            step = next(children, None)
            if step is None:
                state[node] = 2
                stack.pop()
                trail.pop()
                continue
            label, target = step
            if target not in edges:
                continue
            if state.get(target) == 1:
                yield node, label, [*trail[trail.index(target) :], target]
            elif not state.get(target):
                state[target] = 1
                trail.append(target)
                stack.append((target, iter(edges[target])))


# --- across pipelines ----------------------------------------------------------------------------


def _sub_pipeline_calls(pipeline: Pipeline) -> Iterator[tuple[KeyPath, str]]:
    """(path of the ``pipeline:`` key, the pipeline named) of every sub-pipeline call."""
    for index, stage in enumerate(pipeline.stages):
        if isinstance(stage, PipelineStage):
            yield ("stages", index, "pipeline"), stage.pipeline
        if isinstance(stage, ParallelStage):
            for b_index, branch in enumerate(stage.branches):
                if isinstance(branch, PipelineBranch):
                    yield ("stages", index, "branches", b_index, "pipeline"), branch.pipeline


def _sub_pipeline_problems(pipelines: Mapping[str, Pipeline]) -> Iterator[Found]:
    calls = {name: list(_sub_pipeline_calls(pipeline)) for name, pipeline in pipelines.items()}
    for name, called in calls.items():
        for path, target in called:
            where = ("pipelines", name, *path)
            if target not in pipelines:
                yield where, f"unknown pipeline {target!r}{_hint(target, pipelines)}"
            elif pipelines[target].trigger is not None:
                yield (
                    where,
                    f"pipeline {target!r} has a trigger: a sub-pipeline has none (it runs only when called)",
                )
    graph = {name: [target for _, target in called if target in pipelines] for name, called in calls.items()}
    in_cycle = _report_cycles(graph, calls)
    yield from in_cycle.problems
    depth: dict[str, int] = {}
    size: dict[str, int] = {}
    for name in pipelines:
        if name in in_cycle.names:
            continue
        _measure(name, pipelines, graph, depth, size)
    for name, pipeline in pipelines.items():
        if name in in_cycle.names:
            continue
        if depth[name] > MAX_NESTING_DEPTH:
            path, target = next((p, t) for p, t in calls[name] if depth.get(t, 0) + 1 == depth[name])
            yield (
                ("pipelines", name, *path),
                f"sub-pipelines nest {depth[name]} levels deep from here, over the limit of {MAX_NESTING_DEPTH} (MAX_NESTING_DEPTH)",
            )
        elif size[name] > MAX_EXPANDED_STAGES and (pipeline.trigger is not None or not _called(name, graph)):
            yield (
                ("pipelines", name),
                f"runs {size[name]} stages once its sub-pipelines are expanded, over the limit of "
                f"{MAX_EXPANDED_STAGES} (MAX_EXPANDED_STAGES)",
            )


def _called(name: str, graph: Mapping[str, list[str]]) -> bool:
    return any(name in targets for targets in graph.values())


class _Cycles:
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.problems: list[Found] = []


def _report_cycles(graph: Mapping[str, list[str]], calls: Mapping[str, list[tuple[KeyPath, str]]]) -> _Cycles:
    """Every pipeline on a cycle of sub-pipeline calls, and one problem per call closing one."""
    result = _Cycles()
    for node, path, loop in _closing_edges(calls):
        result.names.update(loop)
        result.problems.append(
            (
                ("pipelines", node, *path),
                f"sub-pipeline cycle: {' -> '.join(loop)} (a pipeline cannot run itself)",
            )
        )
    # What reaches a cycle cannot be measured either (it never ends).
    changed = True
    while changed:
        changed = False
        for name, targets in graph.items():
            if name not in result.names and any(target in result.names for target in targets):
                result.names.add(name)
                changed = True
    return result


def _measure(
    name: str,
    pipelines: Mapping[str, Pipeline],
    graph: Mapping[str, list[str]],
    depth: dict[str, int],
    size: dict[str, int],
) -> None:
    """Nesting depth and expanded stage count of ``name`` (an acyclic part of the graph), memoised."""
    order: list[str] = []
    stack = [(name, False)]
    while stack:
        node, done = stack.pop()
        if node in depth:
            continue
        if done:
            order.append(node)
            children = graph[node]
            depth[node] = max((depth[child] + 1 for child in children), default=0)
            total = 0
            for stage in pipelines[node].stages:
                total += 1
                if isinstance(stage, PipelineStage) and stage.pipeline in size:
                    total += size[stage.pipeline]
                if isinstance(stage, ParallelStage):
                    for branch in stage.branches:
                        total += 1
                        if isinstance(branch, PipelineBranch) and branch.pipeline in size:
                            total += size[branch.pipeline]
            size[node] = total
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in graph[node] if child not in depth)


def _dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)
