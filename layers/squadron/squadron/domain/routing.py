"""The router's decision: ``route(event, snapshot, policy) -> effects`` — pure.

Routing is an explicit table keyed by (event, action) (:data:`ROUTES`). Each
handler reads the :class:`Snapshot` — the registry items the shell loaded for
this event, as :func:`snapshot_request` asked — and returns typed effects. The
same event against the same snapshot always gives the same effects, and an
event replayed against the state its first processing left behind gives
nothing new: that is what makes redelivery harmless.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from squadron.domain.agents import (
    LIVE,
    TERMINAL,
    AgentRecord,
    AgentStatus,
    BreakerCounters,
    InboxItem,
    IssueState,
    RegistryError,
    RoleKind,
    agent_id_for,
    parse_agent_id,
)
from squadron.domain.authority import judge, permissions_needed, refusal
from squadron.domain.blockers import BlockerError, BlockerGraph, check_new_blocker, height_of
from squadron.domain.effects import (
    AddBlocker,
    AddLabels,
    AgentWrite,
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
)
from squadron.domain.events import (
    ROUTED_EVENTS,
    SQUADRON_EVENT,
    Actor,
    EventEnvelope,
    IssueFields,
    RecoverAgent,
    RegisterBlocker,
    ReportConflict,
    TaskEnded,
)
from squadron.domain.repo_config.flows import resolve_flow
from squadron.domain.repo_config.globs import fnmatch_matches
from squadron.domain.repo_config.models import ApprovalFlowsFile, EscalationRule, FlowEscalation

FAILED_CHECK_CONCLUSIONS = frozenset(
    {"failure", "timed_out", "cancelled", "action_required", "startup_failure"}
)
FAILED_STATUS_STATES = frozenset({"failure", "error"})

_CLOSING_RE = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+(?:(?P<repo>[\w.-]+/[\w.-]+))?#(?P<number>\d+)\b",
    re.IGNORECASE,
)


# --- policy -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutingPolicy:
    """The part of a repository's .squadron configuration that routing reads.

    Built from the repository's configuration by :func:`squadron.config.policy.routing_policy`;
    the defaults here equal the documented configuration defaults.
    """

    bot_login: str = "squadron[bot]"
    pm_role: str = "pm"
    pm_mentions: tuple[str, ...] = ("@squadron-pm",)
    default_dev_role: str = "feat-dev"
    label_roles: Mapping[str, str] = field(default_factory=lambda: {"bug": "bug-fix", "feature": "feat-dev"})
    role_kinds: Mapping[str, RoleKind] = field(
        default_factory=lambda: {
            "pm": RoleKind.PM,
            "feat-dev": RoleKind.DEV,
            "bug-fix": RoleKind.DEV,
            "pr-review": RoleKind.REVIEW,
            "security-review": RoleKind.REVIEW,
        }
    )
    branch_templates: Mapping[str, str] = field(
        default_factory=lambda: {
            "feat-dev": "feat/issue-{issue_number}",
            "bug-fix": "fix/issue-{issue_number}",
        }
    )
    #: Label -> branch template; the first label of the issue with one wins over the role's.
    label_branch_templates: Mapping[str, str] = field(
        default_factory=lambda: {"security": "security/issue-{issue_number}"}
    )
    default_branch_template: str = "squadron/issue-{issue_number}"
    #: Agent review roles every PR gets (auto-assigned), whatever its base branch.
    review_roles: tuple[str, ...] = ("pr-review",)
    #: (fnmatch pattern of a base branch, review roles its PRs get in addition).
    branch_review_roles: tuple[tuple[str, tuple[str, ...]], ...] = ()
    max_issue_depth: int = 3
    #: Handing an agent's issue to humans: the label, who is assigned, and whether a
    #: needs-human issue is filed.
    escalation_label: str = "needs-human"
    escalation_assignees: tuple[str, ...] = ()
    escalation_issue: bool = True
    #: ``@login`` of the humans an escalation notifies.
    escalation_mentions: tuple[str, ...] = ()
    #: Relaunches of a dead task before its agent is escalated instead.
    max_recoveries: int = 1
    #: The approval flows: their escalation rules (on_ci_failure, on_review_rejection) per base.
    flows: ApprovalFlowsFile = field(default_factory=ApprovalFlowsFile)
    #: Human groups by name, to expand ``human_group:<name>`` in escalation notices.
    human_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def escalation_for(self, base_branch: str) -> FlowEscalation:
        return resolve_flow(self.flows, base_branch).escalation

    def mentions(self, principals: Iterable[str]) -> tuple[str, ...]:
        """``@login`` of every principal (``human_group:<g>`` expanded, ``user:<login>``), each once."""
        logins: list[str] = []
        for principal in principals:
            kind, _, name = str(principal).partition(":")
            members = self.human_groups.get(name, ()) if kind == "human_group" else (name,)
            logins += [f"@{login}" for login in members if f"@{login}" not in logins]
        return tuple(logins)

    def kind_of(self, role: str) -> RoleKind:
        return self.role_kinds.get(role, RoleKind.DEV)

    def dev_role_for(self, labels: Iterable[str]) -> str:
        for label in labels:
            role = self.label_roles.get(label)
            if role is not None:
                return role
        return self.default_dev_role

    def branch_for(self, role: str, issue_number: int, labels: Iterable[str] = ()) -> str:
        template = next(
            (self.label_branch_templates[label] for label in labels if label in self.label_branch_templates),
            self.branch_templates.get(role, self.default_branch_template),
        )
        return template.format(issue_number=issue_number, role=role)

    def issue_from_branch(self, branch: str) -> int | None:
        templates = {
            *self.branch_templates.values(),
            *self.label_branch_templates.values(),
            self.default_branch_template,
        }
        for template in sorted(templates):
            match = _template_regex(template).fullmatch(branch)
            if match:
                return int(match.group("issue_number"))
        return None

    def review_roles_for(self, base_branch: str) -> tuple[str, ...]:
        """The agent review roles a PR into ``base_branch`` gets: the default's plus matching rules'."""
        roles = list(self.review_roles)
        for pattern, extra in self.branch_review_roles:
            if fnmatch_matches(base_branch, pattern):
                roles += [role for role in extra if role not in roles]
        return tuple(roles)

    def mentions_pm(self, body: str) -> bool:
        return any(
            re.search(rf"(?<![\w-]){re.escape(handle)}(?![\w-])", body, re.IGNORECASE)
            for handle in self.pm_mentions
        )


@functools.cache
def _template_regex(template: str) -> re.Pattern[str]:
    """A branch template as a regex: ``{issue_number}`` captures digits, ``{role}`` a role name."""
    parts = re.split(r"(\{issue_number\}|\{role\})", template)
    pattern = "".join(
        "(?P<issue_number>[0-9]+)"
        if part == "{issue_number}"
        else "[a-z0-9][a-z0-9-]*"
        if part == "{role}"
        else re.escape(part)
        for part in parts
    )
    return re.compile(pattern)


# --- snapshot ---------------------------------------------------------------------------------


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
    agents: tuple[AgentRecord, ...] = ()
    blockers: frozenset[int] = frozenset()
    blocks: frozenset[int] = frozenset()
    linked_issue: int | None = None
    #: Pull requests linked to this issue.
    pull_requests: frozenset[int] = frozenset()

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
    #: Load this agent's pending inbox (does news wait for an agent whose task just ended?).
    inbox_of: str | None = None


# --- normalized comment-like events -----------------------------------------------------------


@dataclass(frozen=True)
class CommentEvent:
    """Every comment-like event in one shape (Prow's "generic comment")."""

    number: int
    on_pull_request: bool
    author: Actor
    author_association: str | None
    body: str
    url: str | None
    kind: Literal["issue_comment", "review_comment", "review"]
    review_state: str | None = None


def normalize_comment(event: EventEnvelope) -> CommentEvent | None:
    if event.comment is not None:
        if event.issue is not None:
            number, on_pr = event.issue.number, event.issue.is_pull_request
        elif event.pull_request is not None:
            number, on_pr = event.pull_request.number, True
        else:
            return None
        return CommentEvent(
            number,
            on_pr,
            event.comment.author,
            event.comment.author_association,
            event.comment.body,
            event.comment.html_url,
            event.comment.kind,
        )
    if event.review is not None and event.pull_request is not None:
        return CommentEvent(
            event.pull_request.number,
            True,
            event.review.author,
            event.review.author_association,
            event.review.body,
            None,
            "review",
            event.review.state,
        )
    return None


def closing_references(body: str, repo_full_name: str) -> list[int]:
    """Issue numbers a pull request body closes with GitHub's keywords, in order, same repository only."""
    numbers: list[int] = []
    for match in _CLOSING_RE.finditer(body or ""):
        repo = match.group("repo")
        if repo is not None and repo.lower() != repo_full_name.lower():
            continue
        number = int(match.group("number"))
        if number not in numbers:
            numbers.append(number)
    return numbers


def snapshot_request(event: EventEnvelope, policy: RoutingPolicy) -> SnapshotRequest:
    """The registry items ``route`` needs for this event."""
    issues: set[int] = set()
    branches: set[str] = set()
    graph_from: set[int] = set()
    pm = False
    if event.issue is not None:
        issues.add(event.issue.number)
        if event.event == "issues" and event.action in ("opened", "reopened", "labeled"):
            pm = True
        if event.event == "issues" and event.action == "assigned":
            graph_from.add(event.issue.number)
    if event.pull_request is not None:
        issues.add(event.pull_request.number)
        branches.add(event.pull_request.head_ref)
        issues.update(closing_references(event.pull_request.body, event.repository.full_name)[:5])
    if event.check is not None:
        issues.update(event.check.pull_request_numbers[:5])
        if event.check.head_branch:
            branches.add(event.check.head_branch)
    if event.status is not None:
        branches.update(event.status.branches[:10])
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
        permissions_of=permissions_needed(event, policy.bot_login),
        graph_from=frozenset(graph_from),
        inbox_of=(
            event.command.agent_id
            if isinstance(event.command, TaskEnded) and event.command.outcome == "idle"
            else None
        ),
    )


# --- effect builders --------------------------------------------------------------------------


def launch_token(agent: AgentRecord) -> str:
    """The id of ``agent``'s latest launch (see :attr:`AgentRecord.launch_token`)."""
    return agent.launch_token


def _with_launch(agent: AgentRecord, cause: str) -> AgentRecord:
    """``agent`` marked as needing a task, with a fresh launch token.

    A launch that was decided but never confirmed keeps its token: the task it names may be
    starting right now (ECS deduplicates RunTask by that token), so a second decision must
    resume it rather than start a second task for the same agent.
    """
    if agent.pending_launch is not None:
        return agent.model_copy(update={"launch_cause": cause})
    counters = agent.counters.model_copy(update={"launches": agent.counters.launches + 1})
    launched = agent.model_copy(update={"counters": counters, "launch_cause": cause})
    return launched.model_copy(update={"pending_launch": launch_token(launched), "task_arn": None})


def _launch(agent: AgentRecord, reason: str) -> LaunchAgent:
    assert agent.pending_launch is not None
    purpose: Literal["start", "wake"] = "start" if agent.status is AgentStatus.CREATED else "wake"
    return LaunchAgent(agent.agent_id, purpose, reason, agent.pending_launch)


def _wake(
    agent: AgentRecord, event: EventEnvelope, snap: Snapshot, reason: str
) -> tuple[AgentWrite, LaunchAgent]:
    counters = agent.counters.model_copy(update={"wakes": agent.counters.wakes + 1})
    changes = {"wake_reason": reason, "counters": counters}
    awake = (
        agent.updated(now=snap.now, **changes)  # idle: already ACTIVE, only its task had ended
        if agent.status is AgentStatus.ACTIVE
        else agent.transition(AgentStatus.ACTIVE, now=snap.now, **changes)
    )
    woken = _with_launch(awake, event.delivery_id)
    return AgentWrite(woken, agent.version), _launch(woken, reason)


def is_idle(agent: AgentRecord) -> bool:
    """ACTIVE, but its task ended its turn (report_complete, or nothing left to do): no task runs."""
    return agent.status is AgentStatus.ACTIVE and agent.task_arn is None and agent.pending_launch is None


def _wakeable(agent: AgentRecord, event: EventEnvelope) -> bool:
    """Asleep, escalated or idle — and not already launched by this very delivery (a replay)."""
    if agent.launch_cause == event.delivery_id:
        return False
    return agent.status in (AgentStatus.SLEEPING, AgentStatus.ESCALATED) or is_idle(agent)


def _inbox(
    agent: AgentRecord,
    event: EventEnvelope,
    kind: str,
    summary: str,
    *,
    body: str = "",
    url: str | None = None,
    subject: int | None = None,
) -> DeliverInbox:
    return DeliverInbox(
        InboxItem(
            agent_id=agent.agent_id,
            delivery_id=event.delivery_id,
            received_at=event.received_at,
            kind=kind,
            summary=summary,
            actor=event.sender.login,
            url=url,
            body=body,
            subject=subject,
        )
    )


def _notify(
    agent: AgentRecord | None,
    event: EventEnvelope,
    snap: Snapshot,
    kind: str,
    summary: str,
    *,
    wake: bool,
    body: str = "",
    url: str | None = None,
) -> list[Effect]:
    """Put an item in the agent's inbox; wake it when asked and it is asleep or escalated."""
    if agent is None:
        return [Discard(f"no agent to tell: {summary}")]
    if agent.status in TERMINAL:
        return [Discard(f"agent {agent.agent_id} is {agent.status}; stale event: {summary}")]
    if agent.predates(event.occurred_at):
        return [Discard(f"event predates generation {agent.generation} of {agent.agent_id}: {summary}")]
    effects: list[Effect] = [_inbox(agent, event, kind, summary, body=body, url=url)]
    if wake and _wakeable(agent, event):
        write, launch = _wake(agent, event, snap, summary)
        effects += [PutAgent(write), launch]
    return effects


def _new_agent(
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    role: str,
    number: int | None,
    *,
    branch: str | None,
) -> AgentRecord:
    return AgentRecord(
        generation_started_at=event.occurred_at or event.received_at,
        last_event_at=event.occurred_at or event.received_at,
        agent_id=agent_id_for(event.repository.id, role, number),
        role=role,
        kind=policy.kind_of(role),
        repo_id=event.repository.id,
        repo_full_name=event.repository.full_name,
        installation_id=event.installation_id,
        issue_number=number,
        branch=branch,
        created_at=snap.now,
        updated_at=snap.now,
    )


def _new_generation(existing: AgentRecord, fresh: AgentRecord, snap: Snapshot) -> AgentRecord:
    """A terminal agent restarted as its next generation: a new session, nothing carried over."""
    return existing.transition(
        AgentStatus.CREATED,
        now=snap.now,
        generation=existing.generation + 1,
        generation_started_at=fresh.generation_started_at,
        last_event_at=fresh.last_event_at,
        blocked_by=frozenset(),
        pr_number=fresh.pr_number,
        branch=fresh.branch,
        installation_id=fresh.installation_id or existing.installation_id,
        counters=BreakerCounters(),
        wake_reason=None,
        escalation_reason=None,
        lease_owner=None,
        lease_expires_at=None,
        heartbeat_at=None,
        task_arn=None,
        pending_launch=None,
        launch_secret_hash=None,
        launch_secret_expires_at=None,
    )


def _start(
    existing: AgentRecord | None, fresh: AgentRecord, event: EventEnvelope, snap: Snapshot, reason: str
) -> list[Effect]:
    """Create ``fresh``, or restart a terminal ``existing`` one as a new generation; then launch it."""
    if existing is None:
        record = _with_launch(fresh, event.delivery_id)
        return [PutAgent(AgentWrite(record, None)), _launch(record, reason)]
    if existing.superseded(fresh.generation_started_at):
        return [Discard(f"{existing.agent_id} changed after this event happened: {reason}")]
    restarted = _new_generation(existing, fresh, snap)
    record = _with_launch(restarted, event.delivery_id)
    return [PutAgent(AgentWrite(record, existing.version)), _launch(record, reason)]


def _end(
    agent: AgentRecord, event: EventEnvelope, snap: Snapshot, status: AgentStatus, reason: str
) -> list[Effect]:
    """Finish a non-terminal agent (COMPLETED or CANCELLED) and stop its task if one may run."""
    if agent.status in TERMINAL:
        return []
    if agent.superseded(event.occurred_at):
        return [Discard(f"{agent.agent_id} changed after this event happened: {reason}")]
    ended = agent.transition(
        status,
        now=snap.now,
        pending_launch=None,
        blocked_by=frozenset(),
        last_event_at=event.occurred_at or agent.last_event_at,
    )
    effects: list[Effect] = [PutAgent(AgentWrite(ended, agent.version))]
    if agent.task_arn and agent.status in LIVE:
        effects.append(StopAgentTask(agent.agent_id, agent.task_arn, reason))
    return effects


def _pm_effects(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, kind: str, summary: str, *, body: str = ""
) -> list[Effect]:
    """Queue an item for the repository's PM and make sure one PM task (at most) is running."""
    pm = snap.pm
    fresh = _new_agent(event, snap, policy, policy.pm_role, None, branch=None)
    effects: list[Effect] = []
    if pm is None or pm.status in TERMINAL:
        effects += _start(pm, fresh, event, snap, f"PM batch: {summary}")
    target = pm if pm is not None and pm.status not in TERMINAL else fresh
    effects.append(_inbox(target, event, kind, summary, body=body))
    if pm is not None and _wakeable(pm, event):
        write, launch = _wake(pm, event, snap, summary)
        effects += [PutAgent(write), launch]
    return effects


# --- handlers ---------------------------------------------------------------------------------

Handler = Callable[[EventEnvelope, Snapshot, RoutingPolicy], list[Effect]]


def _event_time(event: EventEnvelope) -> datetime:
    return event.occurred_at or event.received_at


def _issue(event: EventEnvelope) -> IssueFields:
    assert event.issue is not None, f"{event.event}.{event.action} without an issue"
    return event.issue


def _on_issue_opened(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = _issue(event)
    view = snap.view(issue.number)
    effects: list[Effect] = []
    if view.state is not IssueState.OPEN and not view.state_is_newer_than(event.occurred_at):
        effects.append(SetIssueState(event.repository.id, issue.number, IssueState.OPEN, _event_time(event)))
    verb = "reopened" if event.action == "reopened" else "opened"
    summary = f"#{issue.number} {verb} by {event.sender.login}: {issue.title}"
    return effects + _pm_effects(event, snap, policy, f"issue_{verb}", summary, body=issue.body)


def _on_issue_labeled(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = _issue(event)
    summary = f"#{issue.number} labeled '{event.label}' by {event.sender.login}"
    return _pm_effects(event, snap, policy, "issue_labeled", summary)


def _on_issue_edited(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = _issue(event)
    agent = snap.view(issue.number).agent_of_kind(RoleKind.DEV)
    summary = f"#{issue.number} was edited by {event.sender.login}"
    return _notify(
        agent, event, snap, "issue_edited", summary, wake=False, body=issue.body, url=issue.html_url
    )


def _on_issue_assigned(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = _issue(event)
    if event.assignee is None or event.assignee.login != policy.bot_login:
        return [
            Discard(
                f"#{issue.number} assigned to {event.assignee.login if event.assignee else 'nobody'}, not the App"
            )
        ]
    if issue.is_pull_request:
        return [Discard(f"#{issue.number} is a pull request; only issues get dev agents")]
    view = snap.view(issue.number)
    if view.assignment_is_newer_than(event.occurred_at):
        return [Discard(f"#{issue.number} was (un)assigned after this assignment happened")]
    recorded: list[Effect] = [SetIssueAssignment(event.repository.id, issue.number, True, _event_time(event))]
    return recorded + _assign(event, snap, policy, view)


def _assign(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, view: IssueView) -> list[Effect]:
    issue = _issue(event)
    if view.state is IssueState.CLOSED:
        return [Discard(f"#{issue.number} is closed; no agent starts on a closed issue")]
    latest = view.agent_of_kind(RoleKind.DEV)
    if latest is not None and latest.status not in TERMINAL:
        return [Discard(f"#{issue.number} already has agent {latest.agent_id} ({latest.status})")]
    if latest is not None and latest.superseded(event.occurred_at):
        return [Discard(f"#{issue.number}: {latest.agent_id} changed after this assignment happened")]
    height = height_of(snap.graph, issue.number)
    if height > policy.max_issue_depth:
        body = (
            f"Squadron will not start an agent on #{issue.number}: it sits {height} levels deep in a chain of "
            f"blocker issues, over the limit of {policy.max_issue_depth} (max_issue_depth). A human should "
            "decide how to break this work down."
        )
        return [
            PostComment(event.repository.full_name, event.installation_id, issue.number, body, "framework")
        ]
    role = policy.dev_role_for(issue.labels)
    existing = view.agent_with_role(role)
    fresh = _new_agent(
        event, snap, policy, role, issue.number, branch=policy.branch_for(role, issue.number, issue.labels)
    )
    if view.pull_requests:
        # A PR opened before the assignment was processed (another message group).
        fresh = fresh.model_copy(update={"pr_number": max(view.pull_requests)})
    open_blockers = view.blockers
    if open_blockers:
        # Blockers were registered before the assignment: the agent waits for them asleep.
        if existing is None:
            record = fresh.model_copy(update={"status": AgentStatus.SLEEPING, "blocked_by": open_blockers})
            return [PutAgent(AgentWrite(record, None))]
        if existing.superseded(fresh.generation_started_at):
            return [Discard(f"{existing.agent_id} changed after this assignment happened")]
        restarted = _new_generation(existing, fresh, snap)
        asleep = restarted.model_copy(update={"status": AgentStatus.SLEEPING, "blocked_by": open_blockers})
        return [PutAgent(AgentWrite(asleep, existing.version))]
    return _start(existing, fresh, event, snap, f"assigned #{issue.number} by {event.sender.login}")


def _on_issue_unassigned(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = _issue(event)
    if event.assignee is None or event.assignee.login != policy.bot_login:
        return [
            Discard(f"#{issue.number} unassigned from {event.assignee.login if event.assignee else 'nobody'}")
        ]
    view = snap.view(issue.number)
    if view.assignment_is_newer_than(event.occurred_at):
        return [Discard(f"#{issue.number} was (un)assigned after this unassignment happened")]
    reason = f"#{issue.number} unassigned from the App by {event.sender.login}"
    effects: list[Effect] = [SetIssueAssignment(event.repository.id, issue.number, False, _event_time(event))]
    for agent in snap.view(issue.number).agents:
        if agent.kind is RoleKind.DEV:
            effects += _end(agent, event, snap, AgentStatus.CANCELLED, reason)
    return effects


def _unblock(event: EventEnvelope, snap: Snapshot, blocker: int) -> list[Effect]:
    """``blocker`` is gone: resolve every edge on it, waking agents whose last blocker it was."""
    effects: list[Effect] = []
    for issue in sorted(snap.view(blocker).blocks):
        view = snap.view(issue)
        agent = view.agent_of_kind(RoleKind.DEV)
        write: AgentWrite | None = None
        launch: LaunchAgent | None = None
        if agent is not None and agent.status not in TERMINAL and blocker in agent.blocked_by:
            remaining = agent.blocked_by - {blocker}
            if agent.status is AgentStatus.SLEEPING and not remaining:
                reason = f"blocker #{blocker} was closed; #{issue} has no open blockers left"
                counters = agent.counters.model_copy(update={"wakes": agent.counters.wakes + 1})
                woken = _with_launch(
                    agent.transition(
                        AgentStatus.ACTIVE,
                        now=snap.now,
                        blocked_by=remaining,
                        wake_reason=reason,
                        counters=counters,
                    ),
                    event.delivery_id,
                )
                write, launch = AgentWrite(woken, agent.version), _launch(woken, reason)
            else:
                write = AgentWrite(agent.updated(now=snap.now, blocked_by=remaining), agent.version)
        if blocker in view.blockers or write is not None:
            effects.append(RemoveBlocker(event.repository.id, issue, blocker, write))
            if agent is not None and write is not None:
                effects.append(
                    _inbox(
                        agent,
                        event,
                        "blocker_closed",
                        f"blocker #{blocker} of #{issue} was closed",
                        subject=blocker,
                    )
                )
        if launch is not None:
            effects.append(launch)
    return effects


def _on_issue_closed(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = _issue(event)
    view = snap.view(issue.number)
    if view.state_is_newer_than(event.occurred_at):
        return [Discard(f"#{issue.number} changed state after this {event.action} event happened")]
    effects: list[Effect] = []
    if view.state is not IssueState.CLOSED:
        effects.append(
            SetIssueState(event.repository.id, issue.number, IssueState.CLOSED, _event_time(event))
        )
    effects += _unblock(event, snap, issue.number)
    gone = event.action in ("deleted", "transferred") or issue.state_reason in ("not_planned", "duplicate")
    status = AgentStatus.CANCELLED if gone else AgentStatus.COMPLETED
    how = {"closed": "closed", "deleted": "deleted", "transferred": "transferred"}[event.action or "closed"]
    for agent in view.agents:
        effects += _end(agent, event, snap, status, f"#{issue.number} was {how} by {event.sender.login}")
    return effects or [Discard(f"#{issue.number} closed; nothing was waiting on it")]


def _linked_issue(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int) -> int | None:
    """PR → issue: the registry's link, then the head branch, then closing keywords."""
    linked = snap.view(pr_number).linked_issue
    if linked is not None:
        return linked
    pr = event.pull_request
    branch = pr.head_ref if pr is not None else (event.check.head_branch if event.check else None)
    if branch:
        if branch in snap.branch_links:
            return snap.branch_links[branch]
        from_name = policy.issue_from_branch(branch)
        if from_name is not None:
            return from_name
    if pr is not None:
        refs = closing_references(pr.body, event.repository.full_name)
        with_agent = [n for n in refs if snap.view(n).agent_of_kind(RoleKind.DEV) is not None]
        if with_agent:
            return with_agent[0]
        if refs:
            return refs[0]
    return None


def _dev_agent_for_pr(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int
) -> AgentRecord | None:
    issue = _linked_issue(event, snap, policy, pr_number)
    return snap.view(issue).agent_of_kind(RoleKind.DEV) if issue is not None else None


def _request_reviews(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int, why: str
) -> list[Effect]:
    view = snap.view(pr_number)
    effects: list[Effect] = []
    base = event.pull_request.base_ref if event.pull_request is not None else ""
    for role in policy.review_roles_for(base):
        existing = view.agent_with_role(role)
        if existing is not None and existing.status not in TERMINAL:
            if event.action == "synchronize":
                effects.append(_inbox(existing, event, "pull_request_updated", f"PR #{pr_number}: {why}"))
            else:
                effects.append(Discard(f"{existing.agent_id} is already reviewing PR #{pr_number}"))
            continue
        fresh = _new_agent(event, snap, policy, role, pr_number, branch=None)
        fresh = fresh.model_copy(update={"pr_number": pr_number})
        effects += _start(existing, fresh, event, snap, f"review PR #{pr_number}: {why}")
    return effects


def _gate(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int) -> EvaluateMerge:
    agent = _dev_agent_for_pr(event, snap, policy, pr_number)
    return EvaluateMerge(
        event.repository.full_name,
        event.installation_id,
        pr_number,
        agent.role if agent is not None else None,
        agent.issue_number if agent is not None else None,
        event.delivery_id,
    )


def _on_pull_request_opened(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    pr = event.pull_request
    assert pr is not None
    effects: list[Effect] = []
    issue = _linked_issue(event, snap, policy, pr.number)
    if issue is not None and issue != pr.number:
        agent = snap.view(issue).agent_of_kind(RoleKind.DEV)
        write = None
        if agent is not None and agent.status not in TERMINAL and agent.pr_number != pr.number:
            write = AgentWrite(agent.updated(now=snap.now, pr_number=pr.number), agent.version)
        if snap.view(pr.number).linked_issue != issue or write is not None:
            effects.append(LinkPullRequest(event.repository.id, pr.number, issue, write))
    if pr.state != "open":
        return [*effects, Discard(f"PR #{pr.number} is {pr.state}")]
    # The base, the head or the draft flag may have changed what the PR needs: judge it again.
    gate = _gate(event, snap, policy, pr.number)
    if event.action == "edited":
        return [*effects, gate]
    if pr.draft:
        return [*effects, gate, Discard(f"PR #{pr.number} is a draft; reviews wait until it is ready")]
    why = {
        "opened": "opened",
        "reopened": "reopened",
        "ready_for_review": "ready for review",
        "synchronize": "new commits",
    }
    reviews = _request_reviews(event, snap, policy, pr.number, why.get(event.action or "", "updated"))
    return [*effects, *reviews, gate]


def _on_pull_request_closed(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    pr = event.pull_request
    assert pr is not None
    effects: list[Effect] = []
    issue = _linked_issue(event, snap, policy, pr.number)
    reviewers = [a for a in snap.view(pr.number).agents if a.kind is RoleKind.REVIEW]
    if pr.merged:
        for reviewer in reviewers:
            effects += _end(reviewer, event, snap, AgentStatus.COMPLETED, f"PR #{pr.number} merged")
        if issue is not None:
            agent = snap.view(issue).agent_of_kind(RoleKind.DEV)
            if agent is not None:
                effects += _end(agent, event, snap, AgentStatus.COMPLETED, f"PR #{pr.number} merged")
            if snap.view(issue).state is not IssueState.CLOSED:
                # GitHub closes it only for closing keywords on the default branch; closing
                # an already-closed issue changes nothing, so this is safe to repeat.
                effects.append(
                    CloseIssue(
                        event.repository.full_name, event.installation_id, issue, f"PR #{pr.number} merged"
                    )
                )
        return effects or [Discard(f"PR #{pr.number} merged; no agent involved")]
    for reviewer in reviewers:
        effects += _end(
            reviewer, event, snap, AgentStatus.CANCELLED, f"PR #{pr.number} closed without merging"
        )
    agent = snap.view(issue).agent_of_kind(RoleKind.DEV) if issue is not None else None
    summary = f"PR #{pr.number} was closed without merging by {event.sender.login}"
    if agent is not None:
        effects += _notify(agent, event, snap, "pull_request_closed", summary, wake=True, url=pr.html_url)
    return effects or [Discard(summary)]


def _on_comment(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    comment = normalize_comment(event)
    if comment is None:
        return [Discard(f"{event.event}.{event.action} has no comment")]
    who = comment.author.login  # route() let it through: its author has authority
    summary = f"{who} commented on #{comment.number}"
    if policy.mentions_pm(comment.body):
        return _pm_effects(event, snap, policy, "comment", summary, body=comment.body)
    if comment.on_pull_request:
        agent = _dev_agent_for_pr(event, snap, policy, comment.number)
    else:
        agent = snap.view(comment.number).agent_of_kind(RoleKind.DEV)
    return _notify(agent, event, snap, "comment", summary, wake=True, body=comment.body, url=comment.url)


def _rounds(
    agent: AgentRecord | None,
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    *,
    trigger: Literal["on_ci_failure", "on_review_rejection"],
    round_key: str,
    base: str,
    notice: tuple[str, str, str, str | None],
) -> list[Effect]:
    """Tell (and wake) the dev agent of one more failed round; past the flow's max_retries, escalate.

    A CI round is one failing head commit (several failing checks on it are one round);
    each change request is a round of review. ``notice`` is (kind, summary, body, url).
    """
    kind, summary, body, url = notice
    if agent is None or agent.status in TERMINAL or agent.predates(event.occurred_at):
        return _notify(agent, event, snap, kind, summary, wake=True, body=body, url=url)
    marker = "last_ci_failure" if trigger == "on_ci_failure" else "last_rejection"
    if round_key == getattr(agent, marker):
        return _notify(agent, event, snap, kind, summary, wake=True, body=body, url=url)
    counter = "ci_failures" if trigger == "on_ci_failure" else "rejections"
    used = getattr(agent.counters, counter) + 1
    counters = agent.counters.model_copy(update={counter: used})
    rule: EscalationRule = getattr(policy.escalation_for(base), trigger)
    counted = agent.model_copy(update={"counters": counters, marker: round_key})
    if rule.max_retries is not None and used > rule.max_retries and agent.status is not AgentStatus.ESCALATED:
        what = "CI failed" if trigger == "on_ci_failure" else "changes were requested"
        reason = f"{what} {used} times, over {trigger}.max_retries {rule.max_retries}"
        return [
            _inbox(agent, event, kind, summary, body=body, url=url),
            *_escalate(counted, event, snap, policy, reason, rule=rule),
        ]
    effects = _notify(counted, event, snap, kind, summary, wake=True, body=body, url=url)
    if not any(isinstance(effect, PutAgent) for effect in effects):
        effects.append(
            PutAgent(
                AgentWrite(
                    agent.updated(now=snap.now, counters=counters, **{marker: round_key}), agent.version
                )
            )
        )
    return effects


def _on_review(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    pr, review = event.pull_request, event.review
    assert pr is not None
    assert review is not None
    state = "dismissed" if event.action == "dismissed" else review.state.lower()
    effects: list[Effect] = [
        RecordReview(event.repository.id, pr.number, review.author.login, state, review.commit_id, review.id)
    ]
    agent = _dev_agent_for_pr(event, snap, policy, pr.number)
    summary = f"{review.author.login} reviewed PR #{pr.number}: {state}"
    if state == "changes_requested":
        effects += _rounds(
            agent,
            event,
            snap,
            policy,
            trigger="on_review_rejection",
            round_key=str(review.id),
            base=pr.base_ref,
            notice=("changes_requested", summary, review.body, None),
        )
    elif state == "commented" and review.body:
        effects += _notify(agent, event, snap, "review_comment", summary, wake=False, body=review.body)
    return [*effects, _gate(event, snap, policy, pr.number)]


def _ci_round(  # noqa: PLR0917 (one call site per CI signal: checks and statuses)
    agent: AgentRecord | None,
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    sha: str,
    summary: str,
    url: str | None,
) -> list[Effect]:
    """One failing head commit of the agent's PR: a CI round (checks do not name the PR's base)."""
    base = event.repository.default_branch or "main"
    notice = ("check_failed", summary, "", url)
    return _rounds(
        agent, event, snap, policy, trigger="on_ci_failure", round_key=sha, base=base, notice=notice
    )


def _on_check(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    check = event.check
    assert check is not None
    label = check.name or check.kind
    gates: list[Effect] = [_gate(event, snap, policy, n) for n in check.pull_request_numbers]
    if check.conclusion not in FAILED_CHECK_CONCLUSIONS:
        passed = f"{check.kind} {label} on {check.head_sha[:7]} concluded {check.conclusion}"
        return gates or [Discard(passed)]
    agent = _agent_for_commit(event, snap, policy, check.head_branch, check.pull_request_numbers)
    summary = f"{check.kind} '{label}' {check.conclusion} on {check.head_sha[:7]}"
    return [*_ci_round(agent, event, snap, policy, check.head_sha, summary, None), *gates]


def _on_status(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    status = event.status
    assert status is not None
    owners = [
        (branch, agent)
        for branch in status.branches
        if (agent := _agent_for_commit(event, snap, policy, branch, ())) is not None
    ][:1]
    gates: list[Effect] = [
        EvaluateMerge(
            event.repository.full_name,
            event.installation_id,
            agent.pr_number,
            agent.role,
            agent.issue_number,
            event.delivery_id,
        )
        for _, agent in owners
        if agent.pr_number is not None and status.context != "squadron/merge"
    ]
    if status.state not in FAILED_STATUS_STATES:
        return gates or [Discard(f"status {status.context} on {status.sha[:7]} is {status.state}")]
    for branch, agent in owners:
        summary = f"status '{status.context}' is {status.state} on {status.sha[:7]} ({branch})"
        return [*_ci_round(agent, event, snap, policy, status.sha, summary, status.target_url), *gates]
    return [
        Discard(
            f"status {status.context} on {status.sha[:7]}: no agent owns {', '.join(status.branches) or 'its branch'}"
        )
    ]


def _agent_for_commit(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, branch: str | None, prs: Iterable[int]
) -> AgentRecord | None:
    """commit → branch → issue → dev agent (or through the check's pull requests)."""
    if branch:
        issue = snap.branch_links.get(branch) or policy.issue_from_branch(branch)
        if issue is not None:
            agent = snap.view(issue).agent_of_kind(RoleKind.DEV)
            if agent is not None:
                return agent
    for pr in prs:
        agent = _dev_agent_for_pr(event, snap, policy, pr)
        if agent is not None:
            return agent
    return None


def _on_register_blocker(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    command = event.command
    assert isinstance(command, RegisterBlocker)
    issue, blocker = command.issue_number, command.blocker_number
    view = snap.view(issue)
    agent = view.agent_of_kind(RoleKind.DEV)
    if agent is not None and agent.status in TERMINAL:
        agent = None
    if (
        agent is not None
        and command.agent_id == agent.agent_id
        and command.launch_token != launch_token(agent)
    ):
        # Its task was replaced since (relaunched, or the agent restarted as a new generation):
        # the current task decides for itself. A pending launch is still finished (healing).
        return [
            Discard(
                f"sent by task {command.launch_token} of {agent.agent_id}, since replaced by {launch_token(agent)}"
            )
        ]
    if issue in snap.view(blocker).blocks and blocker not in view.blockers:
        # The edge exists and was already resolved: a late replay of this command.
        return [Discard(f"#{issue} blocked by #{blocker} was registered and resolved before")]
    problem: str | None = None
    if snap.view(blocker).state is IssueState.CLOSED:
        problem = f"#{blocker} is already closed, so it cannot block #{issue}"
    elif blocker not in view.blockers:
        try:
            check_new_blocker(snap.graph, issue, blocker, max_depth=policy.max_issue_depth)
        except BlockerError as exc:
            problem = str(exc)
    if problem is not None:
        effects: list[Effect] = []
        # Only the agent that sent the command hears why it was refused.
        if agent is not None and agent.agent_id == command.agent_id and not agent.predates(event.occurred_at):
            effects.append(_inbox(agent, event, "blocker_rejected", problem))
            if command.sleep and agent.status in LIVE:
                # The agent's task exited expecting to sleep; it must run again to hear why not.
                relaunch = _with_launch(agent.updated(now=snap.now, wake_reason=problem), event.delivery_id)
                effects += [PutAgent(AgentWrite(relaunch, agent.version)), _launch(relaunch, problem)]
        return effects or [Discard(problem)]
    write: AgentWrite | None = None
    if agent is not None:
        blocked_by = agent.blocked_by | {blocker}
        if command.sleep and command.agent_id == agent.agent_id and agent.status in LIVE:
            asleep = agent.transition(
                AgentStatus.SLEEPING, now=snap.now, blocked_by=blocked_by, pending_launch=None, task_arn=None
            )
            write = AgentWrite(asleep, agent.version)
        elif blocked_by != agent.blocked_by:
            write = AgentWrite(agent.updated(now=snap.now, blocked_by=blocked_by), agent.version)
    if blocker in view.blockers and write is None:
        return [Discard(f"#{issue} is already blocked by #{blocker}")]
    effects = [AddBlocker(event.repository.id, issue, blocker, write)]
    if agent is not None and agent.agent_id != command.agent_id and agent.status in LIVE:
        # Registered by someone else (the PM) while the agent works: it hears of it and decides
        # whether to sleep on it (report_blocked) or go on; the closing still reaches it.
        note = f": {command.note}" if command.note else ""
        effects.append(_inbox(agent, event, "blocker_registered", f"#{issue} is blocked by #{blocker}{note}"))
    return effects


def _on_recover_agent(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    command = event.command
    assert isinstance(command, RecoverAgent)
    agent = next((a for a in snap.agents() if a.agent_id == command.agent_id), None)
    if agent is None or agent.status in TERMINAL:
        return [Discard(f"{command.agent_id} is gone or finished; nothing to recover")]
    if agent.version != command.seen_version:
        return [
            Discard(
                f"{agent.agent_id} changed since the reconciler looked (v{command.seen_version} -> v{agent.version})"
            )
        ]
    if command.action == "launch":
        # A held launch (RunTask refused it) whose back-off is over: try it again, as decided.
        if agent.status not in LIVE or agent.pending_launch is None:
            return [Discard(f"{agent.agent_id} has no held launch any more")]
        return [_launch(agent, f"retrying its launch: {command.reason}")]
    if (
        command.action == "relaunch"
        and agent.status in LIVE
        and agent.counters.recoveries < policy.max_recoveries
    ):
        counters = agent.counters.model_copy(update={"recoveries": agent.counters.recoveries + 1})
        reason = f"relaunched by the reconciler: {command.reason}"
        # The dead task's lease goes with it: the relaunched task must be able to take it now,
        # not when it expires (a holder that was only slow is stopped and loses its renewal).
        stale = agent.updated(
            now=snap.now,
            counters=counters,
            wake_reason=reason,
            task_arn=None,
            lease_owner=None,
            lease_expires_at=None,
        )
        relaunched = _with_launch(stale, event.delivery_id)
        effects: list[Effect] = [PutAgent(AgentWrite(relaunched, agent.version))]
        if agent.task_arn:
            effects.append(StopAgentTask(agent.agent_id, agent.task_arn, reason))
        return [*effects, _launch(relaunched, reason)]
    if agent.status is AgentStatus.ESCALATED:
        return [Discard(f"{agent.agent_id} is already with humans")]
    why = (
        command.reason
        if command.action == "escalate"
        else f"{command.reason} (relaunched {agent.counters.recoveries} time(s) already)"
    )
    return _escalate(agent, event, snap, policy, why)


def _escalate(
    agent: AgentRecord,
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    reason: str,
    *,
    rule: EscalationRule | None = None,
    details: str = "",
) -> list[Effect]:
    """Hand ``agent``'s issue to humans: ESCALATED, its task stopped, the issue labelled and explained.

    ``rule`` (an approval flow's escalation rule) overrides the repository's label, adds
    whom it notifies and assigns. ``details`` (the agent's own summary, what happened to its
    work) follow the explanation.
    """
    escalated = agent.transition(
        AgentStatus.ESCALATED,
        now=snap.now,
        escalation_reason=reason[:1000],
        pending_launch=None,
        task_arn=None,
    )
    effects: list[Effect] = [PutAgent(AgentWrite(escalated, agent.version))]
    if agent.task_arn:
        effects.append(StopAgentTask(agent.agent_id, agent.task_arn, reason))
    repo, inst = event.repository.full_name, event.installation_id
    waiting = (
        f" It waits for {', '.join(f'#{n}' for n in sorted(agent.blocked_by))}." if agent.blocked_by else ""
    )
    label = (rule.label if rule is not None and rule.label else None) or policy.escalation_label
    mentions = tuple(
        dict.fromkeys([*policy.escalation_mentions, *policy.mentions(rule.notify if rule else ())])
    )
    assignees = tuple(dict.fromkeys([*policy.escalation_assignees, *(rule.assign if rule else ())]))
    notify = f" {' '.join(mentions)}" if mentions else ""
    body = f"{agent.display_name} ({agent.agent_id}) needs a human: {reason.rstrip('.')}.{waiting}{notify}"
    if details:
        body = f"{body}\n\n{details}"
    if agent.issue_number is not None:
        effects += [
            AddLabels(repo, inst, agent.issue_number, (label,)),
            PostComment(repo, inst, agent.issue_number, body, "framework"),
        ]
    if policy.escalation_issue:
        subject = f"#{agent.issue_number}" if agent.issue_number is not None else "the PM"
        effects.append(
            CreateIssue(
                repo,
                inst,
                f"needs-human: {subject} ({agent.display_name})",
                f"{subject} was handed to humans.\n\n{body}",
                (label,),
                assignees,
            )
        )
    return effects


def _on_report_conflict(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    """AD-005: the dev agent resolves its PR's conflict first; if it cannot, a human does."""
    command = event.command
    assert isinstance(command, ReportConflict)
    agent = snap.view(command.issue_number).agent_of_kind(RoleKind.DEV)
    what = f"PR #{command.pr_number} conflicts with {command.base} at {command.head_sha[:7]}"
    if agent is None or agent.status in TERMINAL:
        return [Discard(f"{what}; no live agent owns #{command.issue_number}")]
    if agent.last_conflict == f"{command.head_sha}:escalated":
        return [Discard(f"{what}; humans were asked already")]
    if agent.last_conflict != command.head_sha:
        marked = agent.model_copy(update={"last_conflict": command.head_sha})
        body = (
            f"Merge origin/{command.base} into your branch, resolve every conflict, run the tests and "
            "git_push. If you cannot resolve them with confidence, say so with escalate_to_human."
        )
        effects = _notify(marked, event, snap, "merge_conflict", what, wake=True, body=body)
        if not any(isinstance(effect, PutAgent) for effect in effects):
            effects.append(
                PutAgent(
                    AgentWrite(agent.updated(now=snap.now, last_conflict=command.head_sha), agent.version)
                )
            )
        return effects
    if agent.status in LIVE and not is_idle(agent):
        return [Discard(f"{what}; {agent.agent_id} is working on it")]
    # The agent's attempt ended and the head did not move: a human resolves it (AD-005).
    mentions = " ".join(policy.escalation_mentions)
    body = (
        f"{agent.display_name} could not resolve the merge conflict of PR #{command.pr_number} "
        f"(#{command.issue_number}) with `{command.base}` at {command.head_sha[:7]}. Please resolve it "
        f"on the PR's branch and close this issue; the agent then resumes.{' ' + mentions if mentions else ''}"
    )
    marked = agent.updated(now=snap.now, last_conflict=f"{command.head_sha}:escalated")
    return [
        PutAgent(AgentWrite(marked, agent.version)),
        FileBlockerIssue(
            event.repository.full_name,
            event.installation_id,
            agent.agent_id,
            launch_token(marked),
            command.issue_number,
            f"Resolve the merge conflict of PR #{command.pr_number} (#{command.issue_number})",
            body,
            (policy.escalation_label,),
            policy.escalation_assignees,
        ),
    ]


def _on_task_ended(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    """An agent's task reports how it ended: count its usage, then idle, escalate or leave it be.

    The launch's secret ends here (nothing the task sends later is accepted). An idle agent
    whose inbox got news while its task was winding down is woken at once: events for it
    that arrived before this report found its task still running and only filled its inbox.
    """
    command = event.command
    assert isinstance(command, TaskEnded)
    agent = next((a for a in snap.agents() if a.agent_id == command.agent_id), None)
    if agent is None:
        return [Discard(f"{command.agent_id} is gone; its task's end changes nothing")]
    if agent.launch_token != command.launch_token:
        return [
            Discard(f"task {command.launch_token} of {agent.agent_id} was replaced by {agent.launch_token}")
        ]
    if agent.launch_secret_hash is None:
        # Its launch ended already: this report was routed before (a replay counts nothing twice).
        return [Discard(f"the end of task {command.launch_token} of {agent.agent_id} was reported already")]
    used = command.usage
    counters = agent.counters.model_copy(
        update={
            "tool_calls": agent.counters.tool_calls + used.tool_calls,
            "turns": agent.counters.turns + used.turns,
            "iterations": agent.counters.iterations + used.iterations,
            "active_seconds": agent.counters.active_seconds + used.active_seconds,
            "recoveries": 0 if command.finished else agent.counters.recoveries,
        }
    )
    base = agent.model_copy(
        update={"counters": counters, "launch_secret_hash": None, "launch_secret_expires_at": None}
    )
    if command.outcome == "escalated" and agent.status not in (*TERMINAL, AgentStatus.ESCALATED):
        details = "\n\n".join(
            part
            for part in (
                command.summary.strip(),
                f"Work in progress on `{agent.branch}`: {command.saved}" if command.saved else "",
            )
            if part
        )
        effects = _escalate(
            base, event, snap, policy, command.reason or "it asked for humans", details=details
        )
        # Its task has ended by itself: nothing to stop.
        return [e for e in effects if not isinstance(e, StopAgentTask)]
    if command.outcome == "idle" and agent.status is AgentStatus.ACTIVE and agent.pending_launch is None:
        if snap.inbox:
            kinds = ", ".join(sorted({item.kind for item in snap.inbox}))
            reason = f"news arrived as its task ended ({kinds})"
            woken = _with_launch(
                base.updated(now=snap.now, wake_reason=reason, task_arn=None), event.delivery_id
            )
            return [PutAgent(AgentWrite(woken, agent.version)), _launch(woken, reason)]
        return [PutAgent(AgentWrite(base.updated(now=snap.now, task_arn=None), agent.version))]
    # Sleeping (its blocker command came first), failed (the reconciler sees the dead task and
    # relaunches it once, or escalates), or already ended otherwise: the usage is what is left.
    return [PutAgent(AgentWrite(base.updated(now=snap.now), agent.version))]


#: The commands an agent's task may send (through the gateway), about itself only.
AGENT_COMMANDS = (RegisterBlocker, TaskEnded)
#: The App's own webhooks an agent's task may report (the gateway checks them per role).
AGENT_ECHOES = frozenset(
    {
        ("issues", "opened"),
        ("issues", "assigned"),
        ("pull_request", "opened"),
        ("pull_request", "synchronize"),
        ("pull_request_review", "submitted"),
        ("status", None),
    }
)


def agent_envelope_problem(event: EventEnvelope) -> str | None:
    """Why an envelope an agent's task sent may not be routed (None: it may).

    The gateway already stamps and checks these; the router checks again, because nothing
    an agent's task sends is trusted twice over: it speaks only of itself, in its repository.
    """
    if event.origin != "agent":
        return None
    source = event.source_agent
    if source is None:
        return "an agent's envelope without its verified source"
    try:
        repo_id, _, _ = parse_agent_id(source)
    except RegistryError:
        return f"{source!r} is not an agent id"
    if event.repository.id != repo_id:
        return f"{source} may not speak for repository {event.repository.id}"
    command = event.command
    if command is not None:
        if not isinstance(command, AGENT_COMMANDS):
            return f"an agent may not send {command.type}"
        if command.agent_id not in (None, source):
            return f"{source} may not speak for {command.agent_id}"
        return None
    if (event.event, event.action) not in AGENT_ECHOES:
        return f"an agent may not report {event.event}.{event.action}"
    return None


ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("issues", "opened"): _on_issue_opened,
    ("issues", "reopened"): _on_issue_opened,
    ("issues", "edited"): _on_issue_edited,
    ("issues", "labeled"): _on_issue_labeled,
    ("issues", "assigned"): _on_issue_assigned,
    ("issues", "unassigned"): _on_issue_unassigned,
    ("issues", "closed"): _on_issue_closed,
    ("issues", "deleted"): _on_issue_closed,
    ("issues", "transferred"): _on_issue_closed,
    ("issue_comment", "created"): _on_comment,
    ("issue_comment", "edited"): _on_comment,
    ("pull_request_review_comment", "created"): _on_comment,
    ("pull_request", "opened"): _on_pull_request_opened,
    ("pull_request", "reopened"): _on_pull_request_opened,
    ("pull_request", "ready_for_review"): _on_pull_request_opened,
    ("pull_request", "synchronize"): _on_pull_request_opened,
    ("pull_request", "edited"): _on_pull_request_opened,
    ("pull_request", "converted_to_draft"): lambda e, s, p: [Discard("converted to draft; reviews wait")],
    ("pull_request", "closed"): _on_pull_request_closed,
    ("pull_request_review", "submitted"): _on_review,
    ("pull_request_review", "dismissed"): _on_review,
    ("check_run", "completed"): _on_check,
    ("check_suite", "completed"): _on_check,
    ("status", None): _on_status,
    (SQUADRON_EVENT, "register_blocker"): _on_register_blocker,
    (SQUADRON_EVENT, "recover_agent"): _on_recover_agent,
    (SQUADRON_EVENT, "report_conflict"): _on_report_conflict,
    (SQUADRON_EVENT, "task_ended"): _on_task_ended,
    # The router shell carries a FinishDecision out itself (it decides nothing); routed here only
    # when no such decision is pending.
    (SQUADRON_EVENT, "finish_decision"): lambda e, s, p: [Discard("no unfinished decision of that key")],
}


def _heal_pending_launches(snap: Snapshot, effects: list[Effect]) -> list[Effect]:
    """Re-launch agents whose launch was decided but never confirmed (a half-failed earlier attempt)."""
    touched = {e.agent_id for e in effects if isinstance(e, LaunchAgent)}
    touched |= {e.write.record.agent_id for e in effects if isinstance(e, PutAgent)}
    touched |= {
        e.agent.record.agent_id
        for e in effects
        if isinstance(e, (AddBlocker, RemoveBlocker, LinkPullRequest)) and e.agent is not None
    }
    return [
        _launch(agent, agent.wake_reason or "resume an unconfirmed launch")
        for agent in snap.agents()
        if agent.pending_launch and agent.status in LIVE and agent.agent_id not in touched
    ]


def route(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    """Every effect of ``event`` given ``snap``; at least one (a Discard says why nothing happens)."""
    refused = agent_envelope_problem(event)
    if refused is not None:
        return [Discard(f"refused: {refused}")]
    judged = judge(event, bot_login=policy.bot_login, permissions=snap.permissions)
    if judged is not None and not judged[1].authorised:
        # One authority rule for every human input (domain.authority): nothing of the input's
        # own happens (no inbox item, wake, counted round or judgement) and nothing is posted
        # back. A launch an earlier event decided and never confirmed is still finished.
        found, verdict = judged
        return [Discard(refusal(found, verdict), rule=verdict.rule), *_heal_pending_launches(snap, [])]
    handler = ROUTES.get((event.event, event.action)) or ROUTES.get((event.event, None))
    if handler is None:
        return [Discard(f"no route for {event.event}.{event.action}")]
    effects = handler(event, snap, policy)
    effects += _heal_pending_launches(snap, effects)
    return effects or [Discard(f"{event.event}.{event.action}: nothing to do")]


def routed_pairs() -> frozenset[tuple[str, str | None]]:
    """The (event, action) pairs the ingress forwards — for the consistency test with :data:`ROUTES`."""
    pairs: set[tuple[str, str | None]] = set()
    for event, actions in ROUTED_EVENTS.items():
        if actions is None:
            pairs.add((event, None))
        else:
            pairs.update((event, action) for action in actions)
    return frozenset(pairs)
