"""A pipeline's human stages, carried out for real (docs/pipelines.md, "What the router carries
out"): a stage that waits for people is kept as a wait, and the webhooks that answer it complete it.

:meth:`HumanStages.enter` is what :class:`~squadron.shell.pipelines.PipelineTasks` does with a
``human`` stage's task, under the task's entry claim: it keeps the wait
(:class:`~squadron.registry_ports.HumanWaits`: the task's token, what it waits for, from whom, how
many), then says so on the issue or pull request and assigns the group's members (a decision keyed
by the entry, carried out by the router's outbox: each effect once). The task is not answered then:
the state machine waits (its reminders and its timeout are its own states).

:meth:`HumanStages.answer_from` is the router's hook for an event that may answer a waiting stage
(:class:`~squadron.shell.dispatch.Dispatcher` calls it for every event it routes, a redelivered one
too): a person's approval, comment, label or dismissal on the issue or pull request counts toward
its open waits when :func:`~squadron.domain.pipelines.humans.refusal` lets it (a member of the
stage's group with write access, each person once); when ``count`` people counted, the answer is
kept, sent (SendTaskSuccess with who), and the wait closed. A kept answer not yet sent is sent by
the next event of that issue. An answer to a task that is over ("gone": it timed out, the run
stopped) closes the wait when the run is over; while the run goes on, it is kept on the wait,
marked gone: the wait counts nobody more and sends nothing, and when the stage's timeout extended
it, the entry that follows takes the answer (:meth:`HumanStages.enter`); else it expires.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from squadron.domain.domain_events import DomainEvent
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_events import Answered, answered
from squadron.domain.pipeline_wire import PipelineTask, StageSucceeded
from squadron.domain.pipelines.humans import (
    Entered,
    HumanWait,
    answer_of,
    entered,
    extended,
    human_act,
    needs_permission,
    refusal,
    satisfied,
)
from squadron.domain.pipelines.models import HumanStage
from squadron.domain.pipelines.work import Where
from squadron.registry_ports import HumanWaits

logger = logging.getLogger(__name__)

#: A repository's human groups: name -> members (its configuration's ``human_groups``).
GroupsSource = Callable[[Where], Mapping[str, Sequence[str]]]
#: GitHub's permission endpoint: (installation, repository, login) -> admin/maintain/write/....
PermissionSource = Callable[[int | None, str, str], str]


class HumanStages:
    """The waits of the pipelines' human stages (see the module)."""

    def __init__(
        self,
        answers: Any,
        waits: HumanWaits,
        *,
        groups: GroupsSource,
        permission: PermissionSource,
        bot_login: str,
        events: Callable[[DomainEvent], bool] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        #: Stores the stage's ``pipeline.stage_changed.v1`` once its answer is delivered (the
        #: registry's ``record_event``); None: no event (docs/pipelines.md, "Events").
        self.events = events
        self.clock = clock
        #: What answers a task token (:class:`~squadron.shell.pipelines.TaskAnswers`).
        self.answers = answers
        self.waits = waits
        self.groups = groups
        self.permission = permission
        self.bot_login = bot_login

    def enter(self, task: PipelineTask, stage: HumanStage, where: Where, now: Any) -> Entered:
        """Keep the wait ``task`` opens (the one kept already, on a retry); what to say and do.

        An entry that extends a timed-out one (:func:`~squadron.domain.pipelines.humans.extended`)
        continues its wait: it says and assigns nothing again, and the earlier wait is closed (its
        task is over). When enough people counted already (an answer came after the timeout,
        before this entry: its task was over, so it was kept ``gone``), the entry's wait is kept
        answered and closed, and the caller answers the task with it. What is said follows the
        wait as kept, so a retry of the task decides as its first attempt did."""
        assert task.issue_number is not None

        def decide(earlier: HumanWait | None) -> Entered:
            return entered(
                task,
                stage,
                repo_full_name=where.repo_full_name,
                installation_id=where.installation_id,
                groups=self.groups(where),
                now=now,
                earlier=earlier,
            )

        repo_id, number = task.repository_id, task.issue_number
        earlier = extended(task, self.waits.open_waits(repo_id, number))
        decided = decide(earlier)
        kept = self.waits.open_wait(decided.wait)
        if kept.extends is not None:
            self.waits.close_wait(repo_id, number, kept.extends)
            if kept.answer is None and satisfied(kept):
                # Enough people counted toward the entries it continues (an answer that came
                # after the timeout, before this entry): the extension is answered at once.
                kept = self.waits.keep_answer(repo_id, number, kept.entry, answer_of(kept).output)
            if kept.answer is not None:
                self.waits.close_wait(repo_id, number, kept.entry)  # answered by the task's answer
            return Entered(kept, ())
        return Entered(kept, decided.effects if earlier is None else decide(None).effects)

    def answer_from(self, event: EventEnvelope) -> dict[str, Any]:
        """Count ``event``'s act toward the open waits of its issue or pull request, and answer the
        waits it completes; a summary (empty when the event answers no wait)."""
        act = human_act(event)
        if act is None:
            return {}
        repo_id = event.repository.id
        waits = self.waits.open_waits(repo_id, act.number)
        if not waits:
            return {}
        asked: dict[str, str | None] = {}

        def permission_of(login: str) -> str | None:
            if login not in asked:
                asked[login] = self.permission(event.installation_id, event.repository.full_name, login)
            return asked[login]

        done: list[dict[str, Any]] = []
        for wait in waits:
            if wait.gone:  # its answer is kept for an extension of its stage: nothing to count
                continue
            current: HumanWait | None = wait
            if wait.answer is None:
                known = permission_of(act.login) if needs_permission(wait, act, self.bot_login) else None
                why = refusal(wait, act, bot_login=self.bot_login, permission=known)
                if why is not None:
                    done.append({"stage": wait.stage, "counted": False, "why": why})
                    continue
                current = self.waits.count_toward(repo_id, act.number, wait.entry, act.login)
                if current is None or not satisfied(current):
                    counted = list(current.counted) if current is not None else []
                    done.append({"stage": wait.stage, "counted": True, "by": counted})
                    continue
                current = self.waits.keep_answer(repo_id, act.number, wait.entry, answer_of(current).output)
            assert current is not None and current.answer is not None
            sent = self.answers.answer(current.task_token, StageSucceeded(output=current.answer))
            if sent.delivered:
                self._report(current, event)
                self.waits.close_wait(repo_id, act.number, wait.entry)
            elif self._running(wait.execution_arn):
                # The entry's task is over, its run goes on: an extension may enter the stage again.
                self.waits.mark_gone(repo_id, act.number, wait.entry)
            else:
                self.waits.close_wait(repo_id, act.number, wait.entry)
            logger.info(
                "pipeline %s stage %s on #%s answered by %s (%s)",
                wait.pipeline,
                wait.stage,
                act.number,
                ", ".join(current.answer.get("by", [])),
                "sent" if sent.delivered else f"gone: {sent.gone}",
            )
            done.append(
                {"stage": wait.stage, "answered": sent.delivered, "gone": sent.gone, **current.answer}
            )
        return {"waits": done}

    def _running(self, execution_arn: str) -> bool:
        """Whether the run still runs (Step Functions' DescribeExecution; asked only of an answer
        that found its task over)."""
        run = self.answers.describe(execution_arn)
        return run is not None and run.status == "RUNNING"

    def _report(self, wait: HumanWait, event: EventEnvelope) -> None:
        """The stage's transition event, once its answer is delivered: keyed by the entry, it is
        stored once however often the answer is (the same approval delivered again, a kept answer
        sent by the issue's next event). An approval after the stage timed out moves no run and
        reports nothing."""
        if self.events is None:
            return
        assert wait.answer is not None
        self.events(
            answered(
                Answered(
                    entry=wait.entry,
                    pipeline=wait.pipeline,
                    execution_arn=wait.execution_arn,
                    stage=wait.stage,
                    stage_type="human",
                    step="stage",
                    entered_at=wait.entered_at or wait.opened_at,
                    retry_count=wait.retry_count,
                    repository_id=wait.repo_id,
                    issue=wait.number,
                ),
                StageSucceeded(output=wait.answer),
                repository=event.repository.full_name,
                installation=event.installation_id,
                at=self.clock(),
            )
        )
