"""A factory of envelopes for routing tests (shaped like the ingress produces them)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from squadron.domain.agents import AgentRecord
from squadron.domain.commands import (
    SQUADRON_EVENT,
    AgentAction,
    AgentAssignedIssue,
    AgentOpenedIssue,
    AgentOpenedPullRequest,
    AgentPostedStatus,
    AgentPushedCommits,
    AgentSubmittedReview,
    RecoverAgent,
    RegisterBlocker,
)
from squadron.domain.effects import (
    AddBlocker,
    AddLabels,
    CloseIssue,
    CreateIssue,
    DeliverInbox,
    Discard,
    Effect,
    EvaluateMerge,
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
from squadron.domain.events import EventEnvelope

BOT = "squadron[bot]"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@dataclass
class Events:
    repo_id: int = 1
    full_name: str = "octo/repo"
    installation_id: int = 77
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: envelopes a test wants routed before the one under test (out-of-order arrival)
    pending: list[EventEnvelope] = field(default_factory=list)

    def _base(self, event: str, action: str | None, sender: str = "alice", **fields: Any) -> EventEnvelope:
        n = next(self._ids)
        return EventEnvelope.model_validate(
            {
                "delivery_id": fields.pop("delivery_id", f"delivery-{n:05d}"),
                "event": event,
                "action": action,
                "received_at": T0 + timedelta(seconds=n),
                "occurred_at": T0 + timedelta(seconds=n),
                "installation_id": self.installation_id,
                "repository": {"id": self.repo_id, "full_name": self.full_name, "default_branch": "main"},
                "sender": {
                    "login": sender,
                    "id": 1000 + len(sender),
                    "type": "Bot" if sender.endswith("[bot]") else "User",
                },
                **fields,
            }
        )

    @staticmethod
    def _issue(
        number: int, *, labels: tuple[str, ...] = (), state: str = "open", **extra: Any
    ) -> dict[str, Any]:
        return {"number": number, "title": f"Issue {number}", "state": state, "labels": list(labels), **extra}

    def opened(
        self, number: int, labels: tuple[str, ...] = (), *, by: str = "alice", body: str = ""
    ) -> EventEnvelope:
        """#``number`` opened by ``by`` (its author)."""
        return self._base(
            "issues", "opened", sender=by, issue=self._issue(number, labels=labels, author=by, body=body)
        )

    def reopened(self, number: int) -> EventEnvelope:
        return self._base("issues", "reopened", issue=self._issue(number))

    def labeled(self, number: int, label: str, *, by: str = "alice") -> EventEnvelope:
        return self._base(
            "issues", "labeled", sender=by, issue=self._issue(number, labels=(label,)), label=label
        )

    def edited(self, number: int, body: str = "new text", *, by: str = "alice") -> EventEnvelope:
        return self._base("issues", "edited", sender=by, issue=self._issue(number, body=body))

    def assigned(
        self,
        number: int,
        to: str = BOT,
        labels: tuple[str, ...] = (),
        *,
        by: str = "alice",
        author: str | None = None,
        **envelope: Any,
    ) -> EventEnvelope:
        """The App (``to``) assigned to #``number`` by ``by``; ``author`` opened the issue."""
        assignee = {"login": to, "id": 5, "type": "Bot" if to.endswith("[bot]") else "User"}
        return self._base(
            "issues",
            "assigned",
            sender=by,
            issue=self._issue(number, labels=labels, author=author),
            assignee=assignee,
            **envelope,
        )

    def unassigned(self, number: int, who: str = BOT) -> EventEnvelope:
        assignee = {"login": who, "id": 5, "type": "Bot"}
        return self._base("issues", "unassigned", issue=self._issue(number), assignee=assignee)

    def closed(self, number: int, reason: str = "completed", action: str = "closed") -> EventEnvelope:
        return self._base("issues", action, issue=self._issue(number, state="closed", state_reason=reason))

    def comment(
        self,
        number: int,
        body: str = "please also handle the edge case",
        *,
        by: str = "alice",
        association: str = "MEMBER",
        on_pr: bool = False,
        action: str = "created",
        sender: str | None = None,
    ) -> EventEnvelope:
        """A comment by ``by``; ``sender`` is who edited it (``action="edited"``), if not its author."""
        issue = self._issue(number)
        if on_pr:
            issue["is_pull_request"] = True
        comment = {
            "id": next(self._ids),
            "kind": "issue_comment",
            "body": body,
            "author": {"login": by, "id": 9, "type": "Bot" if by.endswith("[bot]") else "User"},
            "author_association": association,
        }
        return self._base("issue_comment", action, sender=sender or by, issue=issue, comment=comment)

    def review_comment(
        self, number: int, branch: str, body: str = "this line leaks", *, by: str = "alice"
    ) -> EventEnvelope:
        """A comment on a line of a pull request's diff (pull_request_review_comment)."""
        comment = {
            "id": next(self._ids),
            "kind": "review_comment",
            "body": body,
            "author": {"login": by, "id": 9, "type": "Bot" if by.endswith("[bot]") else "User"},
            "author_association": "MEMBER",
            "path": "app.py",
        }
        return self._base(
            "pull_request_review_comment",
            "created",
            sender=by,
            pull_request=self._pr(number, branch),
            comment=comment,
        )

    def _pr(
        self,
        number: int,
        branch: str,
        body: str = "",
        *,
        draft: bool = False,
        state: str = "open",
        merged: bool = False,
        base: str = "main",
        author: str = BOT,
        head_repo: str | None = None,
    ) -> dict[str, Any]:
        """A pull request; by default the App's own, from a branch of this repository."""
        return {
            "author": author,
            "head_repo_full_name": head_repo or self.full_name,
            "number": number,
            "title": f"PR {number}",
            "body": body,
            "state": state,
            "draft": draft,
            "merged": merged,
            "head_ref": branch,
            "head_sha": "abc1234def",
            "base_ref": base,
        }

    def pr(
        self,
        number: int,
        branch: str,
        body: str = "",
        *,
        action: str = "opened",
        draft: bool = False,
        base: str = "main",
        author: str = BOT,
        head_repo: str | None = None,
    ) -> EventEnvelope:
        """A pull request event; by default of the App's own PR, from a branch of this repository."""
        return self._base(
            "pull_request",
            action,
            sender=author if action == "opened" else "alice",
            pull_request=self._pr(
                number, branch, body, draft=draft, base=base, author=author, head_repo=head_repo
            ),
        )

    def pr_labeled(
        self, number: int, branch: str, label: str, *, by: str = "alice", author: str = BOT
    ) -> EventEnvelope:
        """``by`` adds ``label`` to pull request #``number`` (GitHub's ``pull_request.labeled``)."""
        return self._base(
            "pull_request",
            "labeled",
            sender=by,
            pull_request=self._pr(number, branch, author=author),
            label=label,
        )

    def pr_closed(
        self,
        number: int,
        branch: str,
        *,
        merged: bool,
        body: str = "",
        by: str = "alice",
        author: str = BOT,
        head_repo: str | None = None,
    ) -> EventEnvelope:
        pr = self._pr(number, branch, body, state="closed", merged=merged, author=author, head_repo=head_repo)
        return self._base("pull_request", "closed", sender=by, pull_request=pr)

    def review(
        self,
        number: int,
        branch: str,
        state: str,
        *,
        by: str = "bob",
        body: str = "",
        action: str = "submitted",
        sender: str | None = None,
        pr_author: str = BOT,
        head_repo: str | None = None,
        **envelope: Any,
    ) -> EventEnvelope:
        """A review by ``by`` (of the App's PR unless ``pr_author`` says whose); ``sender`` is who
        dismissed it (``action="dismissed"``)."""
        review = {
            "id": next(self._ids),
            "state": state,
            "body": body,
            "author": {"login": by, "id": 11, "type": "Bot" if by.endswith("[bot]") else "User"},
            "commit_id": "abc1234def",
        }
        return self._base(
            "pull_request_review",
            action,
            sender=sender or by,
            pull_request=self._pr(number, branch, author=pr_author, head_repo=head_repo),
            review=review,
            **envelope,
        )

    def check(
        self, branch: str | None, conclusion: str, prs: tuple[int, ...] = (), *, sha: str = "abc1234def"
    ) -> EventEnvelope:
        check = {
            "id": next(self._ids),
            "kind": "check_run",
            "name": "ci",
            "status": "completed",
            "conclusion": conclusion,
            "head_sha": sha,
            "head_branch": branch,
            "pull_request_numbers": list(prs),
        }
        return self._base("check_run", "completed", sender="github-actions[bot]", check=check)

    def status(self, branches: tuple[str, ...], state: str, *, sha: str = "abc1234def") -> EventEnvelope:
        status = {"sha": sha, "state": state, "context": "ci/legacy", "branches": list(branches)}
        return self._base("status", None, sender="ci-bot[bot]", status=status)

    def register_blocker(
        self,
        issue: int,
        blocker: int,
        *,
        agent_id: str | None = None,
        token: str | None = None,
        sleep: bool = False,
    ) -> EventEnvelope:
        command = RegisterBlocker(
            issue_number=issue,
            blocker_number=blocker,
            agent_id=agent_id,
            launch_token=(token or f"{agent_id}-g1-l1") if agent_id is not None else None,
            sleep=sleep,
        )
        return self._base(
            SQUADRON_EVENT, "register_blocker", sender=BOT, origin="squadron", command=command.model_dump()
        )


def recover(
    events: Events,
    agent: AgentRecord,
    action: Literal["relaunch", "escalate"],
    reason: str = "no heartbeat for 15m",
) -> EventEnvelope:
    """The reconciler's command to rescue ``agent`` as it is now."""
    command = RecoverAgent(
        agent_id=agent.agent_id,
        issue_number=agent.issue_number,
        seen_version=agent.version,
        action=action,
        reason=reason,
    )
    return events._base(
        SQUADRON_EVENT, "recover_agent", sender=BOT, origin="squadron", command=command.model_dump()
    )


def summarize(effects: list[Effect]) -> list[str]:
    """Effects as short strings for table-driven assertions."""
    out: list[str] = []
    for e in effects:
        match e:
            case PutAgent(write=w):
                new = "new" if w.expected_version is None else f"v{w.expected_version}"
                out.append(f"put {w.record.agent_id} {w.record.status} ({new})")
            case SetIssueState(number=n, state=s):
                out.append(f"state #{n} {s}")
            case SetIssueAssignment(number=n, assigned=a):
                out.append(f"{'assigned' if a else 'unassigned'} #{n}")
            case AddBlocker(issue=i, blocker=b, agent=a):
                out.append(f"block #{i} by #{b}" + (f" {a.record.agent_id} {a.record.status}" if a else ""))
            case RemoveBlocker(issue=i, blocker=b, agent=a):
                out.append(
                    f"unblock #{i} from #{b}" + (f" {a.record.agent_id} {a.record.status}" if a else "")
                )
            case LinkPullRequest(pr_number=p, issue_number=i):
                out.append(f"link PR #{p} to #{i}")
            case DeliverInbox(item=item):
                out.append(f"inbox {item.agent_id} {item.kind}")
            case RecordReview(pr_number=p, reviewer=r, state=s):
                out.append(f"review PR #{p} {r} {s}")
            case LaunchAgent(agent_id=a, purpose=p):
                out.append(f"launch {a} {p}")
            case StopAgentTask(agent_id=a):
                out.append(f"stop {a}")
            case PostComment(number=n):
                out.append(f"comment #{n}")
            case CloseIssue(number=n):
                out.append(f"close #{n}")
            case AddLabels(number=n, labels=labels):
                out.append(f"label #{n} {','.join(labels)}")
            case CreateIssue(title=title):
                out.append(f"create issue '{title}'")
            case EvaluateMerge(pr_number=n):
                out.append(f"gate PR #{n}")
            case Discard():
                out.append("discard")
    return out


def agent_did(webhook: EventEnvelope, source_agent: str, *, pr_number: int | None = None) -> EventEnvelope:
    """What the agent gateway sends when ``source_agent`` did what ``webhook`` describes.

    The typed command (its fields are the webhook's), origin ``agent``, the verified source
    stamped, the App as sender — as :mod:`squadron.shell.gateway.writes` reports it from GitHub's answer.
    """
    action: AgentAction
    match (webhook.event, webhook.action):
        case ("issues", "opened"):
            assert webhook.issue is not None
            action = AgentOpenedIssue(issue=webhook.issue)
        case ("issues", "assigned"):
            assert webhook.issue is not None
            action = AgentAssignedIssue(issue=webhook.issue)
        case ("pull_request", "opened"):
            assert webhook.pull_request is not None
            action = AgentOpenedPullRequest(pull_request=webhook.pull_request)
        case ("pull_request", "synchronize"):
            assert webhook.pull_request is not None
            action = AgentPushedCommits(pull_request=webhook.pull_request)
        case ("pull_request_review", "submitted"):
            assert webhook.review is not None and webhook.pull_request is not None
            action = AgentSubmittedReview(review=webhook.review, pull_request=webhook.pull_request)
        case ("status", None):
            assert webhook.status is not None and pr_number is not None
            action = AgentPostedStatus(status=webhook.status, pr_number=pr_number)
        case other:
            raise ValueError(f"no agent action reports {other}")
    return webhook.model_copy(
        update={
            "event": SQUADRON_EVENT,
            "action": action.type,
            "origin": "agent",
            "source_agent": source_agent,
            "command": action,
            "issue": None,
            "pull_request": None,
            "review": None,
            "status": None,
            "assignee": None,
        }
    )
