"""Issues: create, list, read, edit, close and reopen, labels, assignees, comments.

Issues and pull requests share numbers, as on GitHub; each change sends its webhook.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from squadron.local.sandbox.base import ApiError, Json, Repo, github_now
from squadron.local.sandbox.webhooks import WebhookOps


class IssueOps(WebhookOps):
    def _issue(self, repo: Repo, number: int) -> Json:
        issue = repo.issues.get(number)
        if issue is None:
            raise ApiError(404, "Not Found")
        return issue

    def _label(self, name: str) -> Json:
        return {"id": sum(name.encode()), "name": name, "color": "ededed", "default": False}

    def _new_issue(self, repo: Repo, title: str, body: str, author: str, *, pull: bool = False) -> Json:
        number = len(repo.issues) + 1
        now = github_now()
        issue: Json = {
            "id": next(self._ids),
            "node_id": f"I_{repo.id}_{number}",
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "state_reason": None,
            "locked": False,
            "labels": [],
            "assignee": None,
            "assignees": [],
            "user": self.user(author),
            "author_association": "NONE" if author.endswith("[bot]") else "MEMBER",
            "comments": 0,
            "html_url": f"https://github.com/{repo.full_name}/{'pull' if pull else 'issues'}/{number}",
            "url": f"https://api.github.com/repos/{repo.full_name}/issues/{number}",
            "created_at": now,
            "updated_at": now,
            "closed_at": None,
        }
        if self.is_app(author):
            issue["performed_via_github_app"] = self._app()
        repo.issues[number] = issue
        return issue

    def _op_issues__create(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._new_issue(repo, body["title"], body.get("body") or "", caller)
        issue["labels"] = [self._label(n) for n in body.get("labels", [])]
        issue["assignees"] = [self.user(a) for a in body.get("assignees", [])]
        issue["assignee"] = issue["assignees"][0] if issue["assignees"] else None
        self.emit(repo, "issues", "opened", {"issue": issue}, caller)
        return 201, issue

    def _op_issues__list_for_repo(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        """By state (open by default), labels (each one required) and ``since`` (updated at or
        after), sorted by ``sort`` (created, updated) and ``direction`` (newest first unless asc)."""
        repo = self._repo(params)
        state = query.get("state") or "open"
        wanted = {name for name in str(query.get("labels") or "").split(",") if name}
        since = str(query.get("since") or "")
        field = "updated_at" if query.get("sort") == "updated" else "created_at"
        found = [
            issue
            for issue in sorted(
                repo.issues.values(),
                key=lambda i: (i[field], i["number"]),
                reverse=query.get("direction") != "asc",
            )
            if state in ("all", issue["state"])
            and wanted <= {label["name"] for label in issue["labels"]}
            and issue["updated_at"] >= since
        ]
        return 200, found

    def _op_issues__get(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        return 200, self._issue(self._repo(params), int(params["issue_number"]))

    def _op_issues__update(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        edited: Json = {k: body[k] for k in ("title", "body") if k in body and body[k] != issue[k]}
        issue.update(edited)
        issue["updated_at"] = github_now()
        if edited:
            self.emit(
                repo,
                "issues",
                "edited",
                {"issue": issue, "changes": {k: {"from": v} for k, v in edited.items()}},
                caller,
            )
        state = body.get("state")
        if state == "closed" and issue["state"] == "open":
            self._close_issue(repo, issue, body.get("state_reason") or "completed", caller)
        elif state == "open" and issue["state"] == "closed":
            issue.update({"state": "open", "state_reason": "reopened", "closed_at": None})
            self.emit(repo, "issues", "reopened", {"issue": issue}, caller)
        return 200, issue

    def _close_issue(self, repo: Repo, issue: Json, reason: str, caller: str) -> None:
        issue.update(
            {
                "state": "closed",
                "state_reason": reason,
                "closed_at": github_now(),
                "updated_at": github_now(),
                "closed_by": self.user(caller),
            }
        )
        self.emit(repo, "issues", "closed", {"issue": issue}, caller)

    def _op_issues__add_labels(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        names = body.get("labels", []) if isinstance(body, dict) else body
        for name in names:
            if name not in {label["name"] for label in issue["labels"]}:
                label = self._label(name)
                issue["labels"].append(label)
                issue["updated_at"] = github_now()
                self._emit_label(repo, issue, "labeled", label, caller)
        return 200, issue["labels"]

    def _emit_label(self, repo: Repo, issue: Json, action: str, label: Json, caller: str) -> None:
        """A label added to or removed from an issue or pull request, as GitHub sends it: on a
        pull request the ``pull_request`` event (its ``number``, ``pull_request`` and ``label``),
        not ``issues``."""
        number = int(issue["number"])
        if "pull_request" in issue:
            parts: Json = {"number": number, "pull_request": repo.pulls[number], "label": label}
            self.emit(repo, "pull_request", action, parts, caller)
        else:
            self.emit(repo, "issues", action, {"issue": issue, "label": label}, caller)

    def _op_issues__remove_label(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        name = unquote(params["name"])
        if name not in {label["name"] for label in issue["labels"]}:
            raise ApiError(404, "Label does not exist")
        # In place: a pull request's object shares its issue's list of labels.
        issue["labels"][:] = [label for label in issue["labels"] if label["name"] != name]
        issue["updated_at"] = github_now()
        self._emit_label(repo, issue, "unlabeled", self._label(name), caller)
        return 200, issue["labels"]

    def _op_issues__add_assignees(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        for login in body.get("assignees", []):
            assignable = login == self.bot_login or login in repo.permissions
            if assignable and login not in {a["login"] for a in issue["assignees"]}:
                issue["assignees"].append(self.user(login))
                issue["assignee"] = issue["assignees"][0]
                issue["updated_at"] = github_now()
                self.emit(repo, "issues", "assigned", {"issue": issue, "assignee": self.user(login)}, caller)
        return 201, issue

    def _op_issues__remove_assignees(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        for login in body.get("assignees", []):
            if login in {a["login"] for a in issue["assignees"]}:
                issue["assignees"] = [a for a in issue["assignees"] if a["login"] != login]
                issue["assignee"] = issue["assignees"][0] if issue["assignees"] else None
                issue["updated_at"] = github_now()
                self.emit(
                    repo, "issues", "unassigned", {"issue": issue, "assignee": self.user(login)}, caller
                )
        return 200, issue

    def _op_issues__list_comments(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        self._issue(repo, int(params["issue_number"]))
        since = str(query.get("since") or "")  # updated at or after it
        return 200, [
            c for c in repo.comments.get(int(params["issue_number"]), []) if c["updated_at"] >= since
        ]

    def _op_issues__update_comment(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        """A person (or the App) edits a comment's body."""
        repo = self._repo(params)
        for number, comments in repo.comments.items():
            for comment in comments:
                if comment["id"] == int(params["comment_id"]):
                    changes = {"body": {"from": comment["body"]}}
                    comment.update({"body": body["body"], "updated_at": github_now()})
                    issue = self._issue(repo, number)
                    self.emit(
                        repo,
                        "issue_comment",
                        "edited",
                        {"issue": issue, "comment": comment, "changes": changes},
                        caller,
                    )
                    return 200, comment
        raise ApiError(404, "Not Found")

    def _op_issues__create_comment(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        number = int(params["issue_number"])
        issue = self._issue(repo, number)
        now = github_now()
        comment: Json = {
            "id": next(self._ids),
            "node_id": f"IC_{number}",
            "body": body["body"],
            "user": self.user(caller),
            "author_association": "NONE" if caller.endswith("[bot]") else "MEMBER",
            "html_url": f"{issue['html_url']}#issuecomment",
            "created_at": now,
            "updated_at": now,
        }
        if self.is_app(caller):
            comment["performed_via_github_app"] = self._app()
        repo.comments.setdefault(number, []).append(comment)
        issue["comments"] += 1
        self.emit(repo, "issue_comment", "created", {"issue": issue, "comment": comment}, caller)
        return 201, comment
