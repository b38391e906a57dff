"""What the shell loads for one event (:func:`snapshot_request`) and what handlers read (:class:`Snapshot`, :class:`IssueView`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from squadron.domain import dashboard
from squadron.domain.agents import (
    TERMINAL,
    AgentRecord,
    InboxItem,
    IssueState,
    RegistryError,
    RoleKind,
    parse_agent_id,
)
from squadron.domain.app_acts import AgentReported, app_act, is_app, is_dashboard
from squadron.domain.authority import permissions_needed
from squadron.domain.blockers import BlockerGraph
from squadron.domain.commands import RecoverAgent, RegisterBlocker, ReportConflict, TaskEnded
from squadron.domain.effects import (
    Effect,
)
from squadron.domain.events import EventEnvelope
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.pipelines.reactions import could_steer
from squadron.domain.pipelines.triggers import could_start, event_name
from squadron.domain.routing.normalize import as_webhook, normalize_comment
from squadron.domain.routing.policy import RoutingPolicy


@dataclass(frozen=True)
class IssueView:
    """What the registry holds about one issue or pull request number."""

    number: int
    state: IssueState | None = None
    #: GitHub time of the event that set ``state``.
    state_at: datetime | None = None
    #: Whether the App is assigned, and the GitHub time of that (un)assignment.
    app_assigned: bool | None = None
    assigned_at: datetime | None = None
    #: Who vouched for the issue (:mod:`squadron.domain.vouching`); None: nobody yet.
    vouched_by: str | None = None
    agents: tuple[AgentRecord, ...] = ()
    blockers: frozenset[int] = frozenset()
    blocks: frozenset[int] = frozenset()
    linked_issue: int | None = None
    #: Pull requests linked to this issue.
    pull_requests: frozenset[int] = frozenset()
    #: What the running tasks of the agents whose cost counts for this issue have spent so far, by
    #: agent id, as their hosts last reported it (:mod:`squadron.domain.issue_budget`).
    live: Mapping[str, LiveSpend] = field(default_factory=dict)

    def state_is_newer_than(self, occurred_at: datetime | None) -> bool:
        return occurred_at is not None and self.state_at is not None and self.state_at > occurred_at

    def assignment_is_newer_than(self, occurred_at: datetime | None) -> bool:
        return occurred_at is not None and self.assigned_at is not None and self.assigned_at > occurred_at

    def agent_of_kind(self, *kinds: RoleKind) -> AgentRecord | None:
        """The newest agent of one of ``kinds`` on this number (non-terminal first)."""
        candidates = [a for a in self.agents if a.kind in kinds]
        candidates.sort(key=lambda a: (a.status not in TERMINAL, a.updated_at))
        return candidates[-1] if candidates else None

    def agent_with_role(self, role: str) -> AgentRecord | None:
        return next((a for a in self.agents if a.role == role), None)


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    issues: Mapping[int, IssueView] = field(default_factory=dict)
    pm: AgentRecord | None = None
    branch_links: Mapping[str, int] = field(default_factory=dict)
    graph: BlockerGraph = field(default_factory=dict)
    #: Repository permission of each login :attr:`SnapshotRequest.permissions_of` named.
    permissions: Mapping[str, str] = field(default_factory=dict)
    #: The pending inbox of :attr:`SnapshotRequest.inbox_of`.
    inbox: tuple[InboxItem, ...] = ()

    def view(self, number: int) -> IssueView:
        return self.issues.get(number) or IssueView(number)

    def agents(self) -> Iterable[AgentRecord]:
        seen: set[str] = set()
        for view in self.issues.values():
            for agent in view.agents:
                if agent.agent_id not in seen:
                    seen.add(agent.agent_id)
                    yield agent
        if self.pm is not None and self.pm.agent_id not in seen:
            yield self.pm


@dataclass(frozen=True)
class SnapshotRequest:
    """What the shell must load before routing an event."""

    issues: frozenset[int] = frozenset()
    branches: frozenset[str] = frozenset()
    pm: bool = False
    #: The human actors whose repository permission the authority rule needs.
    permissions_of: frozenset[str] = frozenset()
    graph_from: frozenset[int] = frozenset()
    #: Load the views of issues these numbers block / are linked to (a second round).
    follow_links: bool = True
    #: In that round, the pull requests linked to these issues too (their reviewers' cost
    #: counts for the issue's budget).
    pull_requests_of: frozenset[int] = frozenset()
    #: Load this agent's pending inbox (does news wait for an agent whose task just ended?).
    inbox_of: str | None = None


def _vouching_needs(event: EventEnvelope, policy: RoutingPolicy) -> tuple[set[str], set[int]]:
    """Who opened the event's issue (did a writer? Asked of people only) and, for an agent's issue,
    the issue that agent works for (its blocker issue is as vouched for): :mod:`squadron.domain.vouching`."""
    authors: set[str] = set()
    sources: set[int] = set()
    if event.issue is None or event.event != "issues":
        return authors, sources
    author = event.issue.author
    if (
        event.action in ("opened", "reopened", "assigned")
        and author
        and not author.endswith("[bot]")
        and not is_app(author, policy.bot_login)
    ):
        authors.add(author)
    act = app_act(event, policy.bot_login)
    if isinstance(act, AgentReported) and act.issue_number is not None:
        sources.add(act.issue_number)
    return authors, sources


def _starter(event: EventEnvelope, policy: RoutingPolicy) -> frozenset[str]:
    """The sender of an event that triggers a pipeline, when a person: their write access vouches
    for the run (:mod:`squadron.domain.routing.pipelines`)."""
    sender = event.sender
    if (
        sender.is_bot
        or is_app(sender.login, policy.bot_login)
        or not (could_start(policy.pipelines, event) or could_steer(policy.pipelines, event_name(event)))
    ):
        return frozenset()
    return frozenset({sender.login})


def snapshot_request(event: EventEnvelope, policy: RoutingPolicy) -> SnapshotRequest:
    """The registry items ``route`` needs for this event."""
    event = as_webhook(event, policy.bot_login)
    issues: set[int] = set()
    branches: set[str] = set()
    graph_from: set[int] = set()
    pm = False
    authors, sources = _vouching_needs(event, policy)
    issues.update(sources)
    if event.issue is not None:
        issues.add(event.issue.number)
        if event.event == "issues" and event.action in ("opened", "reopened", "labeled"):
            pm = True
        if event.event == "issues" and event.action == "assigned":
            graph_from.add(event.issue.number)
        if (
            event.event == "issues"
            and event.action == "edited"
            and is_dashboard(event.issue.labels, event.issue.author, policy.bot_login)
        ):
            # The agents its ticked boxes name: their issues (a PM has none to read here).
            for _, agent_id in dashboard.checked_actions(event.issue.body):
                try:
                    repo_id, number, _ = parse_agent_id(agent_id)
                except RegistryError:
                    continue  # not an agent id: the handler discards it
                if repo_id == event.repository.id and number is not None:
                    issues.add(number)
    if event.pull_request is not None:
        issues.add(event.pull_request.number)
        branches.add(event.pull_request.head_ref)
    if event.check is not None:
        # Only through its pull requests: a check's head branch may be a fork's (builders.agent_for_commit).
        issues.update(event.check.pull_request_numbers[:5])
    if event.status is not None:
        branches.update(event.status.branches[:10])
    if event.merge_group is not None and event.merge_group.pr_number is not None:
        issues.add(event.merge_group.pr_number)
    if isinstance(event.command, RegisterBlocker):
        issues.update({event.command.issue_number, event.command.blocker_number})
        graph_from.update({event.command.issue_number, event.command.blocker_number})
    elif isinstance(event.command, ReportConflict):
        issues.add(event.command.issue_number)
    elif isinstance(event.command, RecoverAgent | TaskEnded):
        if event.command.issue_number is None:
            pm = True
        else:
            issues.add(event.command.issue_number)
    comment = normalize_comment(event)
    if comment is not None and event.event != "pull_request_review":
        pm = pm or policy.mentions_pm(comment.body)
    return SnapshotRequest(
        issues=frozenset(issues),
        branches=frozenset(branches),
        pm=pm,
        permissions_of=permissions_needed(event, policy.bot_login) | authors | _starter(event, policy),
        graph_from=frozenset(graph_from),
        pull_requests_of=(
            frozenset({event.command.issue_number})
            if isinstance(event.command, TaskEnded)
            and event.command.issue_number is not None
            and policy.issue_budget_usd is not None
            else frozenset()
        ),
        inbox_of=(
            event.command.agent_id
            if isinstance(event.command, TaskEnded) and event.command.outcome == "idle"
            else None
        ),
    )


Handler = Callable[[EventEnvelope, Snapshot, RoutingPolicy], list[Effect]]
