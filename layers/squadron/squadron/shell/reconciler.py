"""The reconciler shell: read the registry, ECS and GitHub, decide (pure), send the repairs.

One run per EventBridge tick (every five minutes). Reads are bounded: one
Query per agent status, one DescribeTasks per 100 live tasks, one GitHub read
per issue or PR the live agents refer to — at most ``max_reads`` per
installation and run (GitHub's limit is per installation), a rotating window
when there are more (:func:`~squadron.domain.reconcile.plan_reads`) — one
paginated listing of the App's deliveries and at most ``MAX_REDELIVERIES``
redeliveries. With the default of 200 a run uses under half of an
installation's 5,000 requests an hour, and 1,000 agents' issues are all read
every 25 minutes. Repairs are webhooks replayed onto events.fifo, and
commands (relaunch a dead task once, then escalate; escalate a sleeper past
its max_sleep_duration; a conflict nobody works on), so the router stays the
only writer of agent state. Each run also asks the dashboards queue for every
repository with agents (one SendMessageBatch per ten): the sweep that shows on
the dashboard issues what no domain event reported. A GitHub error on one number is reported and the
run goes on; a rate limit ends that installation's reading for the run.
The reads go through the GitHub transport's ETag cache: an issue or PR unchanged
since the last run (in a warm container, under the same installation token: the
cache is per credential, so about an hour) is answered 304 Not Modified, which
GitHub does not count against the rate limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from squadron.adapters.github.errors import GitHubError, RateLimitedError
from squadron.adapters.github.keyed import once
from squadron.config.parse import parse_files
from squadron.config.policy import routing_policy
from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.domain_events import Repository
from squadron.domain.effects import Decision, effect_key, marked
from squadron.domain.reconcile import (
    RELAUNCH,
    UNFINISHED_AFTER,
    Liveness,
    RepoState,
    TimeoutNotice,
    conflicts,
    finish_commands,
    plan_reads,
    redeliveries,
    replays,
    rescues,
    timeouts,
)
from squadron.domain.repo_config.models import RepoConfig
from squadron.domain.routing import RoutingPolicy
from squadron.errors import SquadronError
from squadron.ports import EventQueue, RefreshQueue, ScheduleSync
from squadron.shell.pipeline_runs import PipelineRuns

logger = logging.getLogger(__name__)

Json = dict[str, Any]


class AgentSweep(Protocol):
    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]: ...
    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]: ...


class RepoReader(Protocol):
    """Reads of one repository with the framework's credentials (``GitHubClient`` satisfies it)."""

    def get_repository(self) -> Json: ...
    def get_issue(self, number: int) -> Json: ...
    def get_pull(self, number: int) -> Json: ...
    def add_labels(self, number: int, labels: Iterable[str]) -> list[Json]: ...
    def comment(self, number: int, body: str) -> Json: ...
    def find_comment(self, number: int, key: str, login: str | None, since: datetime) -> Json | None: ...
    def add_assignees(self, number: int, logins: Iterable[str]) -> Json: ...


class TaskStatus(Protocol):
    """Which agent tasks still run (``EcsTaskStatus`` satisfies it)."""

    def running(self, task_arns: Sequence[str]) -> frozenset[str]: ...


#: Limits and policy of a repository without configuration (the documented defaults).
_DEFAULTS = parse_files({}).config
_DEFAULT_POLICY = routing_policy(parse_files({}))


def liveness_of(config: RepoConfig, agent: AgentRecord) -> Liveness:
    """The sleep limit of ``agent``'s role and the staleness bound of ``config``."""
    limits = config.circuit_breakers.limits_for(agent.role)
    return Liveness(limits, timedelta(seconds=config.runtime.stale_after))


def default_liveness(agent: AgentRecord) -> Liveness:
    return liveness_of(_DEFAULTS, agent)


class Deliveries(Protocol):
    """The App's webhook deliveries (``GitHubAppClient`` satisfies it)."""

    def list_deliveries(self, *, limit: int = 500) -> list[Json]: ...
    def redeliver(self, delivery_id: int) -> None: ...


def _now() -> datetime:
    return datetime.now(UTC)


#: How far before a run its keyed notice may have been made, looking it up: clocks differ.
CLOCK_SKEW = timedelta(minutes=5)
#: The statuses each run counts (finished agents are not: there is no end to them).
COUNTED_STATUSES = (AgentStatus.CREATED, AgentStatus.ACTIVE, AgentStatus.SLEEPING, AgentStatus.ESCALATED)


@dataclass
class ReconcileReport:
    repositories: int = 0
    agents: int = 0
    reads: int = 0
    replayed: list[str] = field(default_factory=list)
    #: RecoverAgent commands sent (dead tasks to relaunch, sleepers to escalate).
    rescued: list[str] = field(default_factory=list)
    #: PRs that waited past their flow's on_timeout and were handed to humans.
    timed_out: list[str] = field(default_factory=list)
    redelivered: list[int] = field(default_factory=list)
    #: FinishDecision commands sent (decisions committed and left unfinished).
    finished: list[str] = field(default_factory=list)
    #: Repositories whose dashboard this run asked to be rendered (the dashboards queue renders
    #: it, and edits it only when what it shows changed).
    dashboards: list[str] = field(default_factory=list)
    #: Retrospective schedules created, updated or deleted ("owner/name: ...").
    schedules: list[str] = field(default_factory=list)
    #: Pipelines' state machines created or given a new version, and those left for their runs
    #: because their pipeline left the configuration ("owner/name: ...").
    pipelines: list[str] = field(default_factory=list)
    #: Whether this run asked the router to step the change sets in motion (docs/change-sets.md).
    change_sets_swept: bool = False
    #: What could not be read or done, in words (logged; the next run tries again).
    problems: list[str] = field(default_factory=list)
    #: Agents per status (the live ones and those with humans), counted this run.
    by_status: dict[str, int] = field(default_factory=dict)

    @property
    def relaunched(self) -> list[str]:
        """Rescues of agents whose task went silent (no heartbeat, task gone, launch lost)."""
        return [delivery for delivery in self.rescued if delivery.endswith(f"-{RELAUNCH}")]

    def repairs(self) -> dict[str, int]:
        """What this run repaired, by kind."""
        return {
            "relaunch": len(self.relaunched),
            "sleep_overdue": len(self.rescued) - len(self.relaunched),
            "missed_event": len(self.replayed),
            "review_timeout": len(self.timed_out),
            "redelivery": len(self.redelivered),
            "unfinished_decision": len(self.finished),
        }


class ReconcilerService:
    def __init__(
        self,
        *,
        registry: AgentSweep,
        queue: EventQueue,
        reader: Callable[[int | None, str], RepoReader],
        deliveries: Deliveries | None,
        completed: Callable[[str], bool],
        liveness: Callable[[AgentRecord], Liveness] = default_liveness,
        policy_for: Callable[[str], RoutingPolicy] = lambda repo: _DEFAULT_POLICY,
        bot_login: str,
        tasks: TaskStatus | None = None,
        clock: Callable[[], datetime] = _now,
        max_reads: int = 200,
        schedules: ScheduleSync | None = None,
        dashboards: RefreshQueue | None = None,
        pipelines: PipelineRuns | None = None,
        change_sets: Callable[[datetime], bool] | None = None,
    ) -> None:
        #: Asks the router to step the change sets that are merging, failed or reverting
        #: (:func:`squadron.shell.change_set_merging.request_sweep`; None: not asked).
        self.change_sets = change_sets
        #: Keeps each repository's pipelines' state machines in step with its configuration.
        self.pipelines = pipelines
        #: Keeps each repository's retrospective schedule in step with its configuration.
        self.schedules = schedules
        #: Where each run asks for the repositories' dashboards (None: no dashboards).
        self.dashboards = dashboards
        self.liveness = liveness
        self.policy_for = policy_for
        self.tasks = tasks
        self.registry = registry
        self.queue = queue
        self.reader = reader
        self.deliveries = deliveries
        self.completed = completed
        self.bot_login = bot_login
        self.clock = clock
        self.max_reads = max_reads

    def run(self) -> ReconcileReport:
        report = ReconcileReport()
        now = self.clock()
        live = [
            agent
            for status in (AgentStatus.SLEEPING, AgentStatus.ACTIVE, AgentStatus.CREATED)
            for agent in self.registry.agents_with_status(status)
        ]
        report.agents = len(live)
        escalated = self.registry.agents_with_status(AgentStatus.ESCALATED)
        report.by_status = {status.value: 0 for status in COUNTED_STATUSES}
        for agent in [*live, *escalated]:
            report.by_status[agent.status.value] = report.by_status.get(agent.status.value, 0) + 1
        running = self._running(live, report)
        for envelope in rescues(live, now=now, liveness=self._liveness(report), running=running):
            self.queue.send(envelope)
            report.rescued.append(envelope.delivery_id)
        by_installation: dict[int | None, dict[int, list[AgentRecord]]] = {}
        for agent in sorted(live, key=lambda a: a.agent_id):
            by_installation.setdefault(agent.installation_id, {}).setdefault(agent.repo_id, []).append(agent)
        for repos in by_installation.values():
            plan = plan_reads(repos, self.max_reads, now)
            for repo_id, agents in sorted(repos.items()):
                state = self._read(agents, plan.get(repo_id, []), now, report)
                report.repositories += 1
                for envelope in [*replays(state, bot_login=self.bot_login), *conflicts(state)]:
                    self.queue.send(envelope)
                    report.replayed.append(envelope.delivery_id)
                self._timeouts(state, report)
                if state.rate_limited:
                    break  # this installation's budget is GitHub's now; the next run goes on
        self._redeliver(now, report)
        self._sweep_decisions(now, report)
        self._schedules([*live, *escalated], report)
        self._pipelines([*live, *escalated], report)
        self._ask_dashboards([*live, *escalated], report)
        self._sweep_change_sets(now, report)
        for problem in report.problems:
            logger.warning("reconciler: %s", problem)
        return report

    def _read(
        self, agents: list[AgentRecord], numbers: list[int], now: datetime, report: ReconcileReport
    ) -> RepoState:
        first = agents[0]
        repository = {"id": first.repo_id, "full_name": first.repo_full_name}
        github: dict[int, Json] = {}
        state = RepoState(repository, first.installation_id, agents, github, now)
        if not numbers:
            return state
        try:
            reader = self.reader(first.installation_id, first.repo_full_name)
        except SquadronError as exc:
            report.problems.append(f"{first.repo_full_name} not read: {exc}")
            return state
        prs = {a.pr_number for a in agents if a.pr_number is not None}
        for number in numbers:
            report.reads += 1
            try:
                github[number] = reader.get_pull(number) if number in prs else reader.get_issue(number)
            except RateLimitedError as exc:
                report.problems.append(f"rate limited reading {first.repo_full_name}#{number}: {exc}")
                return RepoState(repository, first.installation_id, agents, github, now, rate_limited=True)
            except GitHubError as exc:
                report.problems.append(f"{first.repo_full_name}#{number} not read: {exc}")
        return state

    def _timeouts(self, state: RepoState, report: ReconcileReport) -> None:
        repo = str(state.repository["full_name"])
        try:
            policy = self.policy_for(repo)
        except Exception as exc:  # configuration unreadable: the defaults' rule applies
            report.problems.append(f"{repo}: configuration not read, default on_timeout used: {exc}")
            policy = _DEFAULT_POLICY
        notices = timeouts(state, policy, fallback_label=policy.escalation_label)
        if not notices:
            return
        github = self.reader(state.installation_id, repo)
        since = self.clock() - CLOCK_SKEW
        for notice in notices:
            try:
                self._notify(github, repo, notice, since)
            except GitHubError as exc:
                report.problems.append(f"{repo}#{notice.pr_number}: timeout not escalated: {exc}")
                continue
            report.timed_out.append(f"{repo}#{notice.pr_number}")

    def _notify(self, github: RepoReader, repo: str, notice: TimeoutNotice, since: datetime) -> None:
        """Label the PR, say so, assign.

        The label says "told" (a labelled PR is left alone), so it goes first and two runs never
        post the notice twice. The notice is keyed: GitHub may apply it and answer 5xx (or lose the
        answer); it is then looked up by its key and sent again only when GitHub shows nothing
        (:mod:`squadron.adapters.github.keyed`), so it appears once and the assignment after it
        still follows (docs/exactly-once.md).
        """
        number = notice.pr_number
        key = effect_key(f"timeout\x00{repo}\x00{number}\x00{notice.label}", 0)
        github.add_labels(number, [notice.label])
        once(
            lambda: github.comment(number, marked(notice.body, key)),
            lambda: github.find_comment(number, key, self.bot_login, since),
        )
        if notice.assignees:
            github.add_assignees(number, notice.assignees)

    def _schedules(self, agents: list[AgentRecord], report: ReconcileReport) -> None:
        """Each repository's retrospective schedule, in step with its configuration."""
        if self.schedules is None:
            return
        by_repo: dict[tuple[int | None, str], list[AgentRecord]] = {}
        for agent in agents:
            by_repo.setdefault((agent.installation_id, agent.repo_full_name), []).append(agent)
        for (installation, repo), theirs in sorted(by_repo.items(), key=lambda item: item[0][1]):
            try:
                policy = self.policy_for(repo)
            except Exception as exc:  # configuration unreadable: the defaults apply
                report.problems.append(f"{repo}: configuration not read, schedule with defaults: {exc}")
                policy = _DEFAULT_POLICY
            try:
                outcome = self.schedules.ensure(
                    theirs[0].repo_id,
                    repo,
                    installation,
                    expression=policy.retrospective.schedule,
                    enabled=policy.retrospective.enabled,
                )
                if outcome not in ("unchanged", "absent"):
                    report.schedules.append(f"{repo}: retrospective schedule {outcome}")
            except SquadronError as exc:
                report.problems.append(f"{repo}: retrospective schedule not kept: {exc}")

    def _pipelines(self, agents: list[AgentRecord], report: ReconcileReport) -> None:
        """Each repository's pipelines, published in step with its configuration (a pipeline
        that does not compile is a problem; the others are published all the same)."""
        if self.pipelines is None:
            return
        repos: dict[str, int] = {}
        for agent in agents:
            repos.setdefault(agent.repo_full_name, agent.repo_id)
        for repo, repo_id in sorted(repos.items()):
            try:
                configured = self.policy_for(repo).pipelines
            except Exception as exc:  # configuration unreadable: leave its pipelines as they are
                report.problems.append(f"{repo}: configuration not read, pipelines left as they are: {exc}")
                continue
            try:
                published = self.pipelines.publish(repo_id, repo, configured)
                left = self.pipelines.left(repo_id, configured)
            except SquadronError as exc:
                report.problems.append(f"{repo}: pipelines not kept in step: {exc}")
                continue
            report.pipelines += published.lines
            report.problems += published.problems
            report.pipelines += [
                f"{repo}: state machine {arn.rsplit(':', 1)[1]} left for its runs (its pipeline is no longer "
                "configured; no run starts)"
                for arn in left
            ]

    def _ask_dashboards(self, agents: list[AgentRecord], report: ReconcileReport) -> None:
        """Ask for each repository's dashboard to be rendered (the sweep: what no domain event
        reported is shown too; a repository rendered within the minute is deferred, not edited)."""
        if self.dashboards is None:
            return
        wanted: dict[int, RefreshRequest] = {}
        for agent in sorted(agents, key=lambda a: a.repo_full_name):
            wanted.setdefault(
                agent.repo_id,
                RefreshRequest(
                    repository=Repository(id=agent.repo_id, full_name=agent.repo_full_name),
                    installation=agent.installation_id,
                    cause="sweep",
                ),
            )
        try:
            self.dashboards.request_all(list(wanted.values()))
        except SquadronError as exc:
            report.problems.append(f"dashboards not asked for: {exc}")
            return
        report.dashboards = [request.repository.full_name for request in wanted.values()]

    def _sweep_change_sets(self, now: datetime, report: ReconcileReport) -> None:
        if self.change_sets is None:
            return
        try:
            report.change_sets_swept = self.change_sets(now)
        except SquadronError as exc:  # the queue did not take it: the next run asks again
            report.problems.append(f"change sets: {exc}")

    def _sweep_decisions(self, now: datetime, report: ReconcileReport) -> None:
        """Decisions the router committed and did not carry out (their delivery was dead-lettered)."""
        try:
            left = self.registry.unfinished_decisions(now - UNFINISHED_AFTER)
        except SquadronError as exc:
            report.problems.append(f"unfinished decisions not read: {exc}")
            return
        for envelope in finish_commands(left, now):
            self.queue.send(envelope)
            report.finished.append(envelope.delivery_id)

    def _running(self, live: list[AgentRecord], report: ReconcileReport) -> frozenset[str] | None:
        arns = [agent.task_arn for agent in live if agent.task_arn]
        if self.tasks is None or not arns:
            return None if self.tasks is None else frozenset()
        try:
            return self.tasks.running(arns)
        except SquadronError as exc:
            report.problems.append(f"ECS not asked which tasks run (heartbeats decide alone): {exc}")
            return None

    def _liveness(self, report: ReconcileReport) -> Callable[[AgentRecord], Liveness]:
        def rules(agent: AgentRecord) -> Liveness:
            try:
                return self.liveness(agent)
            except Exception as exc:  # the repository's configuration: fall back to the defaults
                report.problems.append(
                    f"{agent.repo_full_name}: configuration not read, defaults used: {exc}"
                )
                return default_liveness(agent)

        return rules

    def _redeliver(self, now: datetime, report: ReconcileReport) -> None:
        if self.deliveries is None:
            return
        try:
            listed = self.deliveries.list_deliveries()
        except GitHubError as exc:
            report.problems.append(f"webhook deliveries not listed: {exc}")
            return
        # Only the deliveries that would be redelivered are looked up (one read each).
        guid_of = {d.get("id"): str(d.get("guid")) for d in listed}
        candidates = redeliveries(listed, processed=(), now=now, limit=len(listed))
        processed = {guid_of[i] for i in candidates if self._completed(guid_of[i])}
        for delivery_id in redeliveries(listed, processed=processed, now=now):
            try:
                self.deliveries.redeliver(delivery_id)
            except GitHubError as exc:
                report.problems.append(f"delivery {delivery_id} not redelivered: {exc}")
                continue
            report.redelivered.append(delivery_id)

    def _completed(self, guid: str) -> bool:
        try:
            return self.completed(guid)
        except Exception as exc:  # an unknown answer never redelivers: processing twice is worse
            logger.warning("reconciler: could not tell whether %s was processed: %s", guid, exc)
            return True
