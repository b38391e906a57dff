"""A pipeline's human stage: what the router says and keeps when one starts waiting, and which
webhooks answer it — pure (docs/pipelines.md, "What the router carries out").

When a ``human`` stage's task reaches the router, :func:`entered` says what to do: the
``notify.on_enter`` comment naming the human group's members, the members assigned when
``auto_assign`` (each an outside effect of a decision keyed by the task's entry), and the
:class:`HumanWait` the registry keeps: the task's token, what it waits for, from whom, how many.

A webhook may then answer it. :func:`human_act` reads what a person did (an approval, a comment,
a label, a review dismissed) from an event; :func:`refusal` says why that act does not count
toward a wait (None: it counts). Only a person counts, never the App nor another bot nor the
framework's or an agent's message; a member of the stage's ``from`` group (anyone, without a
group) who has write access to the repository (the authority rule,
:mod:`squadron.domain.authority`); each person once (:func:`counted`), so a redelivered event or
a second comment by the same person adds nobody. :func:`answer_of` is the stage's answer once
``count`` people counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.app_acts import is_app
from squadron.domain.authority import WRITE_PERMISSIONS
from squadron.domain.effects import AssignIssue, Outside, PostComment
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import MAX_TOKEN, PipelineTask, StageSucceeded
from squadron.domain.pipelines.judge import namespaces
from squadron.domain.pipelines.limits import MAX_RUN_TIME
from squadron.domain.pipelines.models import HumanStage
from squadron.domain.pipelines.templates import render

WaitFor = Literal["approval", "comment", "label", "dismiss"]

#: Whose words the App's entry comment is (the framework's, as every pipeline comment).
AUTHOR = "framework"
#: How long a wait is kept: the longest run (a wait outlives its task only until then).
WAIT_RETENTION = timedelta(seconds=MAX_RUN_TIME) + timedelta(days=1)
#: GitHub assigns at most 10 people to an issue or pull request.
MAX_ASSIGNEES = 10

_WHAT: dict[str, tuple[str, str]] = {
    "approval": ("an approval", "approvals"),
    "comment": ("a comment", "comments (each by another person)"),
    "label": ("a label", "labels (each by another person)"),
    "dismiss": ("a review dismissed", "reviews dismissed (each by another person)"),
}
#: Where a webhook's act comes from: GitHub's webhook, or the reconciler's copy of a missed one.
#: The framework's own messages and an agent's reports are the App's acts and never count.
_PEOPLE_ORIGINS = frozenset({"github", "reconciler"})


class HumanWait(BaseModel):
    """A human stage waiting for people: kept by the registry (``HumanWaits``) from the task's
    arrival until its answer is sent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo_id: int
    #: The issue or pull request the run is about (where the act must happen).
    number: int
    #: The task's entry (:attr:`~squadron.domain.pipeline_wire.PipelineTask.entry`): the wait's key.
    entry: str
    execution_arn: str
    pipeline: str
    stage: str
    task_token: str = Field(min_length=1, max_length=MAX_TOKEN, repr=False)
    wait_for: WaitFor
    #: The human group (``from``); None: anyone with write access.
    group: str | None
    #: The group's members when the stage started (the run keeps them, as it keeps its version).
    members: tuple[str, ...]
    count: int = Field(ge=1)
    opened_at: datetime
    #: The entry's time and retry count (what the stage's event says when the answer is sent;
    #: None: a wait kept before they were, whose event says when it opened).
    entered_at: datetime | None = None
    retry_count: int = Field(default=0, ge=0)
    #: Who counted so far, each once (the registry adds to it).
    counted: tuple[str, ...] = ()
    #: The entry of the wait this one continues: the stage timed out and its ``on_timeout``
    #: extended it, entering it again (None: the stage's first entry). An extension is not
    #: announced again, and whoever counted toward the earlier entry still counts.
    extends: str | None = None
    #: Who counted toward the entries this one continues (kept with the wait when it opens).
    carried: tuple[str, ...] = ()
    #: The answer, kept before it is sent.
    answer: dict[str, Any] | None = None
    #: The answer was sent (or the task was over): the wait is closed.
    sent: bool = False
    #: The answer was kept but its task was over when it was sent ("gone": the stage timed out,
    #: or its run stopped): the wait stays open, counting nobody and sending nothing, so that an
    #: extension entering the stage again takes the answer (:func:`extended`); else it expires.
    gone: bool = False

    @property
    def expires_at(self) -> datetime:
        return self.opened_at + WAIT_RETENTION


@dataclass(frozen=True)
class HumanAct:
    """What a person did on an issue or pull request, as a webhook says."""

    wait_for: WaitFor
    login: str
    is_bot: bool
    number: int
    #: Where it came from (the envelope's ``origin``).
    origin: str = "github"


@dataclass(frozen=True)
class Entered:
    """What the router does when a human stage starts waiting."""

    wait: HumanWait
    effects: tuple[Outside, ...]


def entered(
    task: PipelineTask,
    stage: HumanStage,
    *,
    repo_full_name: str,
    installation_id: int | None,
    groups: Mapping[str, Sequence[str]],
    now: datetime,
    earlier: HumanWait | None = None,
) -> Entered:
    """The wait ``task`` opens and what is said and done (see the module). The run must have an
    issue or pull request (``task.issue_number``). ``earlier``: the wait of the same stage of the
    same run that this entry extends (:func:`extended`): the new wait keeps its members and who
    counted, and nothing is said or assigned again."""
    assert task.issue_number is not None
    human = stage.human
    members = tuple(groups.get(human.from_, ())) if human.from_ is not None else ()
    if earlier is not None:
        members = earlier.members
    wait = HumanWait(
        repo_id=task.repository_id,
        number=task.issue_number,
        entry=task.entry,
        execution_arn=task.execution_arn,
        pipeline=task.pipeline,
        stage=task.stage,
        task_token=task.task_token,
        wait_for=human.wait_for,
        group=human.from_,
        members=members,
        count=human.count,
        opened_at=now,
        entered_at=task.entered_at,
        retry_count=task.retry_count,
        extends=earlier.entry if earlier is not None else None,
        carried=_people(earlier.carried, earlier.counted) if earlier is not None else (),
    )
    if earlier is not None:
        return Entered(wait, ())
    effects: list[Outside] = []
    notify = human.notify
    if notify is not None and notify.on_enter is not None:
        said = str(render(notify.on_enter, namespaces(task.input)))
        body = "\n\n".join(part for part in (_waits_for(wait), human.description.strip(), said) if part)
        effects.append(PostComment(repo_full_name, installation_id, wait.number, body, AUTHOR))
    if human.auto_assign and members:
        effects.append(AssignIssue(repo_full_name, installation_id, wait.number, members[:MAX_ASSIGNEES]))
    return Entered(wait, tuple(effects))


def extended(task: PipelineTask, waits: Sequence[HumanWait]) -> HumanWait | None:
    """The open wait ``task`` extends: one of the same run's same stage, entered before, whose
    answer was not delivered (its entry timed out; ``on_timeout.extend`` entered the stage again):
    none kept yet, or one kept after the entry had timed out (``gone``), which the extension takes.
    None when ``task`` is the stage's first entry, or one after an answered entry (a gate's loop
    back)."""
    found = [
        wait
        for wait in waits
        if wait.execution_arn == task.execution_arn
        and wait.stage == task.stage
        and wait.entry != task.entry
        and (wait.answer is None or wait.gone)
    ]
    return found[-1] if found else None


def _people(*groups: Sequence[str]) -> tuple[str, ...]:
    """Each login once (case-insensitively), in order."""
    seen: dict[str, str] = {}
    for group in groups:
        for login in group:
            seen.setdefault(login.casefold(), login)
    return tuple(seen.values())


def _waits_for(wait: HumanWait) -> str:
    one, many = _WHAT[wait.wait_for]
    what = one if wait.count == 1 else f"{wait.count} {many}"
    if wait.group is None:
        who = "someone with write access"
    else:
        names = ", ".join(f"@{login}" for login in wait.members) or "nobody yet"
        who = f"the human group `{wait.group}` ({names})"
    return f"Pipeline `{wait.pipeline}`: stage `{wait.stage}` waits for {what} from {who}."


def human_act(event: EventEnvelope) -> HumanAct | None:
    """The act of a person ``event`` is that a human stage may wait for; None for any other event."""
    number = event.subject_number
    if number is None:
        return None
    pair = (event.event, event.action)
    kind: WaitFor
    if pair == ("pull_request_review", "submitted"):
        if event.review is None or event.review.state.casefold() != "approved":
            return None
        kind, actor = "approval", event.review.author
    elif pair == ("issue_comment", "created"):
        kind, actor = "comment", event.comment.author if event.comment is not None else event.sender
    elif pair in {("issues", "labeled"), ("pull_request", "labeled")}:
        kind, actor = "label", event.sender
    elif pair == ("pull_request_review", "dismissed"):
        kind, actor = "dismiss", event.sender
    else:
        return None
    return HumanAct(kind, actor.login, actor.is_bot, number, event.origin)


def needs_permission(wait: HumanWait, act: HumanAct, bot_login: str) -> bool:
    """Whether :func:`refusal` needs ``act``'s author's repository permission (asked of GitHub
    only for a person the rest of the rule lets through)."""
    return _before_permission(wait, act, bot_login) is None


def _before_permission(wait: HumanWait, act: HumanAct, bot_login: str) -> str | None:
    if act.wait_for != wait.wait_for:
        return f"stage {wait.stage!r} waits for {_WHAT[wait.wait_for][0]}, not {_WHAT[act.wait_for][0]}"
    if act.number != wait.number or act.origin not in _PEOPLE_ORIGINS:
        return f"not an act of a person on #{wait.number}"
    if is_app(act.login, bot_login):
        return f"{act.login} is the App itself"
    if act.is_bot or act.login.casefold().endswith("[bot]"):
        return f"{act.login} is a bot"
    if wait.group is not None and act.login.casefold() not in {m.casefold() for m in wait.members}:
        return f"{act.login} is not a member of the human group {wait.group!r}"
    return None


def refusal(wait: HumanWait, act: HumanAct, *, bot_login: str, permission: str | None) -> str | None:
    """Why ``act`` does not count toward ``wait``; None when it does. ``permission``: what GitHub
    says of the author's repository permission (None: not asked, or unknown)."""
    before = _before_permission(wait, act, bot_login)
    if before is not None:
        return before
    if permission not in WRITE_PERMISSIONS:
        return f"{act.login} has no write access ({permission or 'unknown'})"
    return None


def counted(wait: HumanWait, login: str) -> tuple[str, ...]:
    """Who counted once ``login`` did too: each person once (logins are case-insensitive)."""
    if login.casefold() in {each.casefold() for each in wait.counted}:
        return wait.counted
    return (*wait.counted, login)


def satisfied(wait: HumanWait) -> bool:
    return len(_people(wait.carried, wait.counted)) >= wait.count


def answer_of(wait: HumanWait) -> StageSucceeded:
    """The stage's answer once enough people counted: what it waited for, from whom, and who."""
    return StageSucceeded(
        output={
            "wait_for": wait.wait_for,
            "from": wait.group,
            "by": sorted(_people(wait.carried, wait.counted), key=str.casefold),
        }
    )
