"""Effect builders shared by the topics: launches and wakes, inbox items, new agents and generations, escalation, unblocking, review and CI rounds, the merge gate."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from squadron.domain import lifecycle
from squadron.domain.agents import (
    TERMINAL,
    AgentRecord,
    AgentStatus,
    InboxItem,
    RoleKind,
    agent_id_for,
)
from squadron.domain.app_acts import own_pull_request
from squadron.domain.effects import (
    AddLabels,
    AgentWrite,
    CreateIssue,
    DeliverInbox,
    Discard,
    Effect,
    EvaluateMerge,
    LaunchAgent,
    PostComment,
    PutAgent,
    RemoveBlocker,
)
from squadron.domain.events import (
    EventEnvelope,
)
from squadron.domain.repo_config.models import EscalationRule
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Snapshot


def launch_token(agent: AgentRecord) -> str:
    """The id of ``agent``'s latest launch (see :attr:`AgentRecord.launch_token`)."""
    return agent.launch_token


def _wake(
    agent: AgentRecord, event: EventEnvelope, snap: Snapshot, reason: str, **changes: object
) -> tuple[AgentWrite, LaunchAgent]:
    """``agent`` woken by ``event`` (:func:`squadron.domain.lifecycle.wake`): its write and launch."""
    step = lifecycle.wake(agent, now=snap.now, cause=event.delivery_id, reason=reason, **changes)
    (launch,) = (e for e in step.effects if isinstance(e, LaunchAgent))
    return step.write, launch


def is_idle(agent: AgentRecord) -> bool:
    """ACTIVE, but its task ended its turn (report_complete, or nothing left to do): no task runs."""
    return agent.status is AgentStatus.ACTIVE and agent.task_arn is None and agent.pending_launch is None


def _wakeable(agent: AgentRecord, event: EventEnvelope) -> bool:
    """Asleep, escalated or idle — and not already launched by this very delivery (a replay)."""
    if agent.launch_cause == event.delivery_id:
        return False
    return agent.status in (AgentStatus.SLEEPING, AgentStatus.ESCALATED) or is_idle(agent)


def inbox_item(
    agent: AgentRecord,
    event: EventEnvelope,
    kind: str,
    summary: str,
    *,
    body: str = "",
    url: str | None = None,
    subject: int | None = None,
    unvetted_author: str | None = None,
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
            unvetted_author=unvetted_author,
        )
    )


def notify_agent(
    agent: AgentRecord | None,
    event: EventEnvelope,
    snap: Snapshot,
    kind: str,
    summary: str,
    *,
    wake: bool,
    body: str = "",
    url: str | None = None,
    unvetted_author: str | None = None,
) -> list[Effect]:
    """Put an item in the agent's inbox; wake it when asked and it is asleep or escalated.

    ``unvetted_author``: whose words ``body`` is when no authority rule passed them (the host
    shows them by that author's trust); ``summary``, which becomes a wake reason, is the
    framework's words only.
    """
    if agent is None:
        return [Discard(f"no agent to tell: {summary}")]
    if agent.status in TERMINAL:
        return [Discard(f"agent {agent.agent_id} is {agent.status}; stale event: {summary}")]
    if agent.predates(event.occurred_at):
        return [Discard(f"event predates generation {agent.generation} of {agent.agent_id}: {summary}")]
    effects: list[Effect] = [
        inbox_item(agent, event, kind, summary, body=body, url=url, unvetted_author=unvetted_author)
    ]
    if wake and _wakeable(agent, event):
        write, launch = _wake(agent, event, snap, summary)
        effects += [PutAgent(write), launch]
    return effects


def new_agent_record(
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


def start_agent(
    existing: AgentRecord | None, fresh: AgentRecord, event: EventEnvelope, snap: Snapshot, reason: str
) -> list[Effect]:
    """Create ``fresh``, or restart a terminal ``existing`` one as a new generation; then launch it."""
    if existing is None:
        return list(lifecycle.start(fresh, cause=event.delivery_id, reason=reason).effects)
    if existing.superseded(fresh.generation_started_at):
        return [Discard(f"{existing.agent_id} changed after this event happened: {reason}")]
    return list(
        lifecycle.restart(existing, fresh, now=snap.now, cause=event.delivery_id, reason=reason).effects
    )


def end_agent(
    agent: AgentRecord, event: EventEnvelope, snap: Snapshot, status: lifecycle.Finished, reason: str
) -> list[Effect]:
    """Finish a non-terminal agent (COMPLETED or CANCELLED) and stop its task if one may run."""
    if agent.status in TERMINAL:
        return []
    if agent.superseded(event.occurred_at):
        return [Discard(f"{agent.agent_id} changed after this event happened: {reason}")]
    return list(
        lifecycle.finish(
            agent, now=snap.now, reason=reason, status=status, last_event_at=event.occurred_at
        ).effects
    )


def pm_effects(
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    kind: str,
    summary: str,
    *,
    body: str = "",
    unvetted_author: str | None = None,
) -> list[Effect]:
    """Queue an item for the repository's PM and make sure one PM task (at most) is running.

    ``unvetted_author``: whose words ``body`` is when no authority rule passed them.
    """
    pm = snap.pm
    fresh = new_agent_record(event, snap, policy, policy.pm_role, None, branch=None)
    effects: list[Effect] = []
    if pm is None or pm.status in TERMINAL:
        effects += start_agent(pm, fresh, event, snap, f"PM batch: {summary}")
    target = pm if pm is not None and pm.status not in TERMINAL else fresh
    effects.append(inbox_item(target, event, kind, summary, body=body, unvetted_author=unvetted_author))
    if pm is not None and _wakeable(pm, event):
        write, launch = _wake(pm, event, snap, summary)
        effects += [PutAgent(write), launch]
    return effects


def unblock_issue(event: EventEnvelope, snap: Snapshot, blocker: int) -> list[Effect]:
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
                write, launch = _wake(agent, event, snap, reason, blocked_by=remaining)
            else:
                write = AgentWrite(agent.updated(now=snap.now, blocked_by=remaining), agent.version)
        if blocker in view.blockers or write is not None:
            effects.append(RemoveBlocker(event.repository.id, issue, blocker, write))
            if agent is not None and write is not None:
                effects.append(
                    inbox_item(
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


def _dev_agent_on_branch(
    snap: Snapshot, policy: RoutingPolicy, branch: str
) -> tuple[int, AgentRecord | None] | None:
    """The issue whose branch ``branch`` is (the registry's link, else its name) and its dev agent.

    None when the issue's dev agent works on another branch: a name like an agent's is not its branch.
    """
    issue = snap.branch_links.get(branch) or policy.issue_from_branch(branch)
    if issue is None:
        return None
    agent = snap.view(issue).agent_of_kind(RoleKind.DEV)
    if agent is not None and agent.branch is not None and agent.branch != branch:
        return None
    return issue, agent


def linked_issue_of(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int
) -> int | None:
    """PR → issue: the registry's link, else the head branch of the App's own pull request.

    Only a pull request the App opened from an agent's branch of this repository belongs to an
    agent: anyone else's (a fork's, or another author's branch named like an agent's) links to
    nothing, whatever its closing keywords say, so it never wakes, sleeps or escalates an agent.
    """
    linked = snap.view(pr_number).linked_issue
    if linked is not None:
        return linked
    pr = event.pull_request
    if pr is None or pr.number != pr_number or not own_pull_request(event, policy.bot_login):
        return None
    found = _dev_agent_on_branch(snap, policy, pr.head_ref)
    return found[0] if found is not None else None


def dev_agent_for_pr(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int
) -> AgentRecord | None:
    issue = linked_issue_of(event, snap, policy, pr_number)
    return snap.view(issue).agent_of_kind(RoleKind.DEV) if issue is not None else None


def request_reviews(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int, why: str
) -> list[Effect]:
    view = snap.view(pr_number)
    effects: list[Effect] = []
    base = event.pull_request.base_ref if event.pull_request is not None else ""
    for role in policy.review_roles_for(base):
        existing = view.agent_with_role(role)
        if existing is not None and existing.status not in TERMINAL:
            if event.action == "synchronize":
                effects.append(inbox_item(existing, event, "pull_request_updated", f"PR #{pr_number}: {why}"))
            else:
                effects.append(Discard(f"{existing.agent_id} is already reviewing PR #{pr_number}"))
            continue
        fresh = new_agent_record(event, snap, policy, role, pr_number, branch=None)
        serves = linked_issue_of(event, snap, policy, pr_number)
        fresh = fresh.model_copy(update={"pr_number": pr_number, "serves_issue": serves})
        effects += start_agent(existing, fresh, event, snap, f"review PR #{pr_number}: {why}")
    return effects


def judge_merge(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, pr_number: int) -> EvaluateMerge:
    agent = dev_agent_for_pr(event, snap, policy, pr_number)
    return EvaluateMerge(
        event.repository.full_name,
        event.installation_id,
        pr_number,
        agent.role if agent is not None else None,
        agent.issue_number if agent is not None else None,
        event.delivery_id,
    )


def count_round(
    agent: AgentRecord | None,
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    *,
    trigger: Literal["on_ci_failure", "on_review_rejection"],
    round_key: str,
    base: str,
    notice: tuple[str, str, str, str | None],
    unvetted_author: str | None = None,
) -> list[Effect]:
    """Tell (and wake) the dev agent of one more failed round; past the flow's max_retries, escalate.

    A CI round is one failing head commit (several failing checks on it are one round);
    each change request is a round of review. ``notice`` is (kind, summary, body, url);
    ``unvetted_author`` whose words the body is when no authority rule passed them.
    """
    kind, summary, body, url = notice

    def tell(whom: AgentRecord | None) -> list[Effect]:
        return notify_agent(
            whom, event, snap, kind, summary, wake=True, body=body, url=url, unvetted_author=unvetted_author
        )

    if agent is None or agent.status in TERMINAL or agent.predates(event.occurred_at):
        return tell(agent)
    marker = "last_ci_failure" if trigger == "on_ci_failure" else "last_rejection"
    if round_key == getattr(agent, marker):
        return tell(agent)
    counter = "ci_failures" if trigger == "on_ci_failure" else "rejections"
    used = getattr(agent.counters, counter) + 1
    counters = agent.counters.model_copy(update={counter: used})
    rule: EscalationRule = getattr(policy.escalation_for(base), trigger)
    counted = agent.model_copy(update={"counters": counters, marker: round_key})
    if rule.max_retries is not None and used > rule.max_retries and agent.status is not AgentStatus.ESCALATED:
        what = "CI failed" if trigger == "on_ci_failure" else "changes were requested"
        reason = f"{what} {used} times, over {trigger}.max_retries {rule.max_retries}"
        return [
            inbox_item(agent, event, kind, summary, body=body, url=url, unvetted_author=unvetted_author),
            *escalate_agent(counted, event, snap, policy, reason, rule=rule),
        ]
    effects = tell(counted)
    if not any(isinstance(effect, PutAgent) for effect in effects):
        effects.append(
            PutAgent(
                AgentWrite(
                    agent.updated(now=snap.now, counters=counters, **{marker: round_key}), agent.version
                )
            )
        )
    return effects


def agent_for_commit(
    snap: Snapshot, policy: RoutingPolicy, branch: str | None, prs: Iterable[int]
) -> AgentRecord | None:
    """commit → the dev agent whose own branch or own pull request it is.

    ``branch`` is one of this repository's branches (a status names those): it must be the
    agent's exactly. A check reaches an agent only through its pull requests, linked to the
    App's own: a check's head branch may be a fork's (GitHub then sends no pull requests).
    """
    if branch:
        found = _dev_agent_on_branch(snap, policy, branch)
        if found is not None and found[1] is not None and found[1].branch == branch:
            return found[1]
    for pr in prs:
        linked = snap.view(pr).linked_issue
        agent = snap.view(linked).agent_of_kind(RoleKind.DEV) if linked is not None else None
        if agent is not None:
            return agent
    return None


def escalate_agent(
    agent: AgentRecord,
    event: EventEnvelope,
    snap: Snapshot,
    policy: RoutingPolicy,
    reason: str,
    *,
    rule: EscalationRule | None = None,
    details: str = "",
    task_ended: bool = False,
) -> list[Effect]:
    """Hand ``agent``'s issue to humans: ESCALATED, its task stopped (unless ``task_ended``: it
    ended by itself), the issue labelled and explained.

    ``rule`` (an approval flow's escalation rule) overrides the repository's label, adds
    whom it notifies and assigns. ``details`` (the agent's own summary, what happened to its
    work) follow the explanation.
    """
    effects: list[Effect] = list(
        lifecycle.escalate(agent, now=snap.now, reason=reason, task_ended=task_ended).effects
    )
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
    body = f"{agent.display_name} needs a human: {reason.rstrip('.')}.{waiting}{notify}"
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
