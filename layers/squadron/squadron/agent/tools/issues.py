"""Issues: read one with its comments, comment, label, assign to a dev role, create.

What the agent writes goes through the gateway (:class:`~squadron.agent.writes.GatewayWrites`),
which tells the router what GitHub's ingress drops as the App's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from squadron.agent.tools.base import BaseTools
from squadron.agent.tools.params import AssignIssue, Comment, CreateIssue, LabelIssue, ReadIssue
from squadron.domain.permissions import Action, CallerKind, check
from squadron.domain.repo_config.limits import MAX_LISTED
from squadron.domain.trust import issue_text as trusted_issue
from squadron.domain.trust import reveal

#: The most text read_issue hands the model: the issue's body (cut at a third of it) and as
#: many of the newest comments as fit. Anyone can comment, without end.
ISSUE_BUDGET = 60_000


def issue_text(number: int, issue: Mapping[str, Any], comments: Sequence[Mapping[str, Any]]) -> str:
    """An issue and its comments as read_issue shows them, in about :data:`ISSUE_BUDGET` characters.

    The newest comments are kept (they are what changed); older ones past the budget are
    counted, not shown. GitHub's list starts with the oldest: past :data:`MAX_LISTED` comments
    the newest were never read, and the text says so.
    """
    body = str(issue.get("body") or "")
    if len(body) > ISSUE_BUDGET // 3:
        body = body[: ISSUE_BUDGET // 3] + "\n(the issue's body is cut here)"
    head = [f"#{number} [{issue.get('state')}] {issue.get('title')}", body]
    budget = ISSUE_BUDGET - sum(len(line) + 1 for line in head)  # each line and its newline
    shown: list[str] = []
    for comment in reversed(comments):
        user = comment.get("user")
        login = user.get("login", "?") if isinstance(user, Mapping) else "?"
        line = f"--- {login}: {comment.get('body') or ''}"
        if len(line) + 1 > budget:
            if not shown:  # the newest comment always shows, cut to what is left
                shown.append(line[: max(budget, 200)] + "\n(this comment is cut here)")
            break
        budget -= len(line) + 1
        shown.append(line)
    omitted = len(comments) - len(shown)
    lines = head + ([f"({omitted} older comment{'s' if omitted > 1 else ''} not shown)"] if omitted else [])
    if len(comments) >= MAX_LISTED:
        shown.insert(0, f"(only the first {MAX_LISTED} comments were read: newer ones are on GitHub)")
    return "\n".join(lines + shown[::-1])


class IssueTools(BaseTools):
    def read_issue(self, params: ReadIssue) -> str:
        number = params.number or self.agent.issue_number
        if number is None:
            return "Which issue? You have none of your own: pass number."
        issue = self.github.get_issue(number)
        comments = self.github.list_comments(number)
        author = self.authors()
        # The agent's own issue: the version a writer vouched for (the router recorded it).
        vouch = self.agent.vouched if number == self.agent.issue_number else None
        what = "pull request" if issue.get("pull_request") else "issue"
        text = trusted_issue(
            str(issue.get("title") or ""),
            str(issue.get("body") or ""),
            author(issue.get("user")),
            vouch,
            self.reads,
            what=what,
        )
        shown = [
            {**c, "body": reveal("comment", str(c.get("body") or ""), author(c.get("user")), self.reads)}
            for c in comments
        ]
        return issue_text(number, {**issue, "title": text.title, "body": text.body}, shown)

    def comment(self, params: Comment) -> str:
        own = {n for n in (self.agent.issue_number, self.agent.pr_number) if n is not None}
        number = params.number or self.agent.issue_number
        if number is None:
            return "Which issue? Pass number."
        if self.github.caller.kind is not CallerKind.PM and number not in own:
            mine = " or ".join(f"#{n}" for n in sorted(own))
            return f"Not commented: you comment on your own issue or pull request ({mine}), not #{number}."
        created = self.writes.comment(number, params.body)
        return f"Commented on #{number} (comment {created.get('id')})."

    def label_issue(self, params: LabelIssue) -> str:
        unknown = sorted(set(params.labels) - set(self.repo_config.labels))
        if unknown:
            return (
                f"Not labelled: {', '.join(unknown)} not in the taxonomy. "
                f"Labels: {', '.join(sorted(self.repo_config.labels))}."
            )
        applied = self.writes.add_labels(params.number, params.labels)
        names = ", ".join(str(label.get("name")) for label in applied)
        return f"#{params.number} now has labels: {names}."

    def assign_issue(self, params: AssignIssue) -> str:
        config = self.repo_config
        role = config.roles.get(params.role)
        dev_roles = sorted(name for name, r in config.roles.items() if r is not None and r.kind == "dev")
        if role is None or role.kind != "dev":
            return f"Not assigned: {params.role} is not a dev role. Dev roles: {', '.join(dev_roles)}."
        check(self.github.caller, Action.ASSIGN)
        issue = self.github.get_issue(params.number)
        if issue.get("pull_request"):
            return f"Not assigned: #{params.number} is a pull request."
        if issue.get("state") != "open":
            return f"Not assigned: #{params.number} is {issue.get('state')}."
        labels = [str(label.get("name")) for label in issue.get("labels", []) if isinstance(label, dict)]
        routes = config.label_roles()
        current = next((routes[name] for name in labels if name in routes), config.default_dev_role)
        if current != params.role:
            routing = [name for name, target in routes.items() if target == params.role]
            conflicting = [name for name in labels if name in routes]
            if conflicting or not routing:
                return (
                    f"Not assigned: #{params.number}'s labels route it to {current}"
                    + (f" ({', '.join(conflicting)})" if conflicting else "")
                    + f", not {params.role}. "
                    + (
                        f"Label it {routing[0]} instead of {', '.join(conflicting)}."
                        if routing
                        else f"No label routes to {params.role}."
                    )
                )
            applied = self.writes.add_labels(params.number, [routing[0]])
            issue = {**issue, "labels": applied}
        bot = config.bot_login
        assigned = self.writes.add_assignees(params.number, [bot])
        logins = [str(user.get("login")) for user in assigned.get("assignees", []) if isinstance(user, dict)]
        if bot not in logins:
            return (
                f"GitHub did not assign #{params.number} to {bot} (assignees now: {', '.join(logins) or 'none'}); "
                "no agent starts. Escalate if this persists."
            )
        # The gateway tells the router (the App's own issues.assigned webhook is dropped at the
        # ingress): the issue's dev agent starts.
        return f"Assigned #{params.number} to {params.role}: its agent starts."

    def create_issue(self, params: CreateIssue) -> str:
        unknown = sorted(set(params.labels) - set(self.repo_config.labels))
        if unknown:
            return f"Not created: {', '.join(unknown)} not in the taxonomy."
        issue = self.writes.create_issue(params.title, params.body, labels=params.labels)
        return f"Created #{issue['number']}: {issue.get('title', params.title)}."
