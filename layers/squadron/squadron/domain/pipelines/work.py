"""What the router does for a pipeline's task — pure (docs/pipelines.md, "What the router carries
out").

A compiled pipeline's waiting task (:class:`~squadron.domain.pipeline_wire.PipelineTask`) asks
for a stage's work or a step around it; :func:`plan` says what that work is, from the task alone:

* :class:`Judge` — a gate stage, a stage's ``condition`` step, a delay's ``poll``, and the
  condition of an action or webhook stage (the router answers ``skipped`` for those itself):
  read what GitHub says now (:class:`~.judge.Facts`), then :func:`judged`;
* :class:`Act` — an action stage or branch, the pipeline's ``on_complete`` / ``on_error``
  actions, an escalation, a timeout's ``notify``, a human stage's reminder: outside effects
  (:mod:`squadron.domain.effects`) the router commits and carries out under the task's key, and
  the answer it gives once they are done;
* :class:`Call` — a webhook stage: the request, templates resolved (the address was checked
  when the configuration was read; where its host resolves is the adapter's to check);
* :class:`~.agent_stage.Wake` — an agent stage or branch: put the stage's role to work on the
  run's issue and wait for it (:mod:`.agent_stage`; the shell keeps the token with the agent);
* :class:`Refuse` — what the router does not carry out (a human stage where no waits are wired:
  :mod:`squadron.shell.human_stages` keeps them; a task it cannot read): failed with the reason.

Every text a template renders comes from the repository's configuration and the run's data; the
App posts it as itself, and :mod:`squadron.adapters.github.for_router` makes it inert (no hidden
marker can ride along).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from squadron.domain.effects import AddLabels, CloseIssue, EvaluateMerge, Outside, PostComment, RemoveLabel
from squadron.domain.pipeline_wire import (
    STAGE_FAILED,
    STAGE_REJECTED,
    TASK_INVALID,
    PipelineTask,
    StageAnswer,
    StageFailed,
    StageSucceeded,
)
from squadron.domain.pipelines.agent_stage import Wake, subject_of, wake_of
from squadron.domain.pipelines.conditions import Condition, GateCheck
from squadron.domain.pipelines.judge import Facts, condition_holds, judge_gate, namespaces
from squadron.domain.pipelines.models import (
    ActionBranch,
    ActionStage,
    AddLabelBranch,
    AddLabelStage,
    ClosePrBranch,
    ClosePrStage,
    CommentAction,
    CommentBranch,
    CommentStage,
    GateStage,
    LabelAction,
    LifecycleAction,
    MergePrBranch,
    MergePrStage,
    Notify,
    Poll,
    Reminder,
    RemoveLabelBranch,
    RemoveLabelStage,
    WebhookStage,
)
from squadron.domain.pipelines.templates import PipelineTemplateError, render
from squadron.domain.pipelines.webhook_outputs import outputs_of

#: Whose words the App's pipeline comments are (the framework's, as an escalation's).
AUTHOR = "framework"
#: The label an escalation puts on the run's issue or pull request (the routing policy's default).
ESCALATION_LABEL = "needs-human"

_GATE = TypeAdapter(GateStage)
_ACTION_STAGE: TypeAdapter[Any] = TypeAdapter(ActionStage)
_ACTION_BRANCH: TypeAdapter[Any] = TypeAdapter(ActionBranch)
_WEBHOOK = TypeAdapter(WebhookStage)
_CONDITION: TypeAdapter[Any] = TypeAdapter(Condition)
_CHECK: TypeAdapter[Any] = TypeAdapter(GateCheck)
_LIFECYCLE: TypeAdapter[list[Any]] = TypeAdapter(list[LifecycleAction])
_POLL = TypeAdapter(Poll)
_NOTIFY = TypeAdapter(Notify)
_REMINDER = TypeAdapter(Reminder)


@dataclass(frozen=True)
class Where:
    """The repository a run acts on (its task names only its id; the shell looks the rest up)."""

    repo_full_name: str
    installation_id: int | None


@dataclass(frozen=True)
class Judge:
    """Judge against what GitHub says now: the gate's ``checks`` (with ``any_of``), or only the
    ``condition`` (a condition step, a poll's condition, an action or webhook stage's own)."""

    checks: tuple[Any, ...] = ()
    any_of: bool = False
    condition: Any = None
    #: What the answer is when the judgement holds / when it does not (see :func:`judged`).
    kind: str = "gate"
    #: The stage's work after a condition that holds (an action, webhook or agent stage): done next.
    then: Act | Call | Wake | None = None


@dataclass(frozen=True)
class Act:
    """Outside effects, then ``output`` (the stage's answer once they are carried out)."""

    effects: tuple[Outside, ...]
    output: dict[str, Any]


@dataclass(frozen=True)
class Call:
    """A webhook stage's request; ``expect``: the statuses that pass (None: any 2xx)."""

    method: str
    url: str
    headers: dict[str, str]
    body: Any
    expect: tuple[int, ...] | None
    #: The keys its answer's JSON object gives the stage's outputs (:mod:`.webhook_outputs`).
    expected_outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refuse:
    answer: StageFailed


Work = Judge | Act | Call | Wake | Refuse


def _refused(task: PipelineTask, why: str, error: str = STAGE_REJECTED) -> Refuse:
    return Refuse(
        StageFailed.of(
            error,
            f"{task.step} of {task.stage_type} stage {task.stage!r} of pipeline {task.pipeline!r}: {why}",
        )
    )


def plan(task: PipelineTask, where: Where) -> Work:
    """What ``task`` asks of the router (see the module's docstring)."""
    try:
        return _plan(task, where)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"]) or "config"
        return _refused(
            task, f"its configuration is not one this router reads ({at}: {first['msg']})", TASK_INVALID
        )
    except PipelineTemplateError as exc:
        return _refused(task, str(exc), STAGE_FAILED)


def _plan(task: PipelineTask, where: Where) -> Work:
    config = task.step_config
    data = task.input
    match task.step:
        case "condition":
            return Judge(condition=_CONDITION.validate_python(config.get("condition")), kind="condition")
        case "poll":
            poll = _POLL.validate_python(config.get("poll"))
            if poll.condition is not None:
                return Judge(condition=poll.condition, kind="poll")
            return Judge(checks=(_CHECK.validate_python({"check": poll.check}),), kind="poll")
        case "on_complete" | "on_error" | "escalate":
            actions = _LIFECYCLE.validate_python(config.get("actions", []))
            return _lifecycle(task, where, actions, data)
        case "notify":
            notify = _NOTIFY.validate_python(config.get("notify"))
            why = {"timeout": "timed out", "extended": "timed out; its time is extended"}.get(
                str(config.get("why")), str(config.get("why"))
            )
            text = str(render(notify.message, namespaces(data))) if notify.message else ""
            branch = config.get("branch")  # a parallel stage's branches are extended each on its own
            where_in = f"branch `{branch}` of stage" if branch else "stage"
            lead = f"Pipeline `{task.pipeline}`: {where_in} `{config.get('stage')}` {why}."
            return _comment(task, where, _join(lead, _for(notify.target), text), {"notified": True})
        case "remind":
            reminder = _REMINDER.validate_python(config.get("reminder"))
            text = str(render(reminder.message, namespaces(data))) if reminder.message else ""
            lead = f"Pipeline `{task.pipeline}`: stage `{config.get('stage')}` is still waiting."
            group = config.get("from")
            return _comment(
                task,
                where,
                _join(lead, _for(group if isinstance(group, str) else None), text),
                {"reminded": True},
            )
        case "stage":
            return _stage(task, where, config, data)
    return _refused(
        task, f"unknown step {task.step!r}", TASK_INVALID
    )  # pragma: no cover - the wire's Literal


def _stage(task: PipelineTask, where: Where, config: dict[str, Any], data: Mapping[str, Any]) -> Work:
    if task.stage_type == "agent":
        wake = wake_of(task)
        if config.get("condition") is not None:
            return Judge(condition=_CONDITION.validate_python(config["condition"]), kind="stage", then=wake)
        return wake
    if task.stage_type == "human":  # carried out by squadron.shell.human_stages where it is wired
        return _refused(
            task,
            "a human stage waits for people's answer (approval, comment, label, dismissal), and this "
            'router keeps no human waits (docs/pipelines.md, "What the router carries out")',
        )
    if task.stage_type == "gate":
        gate = _GATE.validate_python(config)
        any_of = gate.conditions is None
        checks = tuple(gate.any_of or ()) if any_of else tuple(gate.conditions or ())
        return Judge(checks=checks, any_of=any_of, condition=gate.condition, kind="gate")
    work: Act | Call
    condition: Any
    if task.stage_type == "webhook":
        webhook = _WEBHOOK.validate_python(config)
        condition = webhook.condition
        work = _call(webhook, data)
    else:  # action: a stage (with its transitions) or a parallel stage's branch
        try:
            action = _ACTION_STAGE.validate_python(config)
        except ValidationError:
            action = _ACTION_BRANCH.validate_python(config)
        condition = action.condition
        work = _action(task, where, action, data)
    if condition is not None:
        return Judge(condition=condition, kind="stage", then=work)
    return work


def _call(webhook: WebhookStage, data: Mapping[str, Any]) -> Call:
    ns = namespaces(data)
    request = webhook.request
    url = str(render(request.url, ns))
    # The host is written literally (the configuration's check); what a template renders after it
    # (run data an attacker may have written, such as a pull request's title) never moves it.
    written, rendered = urlsplit(request.url), urlsplit(url)
    if (rendered.scheme, rendered.netloc) != (written.scheme, written.netloc):
        raise PipelineTemplateError(
            request.url,
            f"renders the address {url!r}, whose host is not the one written ({written.hostname})",
        )
    headers = {str(key): str(render(value, ns)) for key, value in request.headers.items()}
    body = render(request.body, ns) if request.body is not None else None
    expect: tuple[int, ...] | None = None
    if webhook.expect is not None:
        status = webhook.expect.status
        expect = tuple(status) if isinstance(status, list) else (status,)
    return Call(request.method, url, headers, body, expect, tuple(webhook.expected_outputs or ()))


def _subject(task: PipelineTask) -> int | None:
    return task.issue_number


def _action(task: PipelineTask, where: Where, action: Any, data: Mapping[str, Any]) -> Act | Call:
    number = _subject(task)
    if number is None:
        return Act((), {})  # refused by safe_plan: the run has no issue or pull request
    ns = namespaces(data)
    repo, inst = where.repo_full_name, where.installation_id
    match action:
        case MergePrStage() | MergePrBranch():
            pr = subject_of(action.config.pr, ns) or number
            effect: Outside = EvaluateMerge(
                repo, inst, pr, cause=f"pipeline {task.pipeline} stage {task.stage}"
            )
            return Act((effect,), {"merge": "asked", "pr": pr})
        case ClosePrStage() | ClosePrBranch():
            return Act((CloseIssue(repo, inst, number, "completed"),), {"closed": number})
        case AddLabelStage() | AddLabelBranch():
            label = str(render(action.config.label, ns))
            return Act((AddLabels(repo, inst, number, (label,)),), {"labelled": label})
        case CommentStage() | CommentBranch():
            body = str(render(action.config.message, ns))
            return Act((PostComment(repo, inst, number, body, AUTHOR),), {"commented": True})
        case RemoveLabelStage() | RemoveLabelBranch():
            label = str(render(action.config.label, ns))
            return Act((RemoveLabel(repo, inst, number, label),), {"unlabelled": label})
    raise _NotYet(f"action {getattr(action, 'action', '?')!r}")  # pragma: no cover - the union


class _NotYet(Exception):
    pass


def _lifecycle(task: PipelineTask, where: Where, actions: Sequence[Any], data: Mapping[str, Any]) -> Act:
    number = _subject(task)
    if number is None:
        return Act((), {"done": 0})
    ns = namespaces(data)
    repo, inst = where.repo_full_name, where.installation_id
    effects: list[Outside] = []
    if task.step == "escalate":
        effects.append(
            PostComment(
                repo,
                inst,
                number,
                f"Pipeline `{task.pipeline}` escalated to a human: it could not go on by itself "
                "(the run's history in Step Functions says where and why).",
                AUTHOR,
            )
        )
        effects.append(AddLabels(repo, inst, number, (ESCALATION_LABEL,)))
    for action in actions:
        match action:
            case CommentAction(body=body):
                effects.append(PostComment(repo, inst, number, str(render(body, ns)), AUTHOR))
            case LabelAction(add=add, remove=remove):
                if add is not None:
                    effects.append(AddLabels(repo, inst, number, (str(render(add, ns)),)))
                if remove is not None:
                    effects.append(RemoveLabel(repo, inst, number, str(render(remove, ns))))
    return Act(tuple(effects), {"done": len(effects)})


def _for(target: str | None) -> str:
    return f"(for the human group `{target}`)" if target else ""


def _join(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def _comment(task: PipelineTask, where: Where, body: str, output: dict[str, Any]) -> Act:
    number = _subject(task)
    if number is None:
        return Act((), output)
    return Act((PostComment(where.repo_full_name, where.installation_id, number, body, AUTHOR),), output)


def safe_plan(task: PipelineTask, where: Where) -> Work:
    """:func:`plan`, with an action the router cannot carry out refused with its reason, and a
    stage that acts on an issue or pull request refused when the run has none."""
    try:
        work = plan(task, where)
    except _NotYet as exc:
        return _refused(task, str(exc))
    inner = work.then if isinstance(work, Judge) else work
    if isinstance(inner, Act) and task.issue_number is None and task.step in ("stage",):
        return _refused(task, "the run has no issue or pull request to act on")
    return work


def judged(work: Judge, facts: Facts, data: Mapping[str, Any]) -> StageSucceeded | Act | Call | Wake:
    """The answer of a judgement against ``facts``; for a stage whose condition holds, its work.

    Raises :class:`~.templates.PipelineTemplateError` when an expression cannot be evaluated
    (the caller fails the stage with it).
    """
    holds = True if work.condition is None else condition_holds(work.condition, facts, data)
    if work.kind == "stage":
        if not holds:
            return StageSucceeded(output={"skipped": True})
        assert work.then is not None
        return work.then
    if work.kind == "condition":
        return StageSucceeded(output={} if holds else {"skipped": True})
    if work.kind == "poll" and work.condition is not None:
        return StageSucceeded(output={"passed": holds})
    if not holds:  # a gate's own condition
        return StageSucceeded(output={"skipped": True})
    judgement = judge_gate(work.checks, facts, data, any_of=work.any_of)
    return StageSucceeded(output=judgement.output())


def numbers_read(work: Judge, task: PipelineTask) -> tuple[int, ...]:
    """Other pull requests the judgement's checks name with a literal ``pr`` (read beside the run's)."""
    own = task.issue_number
    ns = namespaces(task.input)
    found: set[int] = set()
    for check in work.checks:
        try:
            number = subject_of(check.pr, ns)
        except PipelineTemplateError:
            continue  # the check itself says so when judged
        if number is not None and number != own:
            found.add(number)
    return tuple(sorted(found))


def webhook_answer(
    call: Call, status: int, reason: str | None, body: bytes = b"", *, cut: bool = False
) -> StageAnswer:
    """A webhook's answer: its status mapped to passed (``expect``, or any 2xx) or failed; with
    ``expected_outputs``, passed only when ``body`` gives them (:func:`.webhook_outputs.outputs_of`)."""
    if reason is not None:
        return StageFailed.of(STAGE_FAILED, f"webhook {call.method} {call.url}: {reason}")
    ok = status in call.expect if call.expect is not None else 200 <= status < 300
    if ok and call.expected_outputs:
        outputs = outputs_of(call.expected_outputs, body, cut=cut)
        if isinstance(outputs, str):
            return StageFailed.of(
                STAGE_FAILED, f"webhook {call.method} {call.url} answered {status}: {outputs}"
            )
        return StageSucceeded(output={"status": status, "outputs": outputs})
    if ok:
        return StageSucceeded(output={"status": status})
    wanted = ", ".join(map(str, call.expect)) if call.expect is not None else "2xx"
    return StageFailed.of(
        STAGE_FAILED, f"webhook {call.method} {call.url} answered {status}, expected {wanted}"
    )
