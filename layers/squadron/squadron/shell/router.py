"""The router shell: load what the core asks for, route, apply the effects in order.

One call of :meth:`RouterService.process` handles one envelope. It raises on
any failure, so the record goes back to the queue (and, after enough
receives, to the DLQ); a retry re-reads the registry, so effects already
applied are not decided again. A repository whose configuration is invalid is
paused (:meth:`RouterService.pause_for`): its events are routed, but what would
start something is withheld (:func:`~squadron.domain.pause.hold_while_paused`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from squadron.adapters.ecs import TaskLaunchError
from squadron.domain.agents import ConflictError
from squadron.domain.effects import (
    AddBlocker,
    AddLabels,
    CloseIssue,
    CreateIssue,
    DeliverInbox,
    Discard,
    Effect,
    EvaluateMerge,
    FileBlockerIssue,
    LaunchAgent,
    LinkPullRequest,
    PostComment,
    PutAgent,
    RecordReview,
    RemoveBlocker,
    SetIssueAssignment,
    SetIssueState,
    StopAgentTask,
    apply_order,
    status_changes,
)
from squadron.domain.events import EventEnvelope, RegisterBlocker, command_envelope
from squadron.domain.launches import SECRET_BYTES, SECRET_TTL, secret_digest
from squadron.domain.pause import hold_while_paused
from squadron.domain.routing import RoutingPolicy, Snapshot, SnapshotRequest, route, snapshot_request
from squadron.ports import EventQueue, MergeGatePort, Registry, RouterGitHub, TaskLauncher

logger = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


PolicySource = Callable[[EventEnvelope], RoutingPolicy]
#: Why the event's repository is paused (its configuration is invalid), or None.
PauseSource = Callable[[EventEnvelope], str | None]


@dataclass(frozen=True)
class RoutingResult:
    delivery_id: str
    effects: tuple[Effect, ...]
    #: ``"OLD>NEW"`` per agent status the effects changed (what the metrics count).
    transitions: tuple[str, ...] = ()
    #: Agents whose launch RunTask refused: held, to be retried with back-off.
    held: tuple[str, ...] = ()

    @property
    def discarded(self) -> bool:
        return all(isinstance(effect, Discard) for effect in self.effects)


class RouterService:
    def __init__(
        self,
        *,
        registry: Registry,
        launcher: TaskLauncher,
        github: RouterGitHub,
        policies: PolicySource,
        clock: Callable[[], datetime] = _now,
        attempts: int = 3,
        merge_gate: MergeGatePort | None = None,
        queue: EventQueue | None = None,
        paused: PauseSource | None = None,
    ) -> None:
        self.merge_gate = merge_gate
        self.paused = paused
        #: events.fifo, for the commands effects lead to (a filed blocker issue's registration).
        self.queue = queue
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.attempts = attempts
        self.registry = registry
        self.launcher = launcher
        self.github = github
        self.policies = policies
        self.clock = clock
        self._held: list[str] = []

    def pause_for(self, event: EventEnvelope) -> str | None:
        """Why ``event``'s repository is paused, or None (it is not, or nothing says)."""
        return self.paused(event) if self.paused is not None else None

    def process(self, event: EventEnvelope, *, pause: str | None = None) -> RoutingResult:
        """Route ``event`` and apply its effects (with ``pause``, only what starts nothing).

        A lost conditional write (an agent task renewed its lease or heartbeat between
        our read and our write) re-reads and re-decides, up to :attr:`attempts` times:
        what was applied before the conflict is in the registry now, so the new decision
        does only the rest. Past the bound the ConflictError propagates and the queue
        retries the record later.
        """
        policy = self.policies(event)
        applied: list[Effect] = []
        transitions: tuple[str, ...] = ()
        self._held = []
        for attempt in range(1, self.attempts + 1):
            snapshot = self.load(event, snapshot_request(event, policy), policy)
            effects = route(event, snapshot, policy)
            if pause is not None:
                effects = hold_while_paused(effects, snapshot.agents(), pause)
            try:
                self.apply(event, effects, snapshot.now)
            except ConflictError as exc:
                if attempt == self.attempts:
                    raise
                logger.info(
                    "conflict routing %s (attempt %d): %s; re-reading", event.delivery_id, attempt, exc
                )
                continue
            applied = effects
            transitions = status_changes(snapshot.agents(), effects)
            break
        return RoutingResult(event.delivery_id, tuple(applied), transitions, tuple(self._held))

    # --- reads ----------------------------------------------------------------------------

    def load(self, event: EventEnvelope, request: SnapshotRequest, policy: RoutingPolicy) -> Snapshot:
        repo = event.repository.id
        views = {n: self.registry.issue_view(repo, n) for n in sorted(request.issues)}
        links = self.registry.branch_links(repo, request.branches) if request.branches else {}
        if request.follow_links:
            # Second round: the issues a PR or branch links to, and the issues a closed one blocks.
            more: set[int] = set(links.values())
            for view in list(views.values()):
                if view.linked_issue is not None:
                    more.add(view.linked_issue)
                more.update(view.blocks)
            for branch in request.branches:
                parsed = policy.issue_from_branch(branch)
                if parsed is not None:
                    more.add(parsed)
            for number in sorted(more - views.keys()):
                views[number] = self.registry.issue_view(repo, number)
        graph = (
            self.registry.blocker_graph(repo, request.graph_from, policy.max_issue_depth + 1)
            if request.graph_from
            else {}
        )
        return Snapshot(
            now=self.clock(),
            issues=views,
            pm=self.registry.pm_agent(repo) if request.pm else None,
            branch_links=links,
            graph=graph,
            permissions=self._permissions(event, request),
            inbox=tuple(self.registry.pending_inbox(request.inbox_of)) if request.inbox_of else (),
        )

    def _permissions(self, event: EventEnvelope, request: SnapshotRequest) -> dict[str, str]:
        """Each human actor's permission, from GitHub's permission endpoint (at most two per event).

        Never from the payload's ``author_association``: OWNER, MEMBER and COLLABORATOR do not
        imply write access, and an agent's echo could claim any of them.
        """
        return {
            login: self.github.permission(event.installation_id, event.repository.full_name, login)
            for login in sorted(request.permissions_of)
        }

    # --- writes ---------------------------------------------------------------------------

    def apply(self, event: EventEnvelope, effects: list[Effect], now: datetime) -> None:
        for effect in apply_order(effects):
            self._apply_one(event, effect, now)

    def _file_blocker(self, event: EventEnvelope, effect: FileBlockerIssue, now: datetime) -> None:
        """Open the issue, then register it as the agent's blocker (it sleeps) through events.fifo."""
        if self.queue is None:
            raise RuntimeError("a blocker issue needs events.fifo to register it: wire the router's queue")
        number = self.github.create_issue(
            effect.installation_id,
            effect.repo_full_name,
            title=effect.title,
            body=effect.body,
            labels=effect.labels,
            assignees=effect.assignees,
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
                now=now,
            )
        )

    def _launch(self, agent_id: str, purpose: str, token: str, now: datetime) -> None:
        """Arm the launch with a fresh secret (only its hash is stored), start the task, confirm it.

        The decision (the pending launch) is committed before; the secret is drawn here because
        it must be random and must never be stored. A retry after a crash draws another: the
        task an earlier attempt may have started holds a secret that is no longer accepted.
        """
        secret = secrets.token_urlsafe(SECRET_BYTES)
        if not self.registry.arm_launch(agent_id, token, secret_digest(secret), now + SECRET_TTL, now):
            logger.info("launch %s of %s is no longer pending; not started", token, agent_id)
            return
        try:
            task_arn = self.launcher.launch(agent_id, purpose, token, secret)
        except TaskLaunchError as exc:
            # The decision stands (the launch stays pending): a Fargate quota or a lack of capacity
            # is not this event's fault. The reconciler retries the launch with back-off; the
            # AgentLaunchesHeld alarm tells a human. Nothing goes back to the queue.
            logger.warning("launch %s of %s held: %s", token, agent_id, exc)
            self.registry.hold_launch(agent_id, token, str(exc), now)
            self._held.append(agent_id)
            return
        self.registry.confirm_launch(agent_id, token, task_arn, now)

    def _apply_one(self, event: EventEnvelope, effect: Effect, now: datetime) -> None:
        registry = self.registry
        match effect:
            case PostComment(
                repo_full_name=repo, installation_id=inst, number=number, body=body, author=author
            ):
                self.github.comment(inst, repo, number, body, author)
            case CloseIssue(repo_full_name=repo, installation_id=inst, number=number, reason=reason):
                self.github.close_issue(inst, repo, number, reason)
            case AddLabels(repo_full_name=repo, installation_id=inst, number=number, labels=labels):
                self.github.add_labels(inst, repo, number, labels)
            case CreateIssue(repo_full_name=repo, installation_id=inst):
                self.github.create_issue(
                    inst,
                    repo,
                    title=effect.title,
                    body=effect.body,
                    labels=effect.labels,
                    assignees=effect.assignees,
                )
            case PutAgent(write=write):
                registry.put_agent(write)
            case SetIssueState(repo_id=repo_id, number=number, state=state, occurred_at=occurred_at):
                registry.set_issue_state(repo_id, number, state, occurred_at)
            case SetIssueAssignment(
                repo_id=repo_id, number=number, assigned=assigned, occurred_at=occurred_at
            ):
                registry.set_issue_assignment(repo_id, number, assigned, occurred_at)
            case AddBlocker(repo_id=repo_id, issue=issue, blocker=blocker, agent=agent):
                registry.add_blocker(repo_id, issue, blocker, agent, now)
            case RemoveBlocker(repo_id=repo_id, issue=issue, blocker=blocker, agent=agent):
                registry.remove_blocker(repo_id, issue, blocker, agent, now)
            case LinkPullRequest(repo_id=repo_id, pr_number=pr, issue_number=issue, agent=agent):
                registry.link_pull_request(repo_id, pr, issue, agent, now)
            case DeliverInbox(item=item):
                registry.deliver(item)
            case RecordReview():
                registry.record_review(effect, now)
            case LaunchAgent(agent_id=agent_id, purpose=purpose, token=token):
                self._launch(agent_id, purpose, token, now)
            case StopAgentTask(task_arn=task_arn, reason=reason):
                self.launcher.stop(task_arn, reason)
            case EvaluateMerge(repo_full_name=repo, installation_id=inst, pr_number=pr, author_role=role):
                if self.merge_gate is None:
                    logger.info("no merge gate wired; PR #%s of %s not judged", pr, repo)
                else:
                    outcome = self.merge_gate.evaluate(
                        inst, repo, pr, role, issue_number=effect.issue_number, cause=effect.cause
                    )
                    logger.info("merge gate on %s#%s: %s", repo, pr, getattr(outcome, "detail", outcome))
            case FileBlockerIssue():
                self._file_blocker(event, effect, now)
            case Discard(reason=reason):
                logger.info("discarded %s.%s: %s", event.event, event.action, reason)
