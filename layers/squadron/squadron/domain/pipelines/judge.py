"""What a gate, a stage's ``condition`` and a delay's poll answer — pure (docs/pipelines.md,
"What the router carries out").

The router reads what GitHub says now about the run's pull request or issue (:class:`Facts`) and
this module judges, with nothing read here:

* :func:`condition_holds` — a stage's ``condition`` (``labels_include``, ``paths_match``,
  ``expr``, a ``{{ template }}``, ``any`` / ``all``) against the facts and the run's data;
* :func:`check_problem` — one gate check of the registry (:data:`~.conditions.GATE_CHECKS`):
  None when it passes, else why not, in words a person reads in the run's history; reviews,
  agent verdicts and CI count only from whom the merge gate trusts (:mod:`.authority`);
* :func:`judge_gate` — a gate's ``conditions`` (all must pass) or ``any_of`` (one must), with
  every failing check named.

What a task is answered (the compiled state machine's Choice states read it,
:mod:`.compile`): ``{"passed": true}``, ``{"passed": false, "failing": [...]}``,
``{"skipped": true}`` when the stage's condition is false; ``{}`` for a condition that holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from squadron.domain.pipelines.authority import agent_approvals, human_reviews, trusted_checks
from squadron.domain.pipelines.conditions import (
    AllCondition,
    AnyCondition,
    BranchUpToDateCheck,
    CiStatusCheck,
    CommandCheck,
    ExprCondition,
    FileExistsCheck,
    HumanApprovedCheck,
    LabelPresentCheck,
    LabelsIncludeCondition,
    NoChangesRequestedCheck,
    PathsMatchCondition,
    PrApprovalsMetCheck,
)
from squadron.domain.pipelines.templates import PipelineTemplateError, render
from squadron.domain.repo_config.globs import path_matches

#: Check-run conclusions and commit-status states, as one vocabulary.
_STATUS_AS_CONCLUSION = {"success": "success", "failure": "failure", "error": "failure", "pending": None}


@dataclass(frozen=True)
class Review:
    login: str
    state: str
    #: Written by a bot (GitHub's user type, or a ``[bot]`` login): never counts.
    bot: bool
    #: When it was submitted (ISO text; GitHub's order when equal).
    submitted_at: str = ""


@dataclass(frozen=True)
class CheckResult:
    """A check run or a commit status of the head: its name and conclusion (None: not done), and
    its source (:mod:`.authority` decides which count)."""

    name: str
    conclusion: str | None
    kind: Literal["check_run", "status"] = "check_run"
    #: A check run's App (its slug: ``github-actions`` for a workflow's job).
    app: str = ""
    #: A status's creator, when GitHub names it ("" when it does not: the combined status).
    creator: str = ""


@dataclass(frozen=True)
class Facts:
    """What GitHub says now about the issue or pull request a task names (read by the shell)."""

    number: int
    labels: frozenset[str] = frozenset()
    is_pull: bool = False
    #: Changed files (a pull request's; empty for an issue).
    files: tuple[str, ...] = ()
    #: Every review, oldest first.
    reviews: tuple[Review, ...] = ()
    #: The pull request's author (their own review never counts).
    author: str = ""
    #: The repository permission of each reviewer the shell asked GitHub about (at most
    #: MAX_REVIEWERS_CHECKED; one missing is unknown: their review counts for nothing).
    permissions: Mapping[str, str] = field(default_factory=dict)
    #: The App's own login (its statuses carry the agents' verdicts).
    app_login: str = ""
    #: The head is a fork's (its ``pull_request`` workflows are the fork's own).
    fork: bool = False
    checks: tuple[CheckResult, ...] = ()
    #: GitHub's ``mergeable_state`` (``behind``, ``clean``, ``blocked``, ``dirty``, ``unknown``...).
    mergeable_state: str = "unknown"
    state: str = "open"
    head_sha: str = ""
    #: Pull requests other than the run's a check names with ``pr`` (read by the shell first).
    others: Mapping[int, Facts] = field(default_factory=dict)
    #: Whether each path a ``file_exists`` check names exists at the head (an issue's: the
    #: default branch), as GitHub answered; a path missing here was not read.
    present: Mapping[str, bool] = field(default_factory=dict)


def namespaces(data: Mapping[str, Any]) -> dict[str, Any]:
    """A task's input (``trigger``, ``context``, ``stages``, ``branches``) as the templates'
    namespaces; what is missing reads as empty."""
    return {name: data.get(name) or {} for name in ("context", "trigger", "stages", "branches")}


def _truthy(value: Any) -> bool:
    return bool(value) and value not in ("false", "False", "0", "no")


def condition_holds(condition: Any, facts: Facts, data: Mapping[str, Any]) -> bool:
    """Whether ``condition`` (a model of :data:`~.conditions.Condition`) holds. Raises
    :class:`~.templates.PipelineTemplateError` when an expression cannot be evaluated."""
    match condition:
        case AnyCondition(any=items):
            return any(condition_holds(item, facts, data) for item in items)
        case AllCondition(all=items):
            return all(condition_holds(item, facts, data) for item in items)
        case LabelsIncludeCondition(labels_include=label):
            return label in facts.labels
        case PathsMatchCondition(paths_match=globs):
            return any(path_matches(glob, path) for glob in globs for path in facts.files)
        case ExprCondition(expr=expression):
            return _truthy(render("{{ " + expression + " }}", namespaces(data)))
        case str():
            return _truthy(render(condition, namespaces(data)))
    raise TypeError(f"not a condition: {condition!r}")  # pragma: no cover - the model's union


def _approvals(facts: Facts, scope: str) -> tuple[int, str]:
    """How many approvals of ``scope`` count (:mod:`.authority`), and what did not, in words."""
    humans = human_reviews(facts) if scope != "agents" else None
    agents = agent_approvals(facts) if scope != "humans" else []
    have = len(agents) + (len(humans.approvals()) if humans is not None else 0)
    notes = []
    if humans is not None and humans.ignored:
        notes.append("not counted: " + ", ".join(humans.ignored))
    if humans is not None and humans.unchecked:
        notes.append(f"access of {len(humans.unchecked)} reviewer(s) unchecked (MAX_REVIEWERS_CHECKED)")
    return have, f" ({'; '.join(notes)})" if notes else ""


def _target(check: Any, facts: Facts, data: Mapping[str, Any]) -> tuple[Facts | None, str]:
    """The facts of the pull request a check names (``pr``), or the run's; and how to name it."""
    if check.pr is None:
        return facts, f"#{facts.number}"
    value = render(check.pr, namespaces(data)) if isinstance(check.pr, str) else check.pr
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None, f"pr {value!r}"
    if number == facts.number:
        return facts, f"#{number}"
    return facts.others.get(number), f"#{number}"


def check_problem(check: Any, facts: Facts, data: Mapping[str, Any]) -> str | None:
    """None when the gate check passes against ``facts``; else why not."""
    name = check.check
    try:
        target, which = _target(check, facts, data)
    except PipelineTemplateError as exc:
        return f"{name}: {exc}"
    if target is None:
        return f"{name}: {which} was not read (not a pull request of this repository)"
    match check:
        case LabelPresentCheck(label=label):
            return None if label in target.labels else f"label_present: {which} has no label {label!r}"
        case PrApprovalsMetCheck(count=count, scope=scope):
            have, notes = _approvals(target, scope)
            whose = "" if scope == "all" else f" from {scope}"
            return (
                None
                if have >= count
                else f"pr_approvals_met: {which} has {have} approval(s){whose}, needs {count}{notes}"
            )
        case HumanApprovedCheck(count=count):
            have, notes = _approvals(target, "humans")
            return (
                None
                if have >= count
                else f"human_approved: {which} has {have} human approval(s), needs {count}{notes}"
            )
        case NoChangesRequestedCheck():
            reviews = human_reviews(target)
            asking = reviews.changes_requested()
            if asking:
                return f"no_changes_requested: changes requested on {which} by {', '.join(asking)}"
            if reviews.unchecked_changes:
                return (
                    f"no_changes_requested: {which} has change requests of "
                    f"{len(reviews.unchecked_changes)} reviewer(s) whose access is unchecked "
                    "(past MAX_REVIEWERS_CHECKED)"
                )
            return None
        case CiStatusCheck(workflows=workflows, expect=expect):
            return _ci_problem(target, which, list(workflows), expect)
        case BranchUpToDateCheck():
            if not target.is_pull:
                return f"branch_up_to_date: {which} is not a pull request"
            return (
                f"branch_up_to_date: {which} is behind its base branch"
                if target.mergeable_state == "behind"
                else None
            )
        case FileExistsCheck(paths=paths):
            return _files_problem(target, which, paths)
        case CommandCheck():
            # refused by validation (checks.COMMAND_PROBLEM): a definition that has one is not published
            return f"{name}: not run by Squadron (use ci_status on the CI job that runs it)"
    return f"{name}: unknown check"  # pragma: no cover - the model's union


def _files_problem(target: Facts, which: str, paths: Sequence[str]) -> str | None:
    where = f"{which}'s head {target.head_sha[:12]}" if target.is_pull else f"{which}'s default branch"
    unread = [path for path in paths if path not in target.present]
    missing = [path for path in paths if target.present.get(path) is False]
    parts = []
    if missing:
        parts.append("missing: " + ", ".join(missing))
    if unread:
        parts.append("not read: " + ", ".join(unread))
    return f"file_exists at {where}: " + "; ".join(parts) if parts else None


def _ci_problem(target: Facts, which: str, workflows: list[str], expect: str) -> str | None:
    if not target.is_pull:
        return f"ci_status: {which} is not a pull request"
    by_name: dict[str, str | None] = {}
    trusted, untrusted = trusted_checks(target)
    for result in trusted:
        conclusion = _STATUS_AS_CONCLUSION.get(result.conclusion or "pending", result.conclusion)
        # a name reported twice (re-run) counts as failing while any copy is not the expected one
        if by_name.get(result.name, expect) == expect:
            by_name[result.name] = conclusion
    wanted = workflows or sorted(by_name)
    ignored = f" (not counted: {', '.join(untrusted)})" if untrusted else ""
    if not wanted:
        return f"ci_status: no checks reported on {which}'s head {target.head_sha[:12]}{ignored}"
    missing = [name for name in wanted if name not in by_name]
    pending = [name for name in wanted if name in by_name and by_name[name] is None]
    wrong = [f"{name} ({by_name[name]})" for name in wanted if by_name.get(name) not in (None, expect)]
    parts = []
    if missing:
        parts.append("not reported: " + ", ".join(missing))
    if pending:
        parts.append("pending: " + ", ".join(pending))
    if wrong:
        parts.append(f"not {expect}: " + ", ".join(wrong))
    return f"ci_status on {which}: " + "; ".join(parts) + ignored if parts else None


@dataclass(frozen=True)
class GateJudgement:
    passed: bool
    #: Every failing check, in the gate's order (a passed ``any_of`` names none).
    failing: tuple[str, ...]

    def output(self) -> dict[str, Any]:
        """The task's answer (the state machine reads ``passed``)."""
        if self.passed:
            return {"passed": True}
        return {"passed": False, "failing": list(self.failing)}


def judge_gate(
    checks: Sequence[Any], facts: Facts, data: Mapping[str, Any], *, any_of: bool = False
) -> GateJudgement:
    """A gate's checks: all must pass (``conditions``), or one (``any_of``)."""
    problems = [check_problem(check, facts, data) for check in checks]
    failing = tuple(problem for problem in problems if problem is not None)
    passed = len(failing) < len(problems) if any_of else not failing
    return GateJudgement(passed, () if passed else failing)
