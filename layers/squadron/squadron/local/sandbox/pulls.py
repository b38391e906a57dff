"""Pull requests: open, read, close or reopen, files, reviews, merge (branch protection and closing keywords), update branch.

A push to a pull request's head branch (the git store's post-receive hook) refreshes it (and its
``refs/pull/<n>/head``) and sends ``synchronize``; a merge into the default branch closes the issues its body closes.
"""

from __future__ import annotations

import re
from typing import Any

from squadron.local.git_store import GitStoreError
from squadron.local.sandbox.base import ApiError, Json, Repo, github_now
from squadron.local.sandbox.issues import IssueOps

#: GitHub's answer to a REST merge into a branch whose rules require a merge queue.
MERGE_QUEUE_REQUIRED = "Changes must be made through the merge queue"
_CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)


class PullOps(IssueOps):
    def _pushed(self, notice: Json, sender: str | None = None) -> None:
        """A push moved ``notice``'s refs: ``synchronize`` for the open pull requests on them, sent
        by ``sender`` (who asked GitHub to push: update-branch's caller) or else the App (a push
        through git names no one to the sandbox; agents push as the App)."""
        with self._lock:
            repo = self.repos.get(str(notice.get("repository")))
            if repo is None:
                return
            for old, new, ref in notice.get("updates", []):
                branch = ref.removeprefix("refs/heads/")
                for pr in repo.pulls.values():
                    if pr["state"] == "open" and pr["head"]["ref"] == branch and new != "0" * 40:
                        self._refresh_pull(repo, pr)
                        pr["updated_at"] = github_now()
                        self.emit(
                            repo,
                            "pull_request",
                            "synchronize",
                            {"pull_request": pr, "before": old, "after": new},
                            sender or self.bot_login,
                        )
                        self._head_moved(repo, pr)

    def _refresh_pull(self, repo: Repo, pr: Json) -> None:
        head = repo.store.sha(f"refs/heads/{pr['head']['ref']}") or pr["head"]["sha"]
        base = repo.store.sha(f"refs/heads/{pr['base']['ref']}") or pr["base"]["sha"]
        pr["head"]["sha"], pr["base"]["sha"] = head, base
        # GitHub keeps every pull request's head under refs/pull/<n>/head (a fork's too): what a
        # review agent's checkout fetches.
        repo.store.git("update-ref", f"refs/pull/{pr['number']}/head", head)
        if pr["state"] == "open":
            pr["mergeable"] = not repo.store.conflicts(base, head)
            pr["mergeable_state"] = "clean" if pr["mergeable"] else "dirty"

    def _op_pulls__create(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        head, base = body["head"].split(":")[-1], body["base"]
        head_sha, base_sha = repo.store.sha(f"refs/heads/{head}"), repo.store.sha(f"refs/heads/{base}")
        if head_sha is None or base_sha is None:
            raise ApiError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "PullRequest",
                        "field": "head" if head_sha is None else "base",
                        "code": "invalid",
                    }
                ],
            )
        if head_sha == base_sha or not repo.store.changed_files(base_sha, head_sha):
            raise ApiError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"No commits between {base} and {head}",
                    }
                ],
            )
        issue = self._new_issue(repo, body["title"], body.get("body") or "", caller, pull=True)
        number = issue["number"]
        issue["pull_request"] = {
            "url": f"https://api.github.com/repos/{repo.full_name}/pulls/{number}",
            "html_url": issue["html_url"],
            "merged_at": None,
        }
        branch_repo = self.repository(repo)
        pr: Json = {
            **{
                k: issue[k]
                for k in (
                    "id",
                    "number",
                    "title",
                    "body",
                    "state",
                    "user",
                    "labels",
                    "html_url",
                    "created_at",
                    "updated_at",
                    "closed_at",
                    "author_association",
                )
            },
            "node_id": f"PR_{repo.id}_{number}",
            "draft": bool(body.get("draft")),
            "merged": False,
            "merged_at": None,
            "merge_commit_sha": None,
            "head": {
                "ref": head,
                "sha": head_sha,
                "label": f"{repo.owner}:{head}",
                "repo": branch_repo,
                "user": self.user(repo.owner),
            },
            "base": {
                "ref": base,
                "sha": base_sha,
                "label": f"{repo.owner}:{base}",
                "repo": branch_repo,
                "user": self.user(repo.owner),
            },
            "requested_reviewers": [],
        }
        self._refresh_pull(repo, pr)
        repo.pulls[number] = pr
        self.emit(repo, "pull_request", "opened", {"pull_request": pr, "number": number}, caller)
        return 201, pr

    def _op_pulls__list(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        """By state (open by default), ``head`` (``owner:branch``) and ``base``; newest first."""
        repo = self._repo(params)
        state = query.get("state") or "open"
        head = str(query.get("head") or "")
        found = [
            pr
            for _, pr in sorted(repo.pulls.items(), reverse=query.get("direction") != "asc")
            if state in ("all", pr["state"])
            and (not head or pr["head"]["label"] == head)
            and query.get("base") in (None, pr["base"]["ref"])
        ]
        return 200, found

    def _pull(self, repo: Repo, number: int) -> Json:
        pr = repo.pulls.get(number)
        if pr is None:
            raise ApiError(404, "Not Found")
        return pr

    def _op_pulls__get(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        pr = self._pull(repo, int(params["pull_number"]))
        self._refresh_pull(repo, pr)
        return 200, pr

    def _op_pulls__update(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        """A pull request closed unmerged or reopened (``state``; its title and body too), its
        webhook sent (``closed`` with ``merged`` false, ``reopened``), as a person does on GitHub."""
        repo = self._repo(params)
        number = int(params["pull_number"])
        pr = self._pull(repo, number)
        issue = repo.issues[number]
        now = github_now()
        for field in ("title", "body"):
            if field in body:
                pr[field] = issue[field] = body[field]
        state = body.get("state")
        if state == "closed" and pr["state"] == "open":
            pr.update({"state": "closed", "closed_at": now, "updated_at": now})
            issue.update({"state": "closed", "closed_at": now, "updated_at": now})
            self.emit(repo, "pull_request", "closed", {"pull_request": pr, "number": number}, caller)
        elif state == "open" and pr["state"] == "closed" and not pr.get("merged"):
            pr.update({"state": "open", "closed_at": None, "updated_at": now})
            issue.update({"state": "open", "closed_at": None, "updated_at": now})
            self._refresh_pull(repo, pr)
            self.emit(repo, "pull_request", "reopened", {"pull_request": pr, "number": number}, caller)
        return 200, pr

    def _op_pulls__list_files(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        pr = self._pull(repo, int(params["pull_number"]))
        files = repo.store.changed_files(pr["base"]["sha"], pr["head"]["sha"])
        return 200, [
            {
                "sha": pr["head"]["sha"],
                "filename": f.filename,
                "status": f.status,
                "additions": f.additions,
                "deletions": f.deletions,
                "changes": f.additions + f.deletions,
                "patch": f.patch,
            }
            for f in files
        ]

    def _op_pulls__list_reviews(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        return 200, repo.reviews.get(int(params["pull_number"]), [])

    def _op_pulls__create_review(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        number = int(params["pull_number"])
        pr = self._pull(repo, number)
        if caller == pr["user"]["login"] and body.get("event") in ("APPROVE", "REQUEST_CHANGES"):
            raise ApiError(
                422, "Unprocessable Entity", [{"message": "Can not approve your own pull request"}]
            )
        state = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}.get(
            body.get("event", ""), "COMMENTED"
        )
        review: Json = {
            "id": next(self._ids),
            "node_id": f"PRR_{number}",
            "user": self.user(caller),
            "body": body.get("body") or "",
            "state": state,
            "commit_id": body.get("commit_id") or pr["head"]["sha"],
            "submitted_at": github_now(),
            "author_association": "NONE" if caller.endswith("[bot]") else "MEMBER",
            "html_url": f"{pr['html_url']}#pullrequestreview",
        }
        repo.reviews.setdefault(number, []).append(review)
        self.emit(repo, "pull_request_review", "submitted", {"review": review, "pull_request": pr}, caller)
        return 200, review

    def _op_pulls__merge(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        number = int(params["pull_number"])
        pr = self._pull(repo, number)
        self._refresh_pull(repo, pr)
        if pr["state"] != "open":
            raise ApiError(405, "Pull Request is not mergeable")
        if self._queue_required(repo, pr["base"]["ref"]):
            raise ApiError(405, MERGE_QUEUE_REQUIRED)
        if body.get("sha") and body["sha"] != pr["head"]["sha"]:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        if pr["mergeable_state"] == "dirty":
            raise ApiError(405, "Pull Request is not mergeable")
        blocked = self._protection_blocks(repo, pr)
        if blocked:
            raise ApiError(405, f"Repository rule violations found: {blocked}")
        method = body.get("merge_method", "merge")
        sha = repo.store.merge(
            pr["base"]["ref"], pr["head"]["sha"], method=method, message=f"{pr['title']} (#{number})"
        )
        self._merged(repo, pr, sha, caller)
        return 200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}

    def _merged(self, repo: Repo, pr: Json, sha: str, by: str) -> None:
        """``pr`` merged as ``sha`` by ``by``: closed, its webhook sent, the issues it closes closed."""
        number = int(pr["number"])
        now = github_now()
        pr.update(
            {
                "state": "closed",
                "merged": True,
                "merged_at": now,
                "closed_at": now,
                "updated_at": now,
                "merge_commit_sha": sha,
                "merged_by": self.user(by),
            }
        )
        issue = repo.issues[number]
        issue.update({"state": "closed", "closed_at": now, "updated_at": now})
        issue["pull_request"]["merged_at"] = now
        self.emit(repo, "pull_request", "closed", {"pull_request": pr, "number": number}, by)
        if pr["base"]["ref"] == repo.default_branch:  # closing keywords close issues on the default branch
            for ref in dict.fromkeys(int(n) for n in _CLOSING.findall(pr.get("body") or "")):
                target = repo.issues.get(ref)
                if target is not None and target["state"] == "open" and "pull_request" not in target:
                    self._close_issue(repo, target, "completed", by)

    def _protection_blocks(self, repo: Repo, pr: Json) -> str:
        """Why branch protection forbids the merge, or "" (required checks by context)."""
        rules = repo.protections.get(pr["base"]["ref"])
        if not rules:
            return ""
        outcomes = {s["context"]: s["state"] for s in reversed(repo.statuses.get(pr["head"]["sha"], []))}
        outcomes.update(
            {
                r["name"]: r.get("conclusion") or r["status"]
                for r in repo.check_runs.get(pr["head"]["sha"], [])
            }
        )
        checks = (rules.get("required_status_checks") or {}).get("checks") or []
        missing = [c["context"] for c in checks if outcomes.get(c["context"]) != "success"]
        return f"required checks not passing: {', '.join(missing)}" if missing else ""

    def _op_pulls__update_branch(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        pr = self._pull(repo, int(params["pull_number"]))
        if body.get("expected_head_sha") and body["expected_head_sha"] != pr["head"]["sha"]:
            raise ApiError(422, "expected head sha didn't match current head ref.")
        try:
            repo.store.merge(
                pr["head"]["ref"],
                pr["base"]["sha"],
                method="merge",
                message=f"Merge {pr['base']['ref']} into {pr['head']['ref']}",
            )
        except GitStoreError as exc:
            raise ApiError(422, f"merge conflict between base and head: {exc}") from exc
        self._pushed(
            {
                "repository": repo.full_name,
                "updates": [[pr["head"]["sha"], "x", f"refs/heads/{pr['head']['ref']}"]],
            },
            sender=caller,  # GitHub's synchronize names who updated the branch
        )
        return 202, {"message": "Updating pull request branch.", "url": pr["html_url"]}
