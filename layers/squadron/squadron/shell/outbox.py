"""Carrying out a committed decision's outbox, each effect once (docs/exactly-once.md).

The router shell (:mod:`squadron.shell.router`) commits a decision, then hands its outside
effects here, in order — GitHub, tasks, merge gate — each under its key
(:func:`~squadron.domain.effects.effect_key`). A retry finds what a crash left: creations
(comments, issues) are looked up by their hidden key first; labels, closing and launches (by
their token) are harmless to repeat. What the merge gate's verdict changes is chosen by
:func:`squadron.domain.routing.verdicts.verdict_choice` (pure); this module stores it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import assert_never

from squadron.adapters.github.errors import GitHubError
from squadron.domain.commands import RegisterBlocker
from squadron.domain.effects import (
    AddLabels,
    ApproveChangeSet,
    AssignIssue,
    CloseIssue,
    ConfirmMemory,
    CreateIssue,
    EvaluateMerge,
    FileBlockerIssue,
    LaunchAgent,
    OpenRetrospective,
    Outside,
    PostComment,
    RemoveLabel,
    StartPipelineRun,
    SteerPipelineRuns,
    StopAgentTask,
    effect_key,
)
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.memory import MemoryPolicy
from squadron.domain.outbox import failed_effect, given_up, permanent
from squadron.domain.routing import RoutingPolicy
from squadron.domain.routing.verdicts import (
    ChangeVerdict,
    KeepVerdict,
    Redescribe,
    gate_arguments,
    verdict_choice,
)
from squadron.errors import SquadronError
from squadron.ports import EventQueue, MergeGatePort, Registry, RouterGitHub, TaskLauncher
from squadron.shell.change_set_commands import ChangeSetCommands
from squadron.shell.launching import carry_out_launch
from squadron.shell.memory import Memory
from squadron.shell.pipeline_runs import PipelineRuns
from squadron.shell.retrospective import Retrospectives

logger = logging.getLogger(__name__)

#: How far before a decision's time a retry looks for what it created (GitHub's clock and
#: ours may disagree by a little; a wider window only reads a few more comments).
CLOCK_SKEW = timedelta(minutes=5)


class LeaseLostError(SquadronError):
    """Another executor claimed the decision while this one carried it out (this one stops)."""

    def __init__(self, key: str, index: int) -> None:
        super().__init__(
            f"decision {key}: claim lost before effect {index} was recorded; another executor goes on"
        )


@dataclass
class OutboxExecutor:
    """One delivery's carrying out: what it met is kept in ``held``, ``failed`` and ``busy``."""

    registry: Registry
    launcher: TaskLauncher
    github: RouterGitHub
    policies: Callable[[EventEnvelope], RoutingPolicy]
    clock: Callable[[], datetime]
    merge_gate: MergeGatePort | None = None
    queue: EventQueue | None = None
    memory: Memory | None = None
    retrospectives: Retrospectives | None = None
    #: Publishes and starts the repositories' pipelines (None: no pipelines in this deployment).
    pipelines: PipelineRuns | None = None
    #: Carries out change-set commands (None: no change sets in this deployment).
    change_sets: ChangeSetCommands | None = None
    #: Agents whose launch RunTask refused: held, to be retried with back-off.
    held: list[str] = field(default_factory=list)
    #: The kinds of the effects recorded now as refused for good.
    failed: list[str] = field(default_factory=list)
    #: Another executor held the decision: this one carried out nothing of it.
    busy: bool = False

    def carry_out(
        self,
        event: EventEnvelope,
        key: str,
        outside: Sequence[Outside],
        decided_at: datetime,
        *,
        resumed: bool,
        finish: bool,
    ) -> None:
        """Every outside effect in order, each under its key; then (``finish``) the decision is done.

        A decision to finish is claimed first (:mod:`squadron.domain.outbox`): while another
        executor holds it (the delivery's retry, a redrive, the reconciler's sweep), this one
        does nothing, and the sweep comes back if the holder fails. Each effect is recorded as
        settled when done, so a later executor carries out only the rest; one GitHub refuses for
        good (404, 410, 422) is recorded with its reason and the rest goes on. A decision claimed
        too often is given up, what is left recorded as failed. ``resumed`` (or a claim that is
        not the first): an earlier attempt may have carried out an effect without recording it
        (a crash in between), so what creates something on GitHub is looked up by its key first.
        A done decision's launches are not claimed: each starts only while still pending.
        """
        since = decided_at - CLOCK_SKEW
        if not finish:
            for index, effect in enumerate(outside):
                self._outside(event, effect, effect_key(key, index), since if resumed else None)
            return
        owner = secrets.token_hex(8)
        claim = self.registry.claim_decision(key, owner, self.clock())
        if claim is None:
            logger.info("decision %s is done or carried out by another executor now", key)
            self.busy = True
            return
        look_since = since if resumed or claim.attempts > 1 else None
        try:
            for index, effect in enumerate(outside):
                if index in claim.settled:
                    continue
                if claim.exhausted:
                    self._fail(event, key, owner, index, effect, reason=given_up(claim))
                    continue
                try:
                    self._outside(event, effect, effect_key(key, index), look_since)
                except GitHubError as exc:
                    if not permanent(exc.status):
                        raise
                    self._fail(event, key, owner, index, effect, reason=str(exc))
                    continue
                if not self.registry.settle_effect(key, owner, index):
                    raise LeaseLostError(key, index)
            self.registry.finish_decision(key, self.clock())
        except LeaseLostError:
            raise  # the claim is another executor's now
        except Exception as exc:
            self.registry.release_decision(key, owner, f"{type(exc).__name__}: {exc}")
            raise

    def _fail(
        self, event: EventEnvelope, key: str, owner: str, index: int, effect: Outside, *, reason: str
    ) -> None:
        """Record effect ``index`` as refused for good (never tried again; operators see it)."""
        failed = failed_effect(
            key,
            index,
            effect,
            repo_id=event.repository.id,
            repo=event.repository.full_name,
            reason=reason,
            at=self.clock(),
        )
        if not self.registry.fail_effect(key, owner, failed):
            raise LeaseLostError(key, index)
        logger.warning(
            "decision %s: %s on %s#%s not carried out: %s",
            key,
            failed.effect,
            failed.repo_full_name,
            failed.number,
            failed.reason,
        )
        self.failed.append(failed.effect)

    def _issue_write(self, effect: CloseIssue | AddLabels | RemoveLabel | AssignIssue) -> None:
        """An issue's or pull request's state, labels or assignees (each idempotent on GitHub)."""
        github, repo, inst, number = self.github, effect.repo_full_name, effect.installation_id, effect.number
        match effect:
            case CloseIssue(reason=reason):
                github.close_issue(inst, repo, number, reason)
            case AddLabels(labels=labels):
                github.add_labels(inst, repo, number, labels)
            case RemoveLabel(label=label):
                github.remove_label(inst, repo, number, label)
            case AssignIssue(logins=logins):
                github.add_assignees(inst, repo, number, logins)

    def _outside(self, event: EventEnvelope, effect: Outside, key: str, look_since: datetime | None) -> None:
        github = self.github
        match effect:
            case PostComment(repo_full_name=repo, installation_id=inst, number=number, body=body):
                if look_since is not None and github.find_comment(inst, repo, number, key, look_since):
                    logger.info("comment %s on %s#%s was posted already", key, repo, number)
                    return
                github.comment(inst, repo, number, body, effect.author, key=key)
            case CloseIssue() | AddLabels() | RemoveLabel() | AssignIssue():
                self._issue_write(effect)
            case CreateIssue(repo_full_name=repo, installation_id=inst):
                found = (
                    github.find_issue(inst, repo, key, effect.labels, look_since)
                    if look_since is not None
                    else None
                )
                if found is not None:
                    logger.info("issue %s of %s was opened already: #%s", key, repo, found)
                    return
                github.create_issue(
                    inst,
                    repo,
                    title=effect.title,
                    body=effect.body,
                    labels=effect.labels,
                    assignees=effect.assignees,
                    key=key,
                )
            case LaunchAgent(agent_id=agent_id, purpose=purpose, token=token):
                self._launch(agent_id, purpose, token, self.clock())
            case StopAgentTask(task_arn=task_arn, reason=reason):
                self.launcher.stop(task_arn, reason)
            case EvaluateMerge(repo_full_name=repo, installation_id=inst, pr_number=pr, author_role=role):
                if self.merge_gate is None:
                    logger.info("no merge gate wired; PR #%s of %s not judged", pr, repo)
                else:
                    outcome = self.merge_gate.evaluate(
                        inst,
                        repo,
                        pr,
                        role,
                        issue_number=effect.issue_number,
                        cause=effect.cause,
                        **gate_arguments(effect),
                    )
                    logger.info("merge gate on %s#%s: %s", repo, pr, getattr(outcome, "detail", outcome))
                    if outcome.result is not None:
                        self._verdict(event, effect, key, outcome.result.verdict, outcome.result.description)
            case FileBlockerIssue():
                self._file_blocker(event, effect, key, look_since)
            case OpenRetrospective():
                if self.retrospectives is None:
                    logger.info("no retrospectives wired; %s's is not held", effect.repo_full_name)
                    return
                self.retrospectives.open(effect, key, look_since, self.policies(event).prices)
            case ConfirmMemory():
                if self.memory is None:
                    logger.info(
                        "no memory wired; facts %s of repository %s not confirmed",
                        effect.fact_ids,
                        effect.repo_id,
                    )
                    return
                confirmed = self.memory.confirm(
                    effect.repo_id,
                    effect.fact_ids,
                    by=effect.by,
                    how=effect.how,
                    policy=MemoryPolicy(expiry_days=effect.expiry_days),
                    authors=effect.authors or None,
                )
                logger.info(
                    "memory of repository %s: %d facts confirmed by %s (%s)",
                    effect.repo_id,
                    len(confirmed),
                    effect.by,
                    effect.how,
                )
            case StartPipelineRun():
                if self.pipelines is None:
                    logger.info(
                        "no pipelines wired; %s's %r run not started", effect.repo_full_name, effect.pipeline
                    )
                    return
                self.pipelines.start(effect, self.policies(event).pipelines, correlation_id=event.delivery_id)
            case SteerPipelineRuns():
                self._steer(effect, key, github, look_since)
            case ApproveChangeSet():
                self._approve_change_set(effect, key, github, look_since)
            case _:  # pragma: no cover - exhaustiveness: mypy reports an unhandled effect type
                assert_never(effect)

    def _approve_change_set(
        self, effect: ApproveChangeSet, key: str, github: RouterGitHub, look_since: datetime | None
    ) -> None:
        if self.change_sets is None:
            logger.info(
                "no change sets wired; %s's command on %s not carried out", effect.login, effect.set_id
            )
            return
        done = self.change_sets.approve(effect, key, github, look_since)
        logger.info("change set %s on %s#%s: %s", effect.set_id, effect.repo_full_name, effect.number, done)

    def _steer(
        self, effect: SteerPipelineRuns, key: str, github: RouterGitHub, look_since: datetime | None
    ) -> None:
        steering = self.pipelines.steering if self.pipelines is not None else None
        if steering is None:
            logger.info(
                "no pipeline runs recorded here; %s on %s not steered", effect.event, effect.repo_full_name
            )
            return
        for line in steering.steer(effect, key, github, look_since):
            logger.info("%s on %s#%s: %s", effect.event, effect.repo_full_name, effect.number, line)

    def _verdict(
        self, event: EventEnvelope, effect: EvaluateMerge, key: str, verdict: str, text: str
    ) -> None:
        """Report a change of the gate's verdict on the PR, once (keyed by the effect and verdict)."""
        repo_id = event.repository.id
        previous, said = self.registry.gate_state(repo_id, effect.pr_number)
        choice = verdict_choice(
            effect,
            repo_id=repo_id,
            key=key,
            verdict=verdict,
            text=text,
            previous=previous,
            said=said,
            at=self.clock(),
            correlation_id=event.delivery_id,
        )
        match choice:
            case KeepVerdict():
                pass
            case Redescribe(verdict=same, description=description):
                # The same verdict; what it waits for moved on (the dashboard shows it).
                self.registry.set_gate_description(repo_id, effect.pr_number, same, description)
            case ChangeVerdict(previous=before, event=changed):
                if not self.registry.change_verdict(repo_id, effect.pr_number, before, changed):
                    logger.info(
                        "verdict on #%s changed meanwhile; %s not reported", effect.pr_number, verdict
                    )
            case _:  # pragma: no cover - exhaustiveness
                assert_never(choice)

    def _file_blocker(
        self, event: EventEnvelope, effect: FileBlockerIssue, key: str, look_since: datetime | None
    ) -> None:
        """Open the issue (once: a retry finds it by its key), then register it as the agent's
        blocker (it sleeps) through events.fifo (the command's id is the same on a retry)."""
        if self.queue is None:
            raise RuntimeError("a blocker issue needs events.fifo to register it: wire the router's queue")
        found = (
            self.github.find_issue(
                effect.installation_id, effect.repo_full_name, key, effect.labels, look_since
            )
            if look_since is not None
            else None
        )
        number = (
            found
            if found is not None
            else self.github.create_issue(
                effect.installation_id,
                effect.repo_full_name,
                title=effect.title,
                body=effect.body,
                labels=effect.labels,
                assignees=effect.assignees,
                key=key,
            )
        )
        command = RegisterBlocker(
            issue_number=effect.issue_number,
            blocker_number=number,
            agent_id=effect.agent_id,
            launch_token=effect.launch_token,
            sleep=True,
            note=effect.title,
        )
        self.queue.send(
            command_envelope(
                command,
                repository=event.repository.model_dump(),
                installation_id=effect.installation_id,
                delivery_id=f"cmd-{effect.launch_token}-blocker-{number}",
                now=self.clock(),
            )
        )

    def _launch(self, agent_id: str, purpose: str, token: str, now: datetime) -> None:
        """Start the decided launch once: arm it, start its task and confirm it, or adopt the
        task an earlier attempt started (:mod:`squadron.shell.launching` has the protocol).

        The decision (the pending launch) is committed before; the secret is drawn there because
        it must be random and must never be stored. A held launch (RunTask refused) keeps its
        decision: the reconciler retries it with back-off, nothing goes back to the queue.
        """
        launched = carry_out_launch(
            self.registry, self.launcher, agent_id, purpose=purpose, token=token, now=now
        )
        if launched.outcome == "held":
            self.held.append(agent_id)
