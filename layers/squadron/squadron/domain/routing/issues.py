"""Issues: opened, labeled, edited, assigned to the App (an agent starts), unassigned, closed (its agents end, what it blocked wakes)."""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain import dashboard, lifecycle
from squadron.domain.agents import (
    TERMINAL,
    AgentStatus,
    IssueState,
    RoleKind,
)
from squadron.domain.app_acts import AgentReported, FrameworkCommand, app_act, is_dashboard
from squadron.domain.authority import Authority, Rule
from squadron.domain.blockers import height_of
from squadron.domain.change_set_steps import set_branch_of_issue
from squadron.domain.effects import (
    AgentWrite,
    ConfirmMemory,
    DeliverInbox,
    Discard,
    Effect,
    PostComment,
    PutAgent,
    SetIssueAssignment,
    SetIssueState,
    VouchIssue,
)
from squadron.domain.events import (
    EventEnvelope,
)
from squadron.domain.routing.builders import (
    end_agent,
    new_agent_record,
    notify_agent,
    pm_effects,
    start_agent,
    unblock_issue,
)
from squadron.domain.routing.normalize import event_time, issue_fields
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Handler, IssueView, Snapshot
from squadron.domain.trust import Vouched, vouched
from squadron.domain.vouching import is_writer, voucher, waits


def _writer(login: str | None, snap: Snapshot, policy: RoutingPolicy) -> bool:
    return is_writer(login, snap.permissions, policy.bot_login)


def _vouched_by(number: int, snap: Snapshot, policy: RoutingPolicy) -> str | None:
    return voucher(snap.view(number).vouched_by, policy.triage)


def _vouch(event: EventEnvelope, number: int, by: str) -> VouchIssue:
    return VouchIssue(event.repository.id, number, by[:200], event_time(event))


def _opened_vouch(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    """A new issue is vouched for when a writer opened it, or an agent of a vouched issue filed it."""
    issue = issue_fields(event)
    if _vouched_by(issue.number, snap, policy) is not None:
        return []
    act = app_act(event, policy.bot_login)
    if isinstance(act, AgentReported):
        source = act.issue_number
        by = _vouched_by(source, snap, policy) if source is not None else None
        return [_vouch(event, issue.number, f"filed from #{source} (vouched: {by})")] if by else []
    return [_vouch(event, issue.number, issue.author or "")] if _writer(issue.author, snap, policy) else []


def _on_issue_opened(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = issue_fields(event)
    view = snap.view(issue.number)
    effects: list[Effect] = _opened_vouch(event, snap, policy)
    if view.state is not IssueState.OPEN and not view.state_is_newer_than(event.occurred_at):
        effects.append(SetIssueState(event.repository.id, issue.number, IssueState.OPEN, event_time(event)))
    verb = "reopened" if event.action == "reopened" else "opened"
    # Anyone may open an issue: its title and body are its author's words (the summary, which
    # becomes a wake reason, carries neither), shown to the PM by that author's trust.
    summary = f"#{issue.number} {verb} by {event.sender.login}"
    text = f"{issue.title}\n\n{issue.body}".rstrip()
    return effects + pm_effects(
        event, snap, policy, f"issue_{verb}", summary, body=text, unvetted_author=event.sender.login
    )


def _on_issue_labeled(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = issue_fields(event)
    summary = f"#{issue.number} labeled '{event.label}' by {event.sender.login}"
    effects: list[Effect] = []
    if event.label == policy.triage.approval_label and _writer(event.sender.login, snap, policy):
        # A writer approves the issue: vouched for; an assignment of the App that waited starts now.
        view = snap.view(issue.number)
        if view.vouched_by is None:
            effects.append(_vouch(event, issue.number, event.sender.login))
        if view.app_assigned and view.agent_of_kind(RoleKind.DEV) is None and not issue.is_pull_request:
            effects += _assign(event, snap, policy, view)
    return effects + pm_effects(event, snap, policy, "issue_labeled", summary)


def _vouched(event: EventEnvelope, policy: RoutingPolicy) -> Vouched | None:
    """The issue's text as a person with write access saw it assigning the App or editing the
    issue (the authority rule let the webhook through); None for the App's own act (the PM's
    assignment: nobody with write access vouched, the issue's author's trust decides)."""
    issue = issue_fields(event)
    if app_act(event, policy.bot_login) is not None:
        return None
    return vouched(
        issue.title, issue.body, truncated=issue.body_truncated, by=event.sender.login, at=event_time(event)
    )


def _on_issue_edited(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = issue_fields(event)
    if is_dashboard(issue.labels, issue.author, policy.bot_login):
        return _on_dashboard_edited(event, snap, policy)
    agent = snap.view(issue.number).agent_of_kind(RoleKind.DEV)
    summary = f"#{issue.number} was edited by {event.sender.login}"
    effects = notify_agent(
        agent, event, snap, "issue_edited", summary, wake=False, body=issue.body, url=issue.html_url
    )
    vouch = _vouched(event, policy)
    if agent is not None and vouch is not None and any(isinstance(e, DeliverInbox) for e in effects):
        # A person with write access edited it: the agent works from this version now.
        effects.append(PutAgent(AgentWrite(agent.updated(now=snap.now, vouched=vouch), agent.version)))
    return effects


def _on_dashboard_edited(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    """Boxes ticked on the dashboard issue by someone with write access (the authority rule ran
    before): retry an escalated agent, wake a sleeping one, cancel one, confirm a fact of memory. The reconciler's next
    rendering clears the ticks; what no agent of this repository matches is discarded."""
    issue = issue_fields(event)
    who = event.sender.login
    effects: list[Effect] = []
    for action, agent_id in dashboard.checked_actions(issue.body):
        agent = next((a for a in snap.agents() if a.agent_id == agent_id), None)
        if agent is None:
            effects.append(Discard(f"dashboard: no agent {agent_id} here"))
            continue
        summary = f"@{who} asked from the dashboard to {action} {agent.display_name}"
        if action == "cancel":
            effects += end_agent(agent, event, snap, AgentStatus.CANCELLED, summary) or [
                Discard(f"dashboard: {agent_id} has ended already")
            ]
        elif (action, agent.status) in (("retry", AgentStatus.ESCALATED), ("wake", AgentStatus.SLEEPING)):
            effects += notify_agent(agent, event, snap, "dashboard_action", summary, wake=True)
        else:
            effects.append(Discard(f"dashboard: {agent_id} is {agent.status.value}, not to {action}"))
    confirmed = dashboard.checked_confirmations(issue.body)
    if confirmed:
        effects.append(
            ConfirmMemory(
                event.repository.id,
                tuple(confirmed),
                (),
                by=who,
                how="dashboard",
                expiry_days=policy.memory.expiry_days,
            )
        )
    return effects or [Discard("dashboard edited: no box ticked")]


#: The rules under which a person's tick on the dashboard is refused with a note (a bot's, the
#: App's own rendering and an agent's echo are refused without one).
_NOTED_REFUSALS = frozenset({Rule.NO_WRITE_ACCESS, Rule.UNKNOWN_PERMISSION})


def refused_ticks(event: EventEnvelope, policy: RoutingPolicy, verdict: Authority) -> list[Effect]:
    """A note on the dashboard issue when the authority rule refused a person's edit of it that
    ticked a box: the tick is not carried out (the next rendering clears it), and the note says
    so and why, on the issue itself. Only people who may edit the App's issue at all (GitHub's
    triage role and up) can tick, so a note is never a stranger's to multiply."""
    if (event.event, event.action) != ("issues", "edited") or verdict.rule not in _NOTED_REFUSALS:
        return []
    issue = issue_fields(event)
    if not is_dashboard(issue.labels, issue.author, policy.bot_login):
        return []
    ticked = len(dashboard.checked_actions(issue.body)) + len(dashboard.checked_confirmations(issue.body))
    if not ticked:
        return []
    return [
        PostComment(
            event.repository.full_name,
            event.installation_id,
            issue.number,
            dashboard.refused_tick_note(verdict.login, verdict.why, ticked),
            "framework",
        )
    ]


def _on_issue_assigned(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = issue_fields(event)
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
    recorded: list[Effect] = [SetIssueAssignment(event.repository.id, issue.number, True, event_time(event))]
    if _vouched_by(issue.number, snap, policy) is None:
        # The assignment is a writer's own (it vouches by itself), or the issue is a writer's; else
        # it is the PM's, maybe on a stranger's behalf: it waits for a writer's approval.
        act = app_act(event, policy.bot_login)
        if isinstance(act, FrameworkCommand):
            recorded.append(_vouch(event, issue.number, "the framework"))
        elif not isinstance(act, AgentReported) and _writer(event.sender.login, snap, policy):
            recorded.append(_vouch(event, issue.number, event.sender.login))
        elif _writer(issue.author, snap, policy):
            recorded.append(_vouch(event, issue.number, issue.author or ""))
        else:
            return [*recorded, Discard(f"the App's assignment waits: {waits(issue.number, policy.triage)}")]
    return recorded + _assign(event, snap, policy, view)


def _assign(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, view: IssueView) -> list[Effect]:
    issue = issue_fields(event)
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
    # A member issue of a change set works on the set's branch (docs/change-sets.md).
    branch = set_branch_of_issue(
        issue.body,
        framework=isinstance(app_act(event, policy.bot_login), FrameworkCommand),
        author=issue.author,
        bot_login=policy.bot_login,
    ) or policy.branch_for(role, issue.number, issue.labels)
    fresh = new_agent_record(event, snap, policy, role, issue.number, branch=branch)
    fresh = fresh.model_copy(update={"vouched": _vouched(event, policy)})
    if view.pull_requests:
        # A PR opened before the assignment was processed (another message group).
        fresh = fresh.model_copy(update={"pr_number": max(view.pull_requests)})
    open_blockers = view.blockers
    if open_blockers:
        # Blockers were registered before the assignment: the agent waits for them asleep.
        if existing is None:
            return [PutAgent(AgentWrite(lifecycle.born_asleep(fresh, blocked_by=open_blockers), None))]
        if existing.superseded(fresh.generation_started_at):
            return [Discard(f"{existing.agent_id} changed after this assignment happened")]
        restarted = lifecycle.new_generation(existing, fresh, now=snap.now)
        asleep = lifecycle.born_asleep(restarted, blocked_by=open_blockers)
        return [PutAgent(AgentWrite(asleep, existing.version))]
    return start_agent(existing, fresh, event, snap, f"assigned #{issue.number} by {event.sender.login}")


def _on_issue_unassigned(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = issue_fields(event)
    if event.assignee is None or event.assignee.login != policy.bot_login:
        return [
            Discard(f"#{issue.number} unassigned from {event.assignee.login if event.assignee else 'nobody'}")
        ]
    view = snap.view(issue.number)
    if view.assignment_is_newer_than(event.occurred_at):
        return [Discard(f"#{issue.number} was (un)assigned after this unassignment happened")]
    reason = f"#{issue.number} unassigned from the App by {event.sender.login}"
    effects: list[Effect] = [SetIssueAssignment(event.repository.id, issue.number, False, event_time(event))]
    for agent in snap.view(issue.number).agents:
        if agent.kind is RoleKind.DEV:
            effects += end_agent(agent, event, snap, AgentStatus.CANCELLED, reason)
    return effects


def _on_issue_closed(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    issue = issue_fields(event)
    view = snap.view(issue.number)
    if view.state_is_newer_than(event.occurred_at):
        return [Discard(f"#{issue.number} changed state after this {event.action} event happened")]
    effects: list[Effect] = []
    if view.state is not IssueState.CLOSED:
        effects.append(SetIssueState(event.repository.id, issue.number, IssueState.CLOSED, event_time(event)))
    effects += unblock_issue(event, snap, issue.number)
    gone = event.action in ("deleted", "transferred") or issue.state_reason in ("not_planned", "duplicate")
    status: lifecycle.Finished = AgentStatus.CANCELLED if gone else AgentStatus.COMPLETED
    how = {"closed": "closed", "deleted": "deleted", "transferred": "transferred"}[event.action or "closed"]
    for agent in view.agents:
        effects += end_agent(agent, event, snap, status, f"#{issue.number} was {how} by {event.sender.login}")
    return effects or [Discard(f"#{issue.number} closed; nothing was waiting on it")]


ISSUE_ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("issues", "opened"): _on_issue_opened,
    ("issues", "reopened"): _on_issue_opened,
    ("issues", "edited"): _on_issue_edited,
    ("issues", "labeled"): _on_issue_labeled,
    ("issues", "assigned"): _on_issue_assigned,
    ("issues", "unassigned"): _on_issue_unassigned,
    ("issues", "closed"): _on_issue_closed,
    ("issues", "deleted"): _on_issue_closed,
    ("issues", "transferred"): _on_issue_closed,
}
