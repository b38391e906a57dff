"""The router shell: load what the core asks for, route, commit the decision, carry it out.

One call of :meth:`RouterService.process` handles one envelope:

1. If a decision of this delivery is committed already (an earlier attempt crashed
   after its commit), nothing is decided again: what it left undone is carried out.
2. Otherwise route (pure), apply the event's facts (idempotent), and commit the
   decision: its registry writes (agents, edges, links, inbox items) and its record, the outbox of every
   effect outside the registry, in one transaction. A lost condition (a heartbeat
   moved an agent's version) re-reads and re-decides: nothing outside the registry
   has happened yet.
3. Carry out the outbox in order — GitHub, tasks, merge gate — each effect
   under its key (:func:`~squadron.domain.effects.effect_key`), then mark the
   decision done. A retry finds what a crash left: creations (comments, issues)
   are looked up by their hidden key first; labels, closing and launches (by
   their token) are harmless to repeat.

It raises on any failure, so the record goes back to the queue (and, after enough
receives, to the DLQ); a decision left unfinished there is found by the
reconciler, which sends :class:`~squadron.domain.events.FinishDecision`. A
repository whose configuration is invalid is paused (:meth:`RouterService.pause_for`):
its events are routed, but what would start something is withheld
(:func:`~squadron.domain.pause.hold_while_paused`), under a decision of its own.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, assert_never

from squadron.adapters.github.errors import GitHubError
from squadron.domain.agents import AgentStatus, ConflictError
from squadron.domain.domain_events import (
    MergeGateVerdictChanged,
    Repository,
    RetroWindow,
    derive,
    gate_event_id,
    make_event,
)
from squadron.domain.effects import (
    AddLabels,
    CloseIssue,
    ConfirmMemory,
    CreateIssue,
    Decision,
    Discard,
    Effect,
    EvaluateMerge,
    Fact,
    FileBlockerIssue,
    LaunchAgent,
    OpenRetrospective,
    Outside,
    PostComment,
    RecordReview,
    SetIssueAssignment,
    SetIssueState,
    StopAgentTask,
    VouchIssue,
    agent_writes,
    decision_key,
    effect_key,
    split_decision,
    status_changes,
)
from squadron.domain.events import EventEnvelope, FinishDecision, RegisterBlocker, command_envelope
from squadron.domain.memory import MemoryPolicy
from squadron.domain.outbox import failed_effect, given_up, permanent
from squadron.domain.pause import hold_while_paused
from squadron.domain.retrospective import ROLE as RETRO_ROLE
from squadron.domain.routing import (
    RoutingPolicy,
    Snapshot,
    SnapshotRequest,
    as_webhook,
    route,
    snapshot_request,
)
from squadron.errors import SquadronError
from squadron.ports import EventQueue, MergeGatePort, Registry, RouterGitHub, TaskLauncher
from squadron.shell.launching import carry_out_launch
from squadron.shell.memory import Memory
from squadron.shell.retrospective import Retrospectives

logger = logging.getLogger(__name__)


class LeaseLostError(SquadronError):
    """Another executor claimed the decision while this one carried it out (this one stops)."""

    def __init__(self, key: str, index: int) -> None:
        super().__init__(
            f"decision {key}: claim lost before effect {index} was recorded; another executor goes on"
        )


def _now() -> datetime:
    return datetime.now(UTC)


#: How far before a decision's time a retry looks for what it created (GitHub's clock and
#: ours may disagree by a little; a wider window only reads a few more comments).
CLOCK_SKEW = timedelta(minutes=5)


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
    #: A decision committed by an earlier attempt was carried out (nothing was decided now).
    resumed: bool = False
    #: The kinds of the effects recorded now as refused for good (GitHub 404/410/422, given up).
    failed: tuple[str, ...] = ()
    #: Another executor held the decision: this one carried out nothing of it.
    busy: bool = False

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
        memory: Memory | None = None,
        retrospectives: Retrospectives | None = None,
    ) -> None:
        #: Holds a retrospective when a decision asks for one (None: not held).
        self.retrospectives = retrospectives
        #: The repositories' memory: a person's merge confirms the facts its PR lists.
        self.memory = memory
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
        self._failed: list[str] = []
        self._busy = False

    def pause_for(self, event: EventEnvelope) -> str | None:
        """Why ``event``'s repository is paused, or None (it is not, or nothing says)."""
        return self.paused(event) if self.paused is not None else None

    def process(
        self, event: EventEnvelope, *, pause: str | None = None, first_receive: bool = False
    ) -> RoutingResult:
        """Route ``event``, commit the decision, carry it out (with ``pause``, only what starts nothing).

        A lost conditional write (an agent task renewed its lease or heartbeat between our
        read and our commit) stores nothing: re-read and re-decide, up to :attr:`attempts`
        times. Past the bound the ConflictError propagates and the queue retries the record
        later. A decision already committed for this delivery is carried out, not re-decided.

        ``first_receive``: the queue delivers this record for the first time, so no earlier
        attempt of it committed anything, and the decision is not looked up first (a read per
        event saved). Should another message of the same delivery have committed one, the
        commit says so (its record exists) and the next attempt carries that one out; a
        re-decision that commits nothing leaves it to the reconciler's sweep.
        """
        self._held = []
        self._failed = []
        self._busy = False
        if isinstance(event.command, FinishDecision):
            return self._finish(event, event.command.decision)
        key = decision_key(event.delivery_id, paused=pause is not None)
        policy = self.policies(event)
        for attempt in range(1, self.attempts + 1):
            committed = self.registry.decision(key) if attempt > 1 or not first_receive else None
            if committed is not None:
                return self._resume(event, committed)
            snapshot = self.load(event, snapshot_request(event, policy), policy)
            effects = route(event, snapshot, policy)
            if pause is not None:
                effects = hold_while_paused(effects, snapshot.agents(), pause)
            split = split_decision(effects)
            for fact in split.facts:
                self._fact(fact, snapshot.now)
            # Launches alone need no sweep: an agent's committed pending launch is its own outbox
            # (a retry of this delivery starts it, else the next event of its issue or the
            # reconciler). The record keeps them for the retry, and is done at once.
            kept = any(not isinstance(e, LaunchAgent) for e in split.outside)
            decision = Decision(
                key,
                snapshot.now,
                split.outside,
                done=not kept,
                installation_id=event.installation_id,
                repo_full_name=event.repository.full_name,
                repo_id=event.repository.id,
            )
            events = derive(
                as_webhook(event, policy.bot_login),  # an agent's action as the webhook it stands for
                decision=key,
                before=snapshot.agents(),
                blockers={n: view.blockers for n, view in snapshot.issues.items()},
                linked_issues={n: view.linked_issue for n, view in snapshot.issues.items()},
                effects=effects,
                at=snapshot.now,
                retrospectives=self._retrospectives_completed(effects),
            )
            if split.writes or split.outside or events:
                try:
                    self.registry.commit(split.writes, decision, events)
                except ConflictError as exc:
                    if attempt == self.attempts:
                        raise
                    logger.info(
                        "conflict routing %s (attempt %d): %s; re-reading", event.delivery_id, attempt, exc
                    )
                    continue
            transitions = status_changes(snapshot.agents(), effects)
            self._carry_out(
                event, decision.key, split.outside, snapshot.now, resumed=False, finish=bool(kept)
            )
            return self._result(event.delivery_id, tuple(effects), transitions)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _retrospectives_completed(self, effects: Sequence[Effect]) -> dict[int, RetroWindow]:
        """The retrospectives whose agent the decision completes (read only when it does one)."""
        done = [
            w.record
            for w in agent_writes(effects)
            if w.record.role == RETRO_ROLE
            and w.record.status is AgentStatus.COMPLETED
            and w.record.issue_number
        ]
        if not done or self.retrospectives is None:
            return {}
        held = {r.issue_number: r for r in self.retrospectives.store.retrospectives(done[0].repo_id)}
        return {
            record.issue_number: RetroWindow(
                window_start=r.window_start,
                window_end=r.window_end,
                proposals=len(r.items),
                pull_request=r.pull_request,
            )
            for record in done
            if record.issue_number is not None and (r := held.get(record.issue_number)) is not None
        }

    def _resume(self, event: EventEnvelope, decision: Decision) -> RoutingResult:
        if decision.done:
            # Only its launches may be left (each a no-op unless still pending).
            launches = [effect for effect in decision.outside if isinstance(effect, LaunchAgent)]
            logger.info(
                "decision %s was carried out already (%d launches checked)", decision.key, len(launches)
            )
            self._carry_out(event, decision.key, launches, decision.decided_at, resumed=True, finish=False)
            return self._result(event.delivery_id, (), (), resumed=True)
        logger.info("carrying out what decision %s left undone", decision.key)
        self._carry_out(event, decision.key, decision.outside, decision.decided_at, resumed=True, finish=True)
        return self._result(event.delivery_id, decision.outside, (), resumed=True)

    def _result(
        self,
        delivery_id: str,
        effects: tuple[Effect, ...],
        transitions: tuple[str, ...],
        *,
        resumed: bool = False,
    ) -> RoutingResult:
        return RoutingResult(
            delivery_id,
            effects,
            transitions,
            tuple(self._held),
            resumed=resumed,
            failed=tuple(self._failed),
            busy=self._busy,
        )

    def _finish(self, event: EventEnvelope, key: str) -> RoutingResult:
        """The reconciler's FinishDecision: carry out an unfinished decision, decide nothing."""
        decision = self.registry.decision(key)
        if decision is None or decision.done:
            reason = "no such decision" if decision is None else "carried out already"
            return RoutingResult(event.delivery_id, (Discard(f"decision {key}: {reason}"),))
        if decision.repo_id != event.repository.id:
            reason = f"decision {key} is not of repository {event.repository.id}"
            return RoutingResult(event.delivery_id, (Discard(reason),))
        return self._resume(event, decision)

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
                if view.number in request.pull_requests_of:
                    more.update(sorted(view.pull_requests)[:5])
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

    def _fact(self, fact: Fact, now: datetime) -> None:
        """News of the event itself: idempotent, and older news never overwrites newer."""
        match fact:
            case SetIssueState(repo_id=repo_id, number=number, state=state, occurred_at=occurred_at):
                self.registry.set_issue_state(repo_id, number, state, occurred_at)
            case SetIssueAssignment(
                repo_id=repo_id, number=number, assigned=assigned, occurred_at=occurred_at
            ):
                self.registry.set_issue_assignment(repo_id, number, assigned, occurred_at)
            case VouchIssue(repo_id=repo_id, number=number, by=by, occurred_at=occurred_at):
                self.registry.vouch_issue(repo_id, number, by, occurred_at)
            case RecordReview():
                self.registry.record_review(fact, now)

    def _carry_out(
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
            self._busy = True
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
        self._failed.append(failed.effect)

    def _outside(self, event: EventEnvelope, effect: Outside, key: str, look_since: datetime | None) -> None:
        github = self.github
        match effect:
            case PostComment(repo_full_name=repo, installation_id=inst, number=number, body=body):
                if look_since is not None and github.find_comment(inst, repo, number, key, look_since):
                    logger.info("comment %s on %s#%s was posted already", key, repo, number)
                    return
                github.comment(inst, repo, number, body, effect.author, key=key)
            case CloseIssue(repo_full_name=repo, installation_id=inst, number=number, reason=reason):
                github.close_issue(inst, repo, number, reason)
            case AddLabels(repo_full_name=repo, installation_id=inst, number=number, labels=labels):
                github.add_labels(inst, repo, number, labels)
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
                        **_queue_args(effect),
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
            case _:  # pragma: no cover - exhaustiveness: mypy reports an unhandled effect type
                assert_never(effect)

    def _verdict(
        self, event: EventEnvelope, effect: EvaluateMerge, key: str, verdict: str, text: str
    ) -> None:
        """Report a change of the gate's verdict on the PR, once (keyed by the effect and verdict)."""
        repo_id = event.repository.id
        previous, said = self.registry.gate_state(repo_id, effect.pr_number)
        if previous == verdict:
            # The same verdict; what it waits for may have moved on (the dashboard shows it).
            if said != text[:140]:
                self.registry.set_gate_description(repo_id, effect.pr_number, verdict, text[:140])
            return
        data = MergeGateVerdictChanged.model_validate(
            {
                "pr_number": effect.pr_number,
                "verdict": verdict,
                "previous": previous,
                "description": text[:140],
            }
        )
        changed = make_event(
            data,
            event_id=gate_event_id(key, verdict),
            at=self.clock(),
            repository=Repository(id=repo_id, full_name=effect.repo_full_name),
            correlation_id=event.delivery_id,
            installation=effect.installation_id,
            issue=effect.issue_number,
        )
        if not self.registry.change_verdict(repo_id, effect.pr_number, previous, changed):
            logger.info("verdict on #%s changed meanwhile; %s not reported", effect.pr_number, verdict)

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
            self._held.append(agent_id)


def _queue_args(effect: EvaluateMerge) -> dict[str, Any]:
    """The merge queue's part of a judgement (only when there is one: a gate without it still works)."""
    args: dict[str, Any] = {}
    if effect.merge_group:
        args["merge_group"] = effect.merge_group
    if effect.queue_merged:
        args["queue_merged"] = True
    return args
