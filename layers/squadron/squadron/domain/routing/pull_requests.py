"""Pull requests and reviews: an agent's PR linked and reviewed, merged or closed, reviews counted as rounds."""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.agents import (
    TERMINAL,
    AgentStatus,
    IssueState,
    RoleKind,
)
from squadron.domain.app_acts import app_act
from squadron.domain.effects import (
    AgentWrite,
    CloseIssue,
    ConfirmMemory,
    Discard,
    Effect,
    LinkPullRequest,
    RecordReview,
)
from squadron.domain.events import (
    EventEnvelope,
)
from squadron.domain.memory import listed_in
from squadron.domain.routing.builders import (
    count_round,
    dev_agent_for_pr,
    end_agent,
    judge_merge,
    linked_issue_of,
    notify_agent,
    request_reviews,
)
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Handler, Snapshot


def _on_pull_request_opened(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    pr = event.pull_request
    assert pr is not None
    effects: list[Effect] = []
    issue = linked_issue_of(event, snap, policy, pr.number)
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
    gate = judge_merge(event, snap, policy, pr.number)
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
    reviews = request_reviews(event, snap, policy, pr.number, why.get(event.action or "", "updated"))
    return [*effects, *reviews, gate]


def _on_pull_request_closed(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    pr = event.pull_request
    assert pr is not None
    effects: list[Effect] = []
    issue = linked_issue_of(event, snap, policy, pr.number)
    reviewers = [a for a in snap.view(pr.number).agents if a.kind is RoleKind.REVIEW]
    if pr.merged:
        for reviewer in reviewers:
            effects += end_agent(
                reviewer,
                event,
                snap,
                AgentStatus.COMPLETED,
                f"PR #{pr.number} merged by {event.sender.login}",
            )
        if issue is not None:
            agent = snap.view(issue).agent_of_kind(RoleKind.DEV)
            if agent is not None:
                effects += end_agent(
                    agent,
                    event,
                    snap,
                    AgentStatus.COMPLETED,
                    f"PR #{pr.number} merged by {event.sender.login}",
                )
            if snap.view(issue).state is not IssueState.CLOSED:
                # GitHub closes it only for closing keywords on the default branch; closing
                # an already-closed issue changes nothing, so this is safe to repeat.
                effects.append(
                    CloseIssue(
                        event.repository.full_name, event.installation_id, issue, f"PR #{pr.number} merged"
                    )
                )
        effects += _confirm_memory(event, snap, policy, issue)
        return effects or [Discard(f"PR #{pr.number} merged; no agent involved")]
    for reviewer in reviewers:
        effects += end_agent(
            reviewer,
            event,
            snap,
            AgentStatus.CANCELLED,
            f"PR #{pr.number} closed without merging by {event.sender.login}",
        )
    agent = snap.view(issue).agent_of_kind(RoleKind.DEV) if issue is not None else None
    summary = f"PR #{pr.number} was closed without merging by {event.sender.login}"
    if agent is not None:
        effects += notify_agent(
            agent, event, snap, "pull_request_closed", summary, wake=True, url=pr.html_url
        )
    return effects or [Discard(summary)]


def _confirm_memory(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, issue: int | None
) -> list[Effect]:
    """A person merged an agent's pull request: the facts its description lists, proposed by its
    agents, are confirmed (:mod:`squadron.domain.memory`). A merge by the App or any other bot
    confirms nothing: only a person has read what they confirm."""
    pr = event.pull_request
    assert pr is not None
    listed = tuple(listed_in(pr.body))
    if not listed or event.sender.is_bot or app_act(event, policy.bot_login) is not None:
        return []
    authors = [a.agent_id for a in snap.view(pr.number).agents]
    if issue is not None:
        authors += [a.agent_id for a in snap.view(issue).agents]
    if not authors:
        return []
    return [
        ConfirmMemory(
            event.repository.id,
            listed,
            tuple(dict.fromkeys(authors)),
            by=event.sender.login,
            how=f"merged #{pr.number}",
            expiry_days=policy.memory.expiry_days,
        )
    ]


def _on_review(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    pr, review = event.pull_request, event.review
    assert pr is not None
    assert review is not None
    state = "dismissed" if event.action == "dismissed" else review.state.lower()
    effects: list[Effect] = [
        RecordReview(event.repository.id, pr.number, review.author.login, state, review.commit_id, review.id)
    ]
    agent = dev_agent_for_pr(event, snap, policy, pr.number)
    summary = f"{review.author.login} reviewed PR #{pr.number}: {state}"
    if state == "changes_requested":
        effects += count_round(
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
        effects += notify_agent(agent, event, snap, "review_comment", summary, wake=False, body=review.body)
    return [*effects, judge_merge(event, snap, policy, pr.number)]


PULL_REQUEST_ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("pull_request", "opened"): _on_pull_request_opened,
    ("pull_request", "reopened"): _on_pull_request_opened,
    ("pull_request", "ready_for_review"): _on_pull_request_opened,
    ("pull_request", "synchronize"): _on_pull_request_opened,
    ("pull_request", "edited"): _on_pull_request_opened,
    ("pull_request", "converted_to_draft"): lambda e, s, p: [Discard("converted to draft; reviews wait")],
    ("pull_request", "closed"): _on_pull_request_closed,
    # A person's label on a pull request is for its pipelines alone (a trigger, a handler, a human
    # stage waiting for a label: docs/pipelines.md); the fixed routing does nothing with it.
    ("pull_request", "labeled"): lambda e, s, p: [Discard("a pull request's label: for its pipelines only")],
    ("pull_request_review", "submitted"): _on_review,
    ("pull_request_review", "dismissed"): _on_review,
}
