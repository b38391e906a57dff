"""The dashboards shell: render repositories' dashboard issues when asked, at most once a
minute each (the rules: :mod:`squadron.domain.dashboard_refresh`; the body:
:mod:`squadron.domain.dashboard`).

One call handles a batch of refresh requests (a Lambda invocation's SQS records): one request
per repository is kept, each claims its repository's slot (one conditional write) or defers
(at most one more write and one delayed message), and the registry is read once for every
repository claimed (one Query per status shown, the merge gate's views in one BatchGetItem per
repository, its memory in one Query). A claimed repository's issue is found by its label and
marker (one GitHub listing, conditional: usually a 304) and edited only when the body's digest
changed; only a sweep opens it where there is none. A repository whose rendering fails is reported with its problem: its requests go back
to the queue (retried, then dead-lettered), and the next sweep renders it anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from squadron.adapters.github.errors import GitHubError
from squadron.config.parse import parse_files
from squadron.config.policy import routing_policy
from squadron.domain import dashboard
from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.domain.app_acts import is_dashboard
from squadron.domain.change_sets import ChangeSet
from squadron.domain.dashboard_refresh import (
    REFRESH_INTERVAL,
    RefreshRequest,
    by_repository,
    claim_cutoff,
    delay_seconds,
    due,
)
from squadron.domain.outbox import FailedEffect
from squadron.domain.pipeline_runs import RunSummary
from squadron.domain.routing import RoutingPolicy
from squadron.errors import SquadronError
from squadron.ports import DashboardSlots, MemoryStore, RefreshQueue, RenderClaim

logger = logging.getLogger(__name__)

Json = dict[str, Any]

#: The statuses a dashboard shows (finished agents only as a short trace: "Recently ended").
SHOWN = (AgentStatus.ESCALATED, AgentStatus.ACTIVE, AgentStatus.CREATED, AgentStatus.SLEEPING)
#: Ended agents read per terminal status for every repository rendered at once (the newest).
ENDED_READ = 100
#: Issues listed for the blocker graph's titles (one page, the most recently updated).
TITLES_READ = 100
#: The policy of a repository without configuration (the documented defaults).
_DEFAULT_POLICY = routing_policy(parse_files({}))


class DashboardReads(Protocol):
    """The registry's reads a rendering needs (``DynamoRegistry`` satisfies it)."""

    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]: ...
    def gate_views(self, repo_id: int, pr_numbers: Iterable[int]) -> dict[int, dashboard.GateView]: ...
    def failed_effects(self, repo_id: int, limit: int = 20) -> list[FailedEffect]: ...
    def recently_finished(self, limit: int) -> list[AgentRecord]: ...


class DashboardIssues(Protocol):
    """One repository's issues with the framework's credentials (``GitHubClient`` satisfies it)."""

    def list_issues(
        self, *, labels: Iterable[str] = (), state: str = "open", limit: int = 100
    ) -> list[Json]: ...
    def create_issue(
        self, title: str, body: str, *, labels: Iterable[str] = (), assignees: Iterable[str] = ()
    ) -> Json: ...
    def update_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> Json: ...


@dataclass
class RefreshReport:
    #: Repositories whose dashboard was rendered ("owner/name"), edited or not.
    rendered: list[str] = field(default_factory=list)
    #: Dashboard issues created or edited ("owner/name#number"); unchanged ones are not.
    edited: list[str] = field(default_factory=list)
    #: Repositories rendered less than the interval ago whose deferred rendering this queued.
    deferred: list[str] = field(default_factory=list)
    #: Repositories whose request a deferred rendering already queued covers.
    covered: list[str] = field(default_factory=list)
    #: Repositories whose configuration turns the dashboard off.
    off: list[str] = field(default_factory=list)
    #: Repositories without a dashboard issue yet, asked by events only (the sweep opens it).
    unopened: list[str] = field(default_factory=list)
    #: Repository id -> what failed (its requests go back to the queue).
    failed: dict[int, str] = field(default_factory=dict)


def _now() -> datetime:
    return datetime.now(UTC)


class DashboardService:
    def __init__(
        self,
        *,
        registry: DashboardReads,
        slots: DashboardSlots,
        queue: RefreshQueue,
        reader: Callable[[int | None, str], DashboardIssues],
        bot_login: str,
        policy_for: Callable[[str], RoutingPolicy] = lambda repo: _DEFAULT_POLICY,
        memory: MemoryStore | None = None,
        clock: Callable[[], datetime] = _now,
        interval: timedelta = REFRESH_INTERVAL,
        web_url: str = dashboard.GITHUB_WEB_URL,
        pipelines: Callable[[int, int], tuple[Sequence[RunSummary], int]] | None = None,
        change_sets: Callable[[], Sequence[ChangeSet]] | None = None,
    ) -> None:
        if interval <= timedelta(0):
            raise ValueError(f"the refresh interval must be positive, got {interval}")
        self.registry = registry
        self.slots = slots
        self.queue = queue
        self.reader = reader
        self.bot_login = bot_login
        self.policy_for = policy_for
        self.memory = memory
        self.clock = clock
        self.interval = interval
        #: GitHub's web address (github.com, or a GitHub Enterprise Server's): every link's base.
        self.web_url = web_url
        #: A repository's running pipeline runs, at most that many, and how many more
        #: (:meth:`squadron.adapters.pipeline_runs.PipelineRuns.running`); None: no pipelines.
        self.pipelines = pipelines
        #: The installation's change sets, newest first (each dashboard shows those including
        #: its repository: docs/change-sets.md); None: none shown.
        self.change_sets = change_sets

    def refresh(self, requests: Sequence[RefreshRequest]) -> RefreshReport:
        report = RefreshReport()
        now = self.clock()
        claims = {r.repository.id: c for r in by_repository(requests) if (c := self._claim(r, now, report))}
        claimed = [r for r in by_repository(requests) if r.repository.id in claims]
        if not claimed:
            return report
        try:
            agents = [agent for status in SHOWN for agent in self.registry.agents_with_status(status)]
            # The latest ended ones, of every repository at once (one bounded page per status).
            ended = self.registry.recently_finished(ENDED_READ)
            # The change sets, read once for every repository (at most a page of them).
            sets = list(self.change_sets()) if self.change_sets is not None else []
        except SquadronError as exc:
            for request in claimed:
                report.failed[request.repository.id] = f"agents not read: {exc}"
            return report
        by_repo: dict[int, list[AgentRecord]] = {}
        for agent in agents:
            by_repo.setdefault(agent.repo_id, []).append(agent)
        ended_by_repo: dict[int, list[AgentRecord]] = {}
        for agent in ended:
            ended_by_repo.setdefault(agent.repo_id, []).append(agent)
        for request in claimed:
            repo = request.repository
            try:
                wrote = self._render(
                    request,
                    by_repo.get(repo.id, []),
                    now,
                    report,
                    ended=ended_by_repo.get(repo.id, []),
                    change_sets=sets,
                )
                if not wrote:  # nothing edited: the minute is not spent (a change may come now)
                    self.slots.release(repo.id, now, claims[repo.id].previous)
            except (SquadronError, GitHubError) as exc:
                report.failed[repo.id] = f"{repo.full_name}: dashboard not rendered: {exc}"
        for problem in report.failed.values():
            logger.warning("dashboards: %s", problem)
        return report

    def _claim(self, request: RefreshRequest, now: datetime, report: RefreshReport) -> RenderClaim | None:
        """The claim of ``request``'s rendering; None: not now, its deferred one is queued (once)."""
        repo = request.repository
        try:
            claim = self.slots.claim(repo.id, now, claim_cutoff(now, self.interval))
            if claim.claimed:
                return claim
            until = due(claim.rendered_at or now, self.interval)
            if self.slots.defer(repo.id, until, now, again=request.deferred):
                deferred = request.model_copy(update={"deferred": True, "event_id": None})
                self.queue.request(deferred, delay_seconds=delay_seconds(until, now))
                report.deferred.append(repo.full_name)
            else:
                report.covered.append(repo.full_name)
        except SquadronError as exc:
            report.failed[repo.id] = f"{repo.full_name}: refresh not claimed or deferred: {exc}"
        return None

    def _render(
        self,
        request: RefreshRequest,
        agents: list[AgentRecord],
        now: datetime,
        report: RefreshReport,
        *,
        ended: Sequence[AgentRecord] = (),
        change_sets: Sequence[ChangeSet] = (),
    ) -> bool:
        """Render ``request``'s repository; whether its issue was opened or edited."""
        repo = request.repository.full_name
        installation = request.installation or next((a.installation_id for a in agents), None)
        github = self.reader(installation, repo)  # first: the configuration is read through it
        try:
            policy = self.policy_for(repo)
        except Exception as exc:  # configuration unreadable: the defaults apply
            logger.warning("dashboards: %s: configuration not read, dashboard with defaults: %s", repo, exc)
            policy = _DEFAULT_POLICY
        if not policy.dashboard:
            report.off.append(repo)
            return False
        prs = sorted({a.pr_number for a in agents if a.pr_number is not None and a.kind is RoleKind.DEV})
        gates = self.registry.gate_views(request.repository.id, prs[: dashboard.MAX_ROWS]) if prs else {}
        facts = self.memory.facts(request.repository.id) if self.memory is not None else []
        failed = self.registry.failed_effects(request.repository.id)
        titles = _titles(github) if any(a.blocked_by for a in agents) else {}
        runs, more = self._running(request.repository.id)
        body = dashboard.with_marker(
            dashboard.render(
                repo,
                agents,
                gates=gates,
                prices=policy.prices,
                memory=facts,
                memory_policy=policy.memory,
                failed=failed,
                ended=ended,
                titles=titles,
                web_url=self.web_url,
                pipelines=runs,
                pipelines_more=more,
                change_sets=change_sets,
                now=now,
            )
        )
        report.rendered.append(repo)
        found = [
            issue
            for issue in github.list_issues(labels=(dashboard.LABEL,), state="open")
            if "pull_request" not in issue
            and is_dashboard(
                [str(label.get("name")) for label in issue.get("labels") or []],
                (issue.get("user") or {}).get("login"),
                self.bot_login,
            )
            and dashboard.MARKER in str(issue.get("body") or "")
        ]
        if not found:
            if not request.opens:
                report.unopened.append(repo)  # the next sweep opens it
                return False
            created = github.create_issue(dashboard.TITLE, body, labels=(dashboard.LABEL,))
            report.edited.append(f"{repo}#{created.get('number')}")
            return True
        issue = min(found, key=lambda i: int(i["number"]))  # the first, should a race have made two
        if dashboard.current_digest(str(issue.get("body") or "")) == dashboard.digest_of(body):
            return False  # nothing it shows changed: no edit (and no notification)
        github.update_issue(int(issue["number"]), body=body)
        report.edited.append(f"{repo}#{issue['number']}")
        return True

    def _running(self, repo_id: int) -> tuple[Sequence[RunSummary], int]:
        """The repository's running pipeline runs; none when Step Functions cannot be read (the
        rest of the dashboard is still rendered; the next rendering shows them)."""
        if self.pipelines is None:
            return [], 0
        try:
            return self.pipelines(repo_id, dashboard.MAX_PIPELINE_RUNS)
        except SquadronError as exc:
            logger.warning("dashboards: repository %s: pipeline runs not read: %s", repo_id, exc)
            return [], 0


def _titles(github: DashboardIssues) -> dict[int, str]:
    """Issue titles by number for the blocker graph: one listing (open and closed, the latest
    updated); an issue not in it is drawn without its title."""
    return {
        int(issue["number"]): str(issue.get("title") or "")
        for issue in github.list_issues(state="all", limit=TITLES_READ)
        if isinstance(issue.get("number"), int)
    }
