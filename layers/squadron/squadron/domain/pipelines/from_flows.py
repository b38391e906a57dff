"""A repository's approval flows as pipelines — pure (docs/pipelines.md, "Approval flows as
pipelines").

:func:`approval_pipelines` translates ``workflows/approval-flows.yaml`` into pipelines of the
``pipelines:`` format that gate a pull request the way the merge gate
(:mod:`squadron.domain.approval`) judges it, then merge it with the flow's method:

* a PR into a branch a rule names literally (``main``) gets the flow
  :func:`~squadron.domain.repo_config.flows.resolve_flow` gives that branch, as pipeline
  ``approval-<branch>`` triggered on ``pull_request.opened`` with ``base_branch``; every other PR
  gets ``approval-default`` (its first gate skips the branches a pipeline of their own covers);
* a required ``agent:<role>`` review is ``ci_status`` on ``squadron/<role>`` (the status the
  review agent posts, which is what the merge gate reads); a ``human_group:`` review and
  ``require_human`` are ``human_approved`` with the highest count; the required status checks
  (when ``require_ci_pass``) are ``ci_status``; a standing change request is
  ``no_changes_requested``;
* a protected path is a gate with ``condition: {paths_match: ...}`` adding its reviews; one that
  requires a human makes the run end, once its gates pass, without merging (a person merges);
* ``auto_merge`` (and no human required) ends with ``merge_pr`` (``method``, ``delete_branch``);
* ``escalation.on_timeout`` is each gate's ``timeout`` and ``on_timeout`` (notify, escalate).

What has no gate-check equivalent, or means something else in a pipeline, is a :class:`Note`
at its key path in approval-flows.yaml, never dropped silently. Every pipeline given is checked
by the same model and cross-pipeline checks as ``pipelines:`` (one that would not pass is left
out with a note), so what ``squadron validate --migrate`` prints loads and validates.

:func:`merge_governance` says, for a repository's own pipelines that merge, that the approval
flow still applies: ``merge_pr`` asks the merge gate.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from squadron.domain.pipelines.checks import check_pipelines
from squadron.domain.pipelines.flow_notes import (
    DEFAULT_NAME,
    ESCALATION_LABEL,
    GROUP_PREFIX,
    KeyPath,
    Note,
    flow_notes,
    is_literal,
)
from squadron.domain.pipelines.limits import (
    MAX_CONDITION_ITEMS,
    MAX_GATE_CONDITIONS,
    MAX_HUMAN_COUNT,
    MAX_ID_LENGTH,
    MAX_PIPELINES,
    MAX_STAGE_TIMEOUT,
)
from squadron.domain.pipelines.models import MergePrBranch, MergePrStage, ParallelStage, Pipeline
from squadron.domain.pipelines.templates import template_problem
from squadron.domain.repo_config.flows import AGENT_PREFIX, resolve_flow
from squadron.domain.repo_config.models import (
    ApprovalFlow,
    ApprovalFlowsFile,
    BranchRule,
    EscalationRule,
    ReviewRequirement,
)
from squadron.domain.repo_config.types import format_duration

USER_PREFIX = "user:"
#: Events that change what a waiting gate would judge (re-checked), and that end the run.
REEVALUATE_ON = (
    "pull_request_review.submitted",
    "pull_request_review.dismissed",
    "check_run.completed",
    "check_suite.completed",
    "status",
)
#: A branch name spelt inside the default pipeline's guard expression (no quote, backslash or brace).
_PLAIN_BRANCH = re.compile(r"[A-Za-z0-9._/@+#-]+")


@dataclass(frozen=True)
class Migration:
    """Approval flows as pipelines (each in the ``pipelines:`` format, as YAML would hold it)."""

    pipelines: dict[str, dict[str, Any]]
    notes: tuple[Note, ...]
    #: Each pipeline's source in approval-flows.yaml (``("default",)``, ``("branch_rules", i)``).
    sources: Mapping[str, KeyPath] = field(default_factory=dict)

    def without(self, names: Collection[str], why: str) -> Migration:
        """The same migration less the pipelines ``names``, each noted at its source with ``why``."""
        return Migration(
            {name: data for name, data in self.pipelines.items() if name not in names},
            (
                *self.notes,
                *(Note(self.sources.get(name, ()), f"no pipeline {name}: {why}") for name in names),
            ),
            {name: path for name, path in self.sources.items() if name not in names},
        )

    def models(self) -> dict[str, Pipeline]:
        return {name: Pipeline.model_validate(data) for name, data in self.pipelines.items()}


# --- names ---------------------------------------------------------------------------------------


def pipeline_name(branch: str, taken: Collection[str]) -> str:
    """``approval-<branch>`` as a pipeline name (letters, digits, ``_``, ``-``; at most 64
    characters), unlike every name in ``taken``."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", branch).strip("-") or "branch"
    name = f"approval-{slug}"
    if len(name) > MAX_ID_LENGTH or name in taken:
        digest = hashlib.sha256(branch.encode("utf-8")).hexdigest()[:8]
        name = f"{name[: MAX_ID_LENGTH - 9]}-{digest}"
    counter = 2
    base = name
    while name in taken:
        name = f"{base[: MAX_ID_LENGTH - 4]}-{counter}"
        counter += 1
    return name


# --- checks ------------------------------------------------------------------------------------


def _chunks(items: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def review_checks(reviews: Iterable[ReviewRequirement], *, require_human: bool) -> list[dict[str, Any]]:
    """The gate checks of required reviews (and ``require_human``): ``ci_status`` on
    ``squadron/<role>`` per agent review, one ``human_approved`` with the highest count."""
    checks: list[dict[str, Any]] = []
    humans = 1 if require_human else 0
    for review in reviews:
        if not review.required:
            continue
        if review.role.startswith(AGENT_PREFIX):
            checks.append(
                {"check": "ci_status", "workflows": [f"squadron/{review.role.removeprefix(AGENT_PREFIX)}"]}
            )
        else:
            humans = max(humans, review.min_approvals)
    if humans:
        checks.append({"check": "human_approved", "count": min(humans, MAX_HUMAN_COUNT)})
    return checks


def flow_checks(flow: ApprovalFlow) -> list[dict[str, Any]]:
    """Every check of ``flow`` that holds whatever the PR changes, in the merge gate's order."""
    checks: list[dict[str, Any]] = [{"check": "no_changes_requested"}]
    checks += review_checks(flow.required_reviews, require_human=flow.merge_policy.require_human)
    if flow.merge_policy.require_ci_pass:
        checks += [
            {"check": "ci_status", "workflows": chunk}
            for chunk in _chunks(flow.required_status_checks, MAX_CONDITION_ITEMS)
        ]
    return checks


def paths_condition(globs: Sequence[str]) -> dict[str, Any]:
    """``paths_match`` of ``globs`` (``any`` of several when they are more than one may hold)."""
    if len(globs) <= MAX_CONDITION_ITEMS:
        return {"paths_match": list(globs)}
    return {"any": [{"paths_match": chunk} for chunk in _chunks(globs, MAX_CONDITION_ITEMS)]}


def merges(flow: ApprovalFlow) -> bool:
    """Whether the framework merges under ``flow`` once its gates pass (else a person merges)."""
    return flow.merge_policy.auto_merge and not flow.merge_policy.require_human


def _timeout(rule: EscalationRule) -> dict[str, Any]:
    """A gate's ``timeout`` and ``on_timeout`` from ``escalation.on_timeout`` (none: no keys)."""
    if rule.hours is None:
        return {}
    seconds = max(1, min(int(rule.hours * 3600), MAX_STAGE_TIMEOUT))
    on_timeout: dict[str, Any] = {"then": "escalate"}
    groups = [who.removeprefix(GROUP_PREFIX) for who in rule.notify if who.startswith(GROUP_PREFIX)]
    if groups:
        on_timeout["notify"] = {
            "target": groups[0],
            "message": "The pull request waited too long for its approval flow's requirements.",
        }
    return {"timeout": format_duration(seconds), "on_timeout": on_timeout}


# --- one flow ----------------------------------------------------------------------------------


def flow_stages(flow: ApprovalFlow, *, skip: set[str] | None = None) -> list[dict[str, Any]]:
    """The stages of one resolved flow: its gates, the protected paths' gates, then the hand-over
    to a person or ``merge_pr``. ``skip``: base branches another pipeline covers (the first gate
    skips them, to the run's end)."""

    def timeout() -> dict[str, Any]:  # a copy per stage (YAML would print one as an alias)
        return copy.deepcopy(_timeout(flow.escalation.on_timeout))

    stages: list[dict[str, Any]] = []
    for index, chunk in enumerate(_chunks(flow_checks(flow), MAX_GATE_CONDITIONS)):
        stages.append(
            {
                "id": "approval" if index == 0 else f"approval-{index + 1}",
                "type": "gate",
                "conditions": chunk,
                **timeout(),
            }
        )
    if skip:
        names = ", ".join(f"'{branch}'" for branch in sorted(skip))
        stages[0] = {
            "id": stages[0]["id"],
            "type": "gate",
            "condition": {"expr": f"trigger.base_branch not in [{names}]"},
            "skip_to": "__complete__",
            **{k: v for k, v in stages[0].items() if k not in ("id", "type")},
        }
    human_globs: list[str] = []
    for number, protected in enumerate(flow.protected_paths, start=1):
        checks = review_checks(protected.required_reviews, require_human=protected.require_human)
        if protected.require_human:
            human_globs += [glob for glob in protected.paths if glob not in human_globs]
        for index, chunk in enumerate(_chunks(checks, MAX_GATE_CONDITIONS)):
            stages.append(
                {
                    "id": f"protected-{number}" if index == 0 else f"protected-{number}-{index + 1}",
                    "type": "gate",
                    "condition": paths_condition(protected.paths),
                    "conditions": chunk,
                    **timeout(),
                }
            )
    if merges(flow):
        if human_globs:
            stages.append(
                {
                    "id": "hand-over",
                    "type": "gate",
                    "condition": paths_condition(human_globs),
                    "conditions": [{"check": "human_approved", "count": 1}],
                    "on_pass": "__complete__",
                }
            )
        stages.append(
            {
                "id": "merge",
                "type": "action",
                "action": "merge_pr",
                "config": {
                    "method": flow.merge_policy.method,
                    "delete_branch": flow.merge_policy.delete_branch,
                },
            }
        )
    # a conditional stage skips to the one after it (the last: the run's end)
    for position, stage in enumerate(stages):
        if "condition" in stage and "skip_to" not in stage:
            stage["skip_to"] = stages[position + 1]["id"] if position + 1 < len(stages) else "__complete__"
    return stages


def flow_pipeline(
    flow: ApprovalFlow, *, branch: str | None, description: str, skip: set[str] | None = None
) -> dict[str, Any]:
    """One flow as a pipeline run for each pull request opened into ``branch`` (None: any)."""
    stages = flow_stages(flow, skip=skip)
    gates = [stage["id"] for stage in stages if stage["type"] == "gate"]
    trigger: dict[str, Any] = {"event": "pull_request.opened"}
    if branch is not None:
        trigger["conditions"] = {"base_branch": branch}
    on_events: dict[str, Any] = {event: {"action": "reevaluate_gates"} for event in REEVALUATE_ON}
    on_events["pull_request.synchronize"] = {
        "action": "invalidate_and_restart",
        "invalidate": gates,
        "restart_from": stages[0]["id"],
    }
    on_events["pull_request.closed"] = {"action": "cancel"}
    pipeline: dict[str, Any] = {
        "description": description,
        "scope": "single-pr",
        "trigger": trigger,
        "on_events": on_events,
        "stages": stages,
    }
    label = flow.escalation.on_timeout.label
    if flow.escalation.on_timeout.hours is not None and label and label != ESCALATION_LABEL:
        pipeline["on_error"] = [{"type": "label", "add": label}]
    return pipeline


# --- the whole file ----------------------------------------------------------------------------


def approval_pipelines(
    flows: ApprovalFlowsFile,
    *,
    roles: Collection[str],
    human_groups: Collection[str],
    existing: Collection[str] = (),
) -> Migration:
    """``flows`` as pipelines, named unlike ``existing`` (the repository's own), at most as many
    as ``pipelines:`` may hold beside them; each checked as ``pipelines:`` is."""
    notes = flow_notes(flows)
    room = MAX_PIPELINES - len(existing)
    taken = set(existing)
    branches: dict[str, tuple[int, BranchRule]] = {}
    for index, rule in enumerate(flows.branch_rules):
        if is_literal(rule.pattern):
            branches.setdefault(rule.pattern, (index, rule))
    named: dict[str, tuple[str, int, BranchRule]] = {}
    for branch, (index, rule) in branches.items():
        if len(named) + 1 >= room:
            notes.append(
                Note(
                    ("branch_rules", index, "pattern"),
                    f"no pipeline for {branch!r}: a repository holds at most {MAX_PIPELINES} pipelines "
                    f"(MAX_PIPELINES); PRs into it run {DEFAULT_NAME}, and the rule still applies "
                    "through merge_pr's merge gate",
                )
            )
            continue
        name = pipeline_name(branch, taken | {DEFAULT_NAME})
        taken.add(name)
        named[name] = (branch, index, rule)
    pipelines: dict[str, dict[str, Any]] = {}
    if room < 1:
        notes.append(
            Note(
                (),
                f"no pipeline at all: the repository already has {len(existing)} (MAX_PIPELINES {MAX_PIPELINES})",
            )
        )
        return Migration({}, tuple(notes), {})
    default_name = DEFAULT_NAME if DEFAULT_NAME not in existing else pipeline_name("default", taken)
    spelt = {branch for branch, _, _ in named.values() if _PLAIN_BRANCH.fullmatch(branch)}
    for branch, index, _ in named.values():
        if branch not in spelt:
            notes.append(
                Note(
                    ("branch_rules", index, "pattern"),
                    f"{branch!r} cannot be spelt in an expression: PRs into it also run {DEFAULT_NAME}",
                )
            )
    guard = "trigger.base_branch not in [" + ", ".join(f"'{b}'" for b in sorted(spelt)) + "]"
    skip = spelt
    if spelt and template_problem("{{ " + guard + " }}") is not None:
        notes.append(
            Note(
                ("branch_rules",),
                f"{DEFAULT_NAME} runs for every branch (the branches it would skip are too many for one "
                "expression): PRs into a branch of a rule also run the default flow's gates",
            )
        )
        skip = set()
    pipelines[default_name] = flow_pipeline(
        flows.default,
        branch=None,
        skip=skip,
        description="The default approval flow (workflows/approval-flows.yaml), as gates",
    )
    for name, (branch, _, rule) in named.items():
        pipelines[name] = flow_pipeline(
            resolve_flow(flows, branch),
            branch=branch,
            description=rule.description or f"The approval flow of PRs into {branch}, as gates",
        )
    kept: dict[str, dict[str, Any]] = {}
    sources: dict[str, KeyPath] = {}
    for name, data in pipelines.items():
        problem = _pipeline_problem(name, data, roles=roles, human_groups=human_groups)
        source: KeyPath = ("default",) if name == default_name else ("branch_rules", named[name][1])
        if problem is None:
            kept[name] = data
            sources[name] = source
        else:
            notes.append(Note(source, f"no pipeline {name}: it would not validate ({problem})"))
    return Migration(kept, tuple(notes), sources)


def _pipeline_problem(
    name: str, data: Mapping[str, Any], *, roles: Collection[str], human_groups: Collection[str]
) -> str | None:
    try:
        pipeline = Pipeline.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}"
    found = check_pipelines({name: pipeline}, roles=roles, human_groups=human_groups)
    if found:
        path, message = found[0]
        return f"{'.'.join(str(part) for part in path)}: {message}"
    return None


# --- merging: which governs --------------------------------------------------------------------


def _merge_stages(pipeline: Pipeline) -> list[tuple[KeyPath, Any]]:
    found: list[tuple[KeyPath, Any]] = []
    for index, stage in enumerate(pipeline.stages):
        if isinstance(stage, MergePrStage):
            found.append((("stages", index), stage))
        elif isinstance(stage, ParallelStage):
            found += [
                (("stages", index, "branches", number), branch)
                for number, branch in enumerate(stage.branches)
                if isinstance(branch, MergePrBranch)
            ]
    return found


def merge_governance(
    pipelines: Mapping[str, Pipeline], flows: ApprovalFlowsFile, *, flows_file: bool
) -> list[tuple[KeyPath, str]]:
    """For each ``merge_pr`` of a repository's pipelines: which approval flow still applies to
    its merge (``merge_pr`` asks the merge gate, which merges only when the flow is met), at its
    key path in config.yaml. ``flows_file``: the repository has workflows/approval-flows.yaml
    (else the documented default flow applies)."""
    found: list[tuple[KeyPath, str]] = []
    for name, pipeline in pipelines.items():
        branch = pipeline.trigger.conditions.base_branch if pipeline.trigger is not None else None
        for path, stage in _merge_stages(pipeline):
            if not flows_file:
                which = "the documented default approval flow (no workflows/approval-flows.yaml)"
            elif branch is None:
                which = "the approval flow of the PR's base branch (default + its branch rules)"
            else:
                rules = [rule.pattern for rule in flows.rules_for(branch)]
                which = (
                    f"the approval flow of {branch!r} (default"
                    + "".join(f" + rule {pattern!r}" for pattern in rules)
                    + ")"
                )
            method = (
                f"method {stage.config.method}" if stage.config.method is not None else "the flow's method"
            )
            found.append(
                (
                    ("pipelines", name, *path),
                    f"merge_pr ({method}) asks the merge gate, which also applies {which}: both "
                    "govern merging — the pipeline decides when to ask, the flow whether it merges "
                    '(docs/pipelines.md, "Approval flows as pipelines")',
                )
            )
    return found
