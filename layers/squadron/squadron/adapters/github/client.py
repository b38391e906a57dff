"""The role-enforcing GitHub client: every operation is checked against the permission table first.

A :class:`GitHubClient` is bound to one caller (an agent's role, or the
framework), one installation and one repository. Each public method names the
:class:`~squadron.domain.permissions.Action` it needs; a refused action raises
:class:`~squadron.domain.permissions.PermissionDeniedError` before any request
is sent. Everything the App writes in prose (issue bodies, comments, reviews)
carries the caller's role tag for the audit trail.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

from squadron.adapters.github.client_core import Json, github_time
from squadron.adapters.github.errors import GitHubError, NotFoundError, ValidationFailedError
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.github.issue_calls import IssueCalls
from squadron.adapters.github.pull_calls import PullCalls
from squadron.domain.effects import marked_item, written_by
from squadron.domain.permissions import Action, Caller, check
from squadron.errors import FileTooLargeError

#: GitHub's repository roles that are no custom role (``role_name`` of the permission endpoint).
_BASE_ROLES = frozenset({"admin", "maintain", "write", "triage", "read", "none"})


class GitHubClient(IssueCalls, PullCalls):
    """The role-checked calls on one repository (issues and pull requests in their own modules)."""

    # --- lookups of keyed writes ---------------------------------------------------------------
    #
    # What an earlier attempt of a keyed write created: written by ``login`` (the App; None: any
    # bot) and carrying the key's hidden marker (:func:`squadron.domain.effects.marked`). Each
    # pages through all it must read and never filters on what a person may change afterwards
    # (labels, titles); None means GitHub shows no such thing, a failed read raises.

    def find_comment(self, number: int, key: str, login: str | None, since: datetime) -> Json | None:
        """The comment on ``number`` carrying ``key`` (made at or after ``since``), or None."""
        check(self.caller, Action.READ)
        comments = self._every(f"/issues/{number}/comments", "comments", params={"since": github_time(since)})
        return _found(marked_item(comments, key, login))

    def find_issue(self, key: str, login: str | None, since: datetime, *, pulls: bool = False) -> Json | None:
        """The issue (``pulls``: pull request, as the issues list shows it) carrying ``key``,
        opened at or after ``since``, or None. Newest first; the pages stop at the first item
        opened before ``since`` (nothing older can be it)."""
        check(self.caller, Action.READ)
        listed = self._every(
            "/issues",
            "issues",
            params={"state": "all", "since": github_time(since), "sort": "created", "direction": "desc"},
        )
        cutoff = github_time(since)

        def recent() -> Iterable[Json]:
            for item in listed:
                created = str(item.get("created_at") or "")
                if created and created < cutoff:
                    return
                if ("pull_request" in item) == pulls:
                    yield item

        return _found(marked_item(recent(), key, login))

    def find_pull(self, head: str, key: str, login: str | None, since: datetime) -> Json | None:
        """The pull request from branch ``head`` that ``login`` opened carrying ``key``, or None.

        A pull request's head branch never changes, so one the App opened from ``head`` at or
        after ``since`` is it even when a person has edited the marker out of its body."""
        check(self.caller, Action.READ)
        owner = self.repo.partition("/")[0]
        pulls = [
            p
            for p in self._every(
                "/pulls", "pull requests", params={"state": "all", "head": f"{owner}:{head}"}
            )
            if written_by(p, login) and (p.get("head") or {}).get("ref") == head
        ]
        found = marked_item(pulls, key, login) or next(
            (p for p in pulls if str(p.get("created_at") or "") >= github_time(since)), None
        )
        return self.get_pull(int(found["number"])) if found is not None else None

    def find_review(self, number: int, key: str, login: str | None) -> Json | None:
        """The review of pull request ``number`` carrying ``key``, or None."""
        check(self.caller, Action.READ)
        return _found(marked_item(self._every(f"/pulls/{number}/reviews", "reviews"), key, login))

    # --- statuses and checks -------------------------------------------------------------------

    def create_status(
        self,
        sha: str,
        *,
        state: Literal["error", "failure", "pending", "success"],
        context: str,
        description: str = "",
        target_url: str | None = None,
    ) -> Json:
        check(self.caller, Action.POST_STATUS, status_context=context)
        payload: Json = {"state": state, "context": context, "description": description[:140]}
        if target_url is not None:
            payload["target_url"] = target_url
        # GitHub keeps the latest status per context on a commit: the same status twice reads
        # as once (the combined status, branch protection and the merge gate see the latest).
        result: Json = self._send("POST", f"/statuses/{sha}", json=payload, idempotent=True)
        return result

    def create_check_run(
        self,
        *,
        name: str,
        head_sha: str,
        status: Literal["queued", "in_progress", "completed"] = "in_progress",
        conclusion: str | None = None,
        summary: str = "",
    ) -> Json:
        check(self.caller, Action.CHECK_RUN)
        payload: Json = {"name": name, "head_sha": head_sha, "status": status}
        if conclusion is not None:
            payload["conclusion"] = conclusion
        if summary:
            payload["output"] = {"title": name, "summary": summary}
        result: Json = self._send("POST", "/check-runs", json=payload)
        return result

    def update_check_run(
        self, check_run_id: int, *, status: str, conclusion: str | None = None, summary: str = ""
    ) -> Json:
        check(self.caller, Action.CHECK_RUN)
        payload: Json = {"status": status}
        if conclusion is not None:
            payload["conclusion"] = conclusion
        if summary:
            payload["output"] = {"title": "squadron", "summary": summary}
        result: Json = self._send("PATCH", f"/check-runs/{check_run_id}", json=payload, idempotent=True)
        return result

    def list_check_runs(self, ref: str) -> list[Json]:
        check(self.caller, Action.READ)
        return self._list(f"/commits/{quote(ref, safe='')}/check-runs", items_key="check_runs")

    def get_combined_status(self, ref: str) -> Json:
        """Every status context's latest state on ``ref`` (``statuses``) and the combined ``state``."""
        check(self.caller, Action.READ)
        result: Json = self._send("GET", f"/commits/{quote(ref, safe='')}/status", params={"per_page": 100})
        return result

    # --- repository ----------------------------------------------------------------------------

    def get_repository(self) -> Json:
        check(self.caller, Action.READ)
        result: Json = self._send("GET", "")
        return result

    def delete_branch(self, branch: str) -> None:
        """Delete a merged pull request's head branch (the framework only); gone already is fine."""
        check(self.caller, Action.DELETE_BRANCH)
        try:
            # One path parameter, as octokit sends it: "heads/<branch>" percent-encoded.
            # Sent twice, the second finds it gone (422 or 404, below).
            self._send("DELETE", f"/git/refs/{quote(f'heads/{branch}', safe='')}", idempotent=True)
        except (NotFoundError, ValidationFailedError):
            return  # deleted already (by a human, or GitHub's delete-on-merge setting)

    def protect_branch(self, branch: str, protection: Json) -> Json:
        """Set ``branch``'s protection (replaces it whole); needs administration: write."""
        check(self.caller, Action.PROTECT_BRANCH)
        # Replaces the protection whole: twice is once.
        result: Json = self._send(
            "PUT", f"/branches/{quote(branch, safe='')}/protection", json=protection, idempotent=True
        )
        return result

    def list_branches(self) -> list[Json]:
        check(self.caller, Action.READ)
        return self._list("/branches")

    def get_branch(self, branch: str) -> Json:
        check(self.caller, Action.READ)
        result: Json = self._send("GET", f"/branches/{quote(branch, safe='')}")
        return result

    def read_file(self, path: str, ref: str, *, max_bytes: int | None = None) -> bytes | None:
        """The bytes of the regular file ``path`` at ``ref``; None when there is no such file.

        With ``max_bytes``, a file GitHub says is larger is not downloaded:
        :class:`~squadron.errors.FileTooLargeError` names its size instead.
        """
        check(self.caller, Action.READ)
        try:
            data = self._send("GET", f"/contents/{quote(path)}", params={"ref": ref})
        except NotFoundError:
            return None
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        size = data.get("size")
        if max_bytes is not None and isinstance(size, int) and size > max_bytes:
            raise FileTooLargeError(path, size, max_bytes)
        if data.get("encoding") == "none":  # over 1 MB: the contents API leaves the content out
            data = self._send("GET", f"/git/blobs/{quote(str(data['sha']))}")
        try:
            # GitHub wraps the base64 every 60 characters; b64decode skips the newlines.
            content = base64.b64decode(str(data.get("content") or ""))
        except ValueError as exc:
            raise GitHubError(200, f"the contents of {path} are not valid base64: {exc}") from exc
        if max_bytes is not None and len(content) > max_bytes:
            raise FileTooLargeError(path, len(content), max_bytes)
        return content

    def list_directory(self, path: str, ref: str) -> list[Json] | Json | None:
        """The entries of directory ``path`` at ``ref``; what is there instead (a file, a symbolic
        link: one object with its ``type``); None when there is nothing."""
        check(self.caller, Action.READ)
        try:
            data = self._send("GET", f"/contents/{quote(path)}", params={"ref": ref})
        except NotFoundError:
            return None
        if isinstance(data, list):
            return [entry for entry in data if isinstance(entry, dict)]
        return data if isinstance(data, dict) else None

    def collaborator_permission(self, login: str) -> str:
        """admin, maintain, write, triage, read or none.

        GitHub's ``role_name`` when it is one of those; for a custom repository role (any
        other name) the base role it inherits, which GitHub gives as ``permission`` (admin,
        write, read or none: maintain counted as write, triage as read).
        """
        check(self.caller, Action.READ)
        try:
            data = self._send("GET", f"/collaborators/{quote(login)}/permission")
        except NotFoundError:
            return "none"
        role = str(data.get("role_name") or "")
        return role if role in _BASE_ROLES else str(data.get("permission") or "none")


def _found(item: Mapping[str, Any] | None) -> Json | None:
    return dict(item) if item is not None else None


class GitHubAppClient:
    """What the App does as itself (App JWT): its webhook deliveries and installations."""

    def __init__(self, *, http: GitHubHttp, jwt: Callable[[], str], app_id: int, caller: Caller) -> None:
        self.http = http
        self._jwt = jwt
        self.app_id = app_id
        self.caller = caller

    def get_app(self) -> Json:
        """The App itself (its slug names its bot: ``<slug>[bot]``); proves the JWT is accepted."""
        check(self.caller, Action.READ)
        response = self.http.request("GET", "/app", token=self._jwt(), throttle_key=f"app-{self.app_id}")
        app: Json = response.json()
        return app

    def list_deliveries(self, *, limit: int = 500) -> list[Json]:
        """The most recent webhook deliveries, newest first (cursor pagination), up to ``limit``."""
        check(self.caller, Action.APP_ADMIN)
        out: list[Json] = []
        for item in self.http.paginate(
            "/app/hook/deliveries", token=self._jwt(), throttle_key=f"app-{self.app_id}"
        ):
            out.append(item)
            if len(out) >= limit:
                break
        return out

    def redeliver(self, delivery_id: int) -> None:
        check(self.caller, Action.APP_ADMIN)
        self.http.request(
            "POST",
            f"/app/hook/deliveries/{delivery_id}/attempts",
            token=self._jwt(),
            throttle_key=f"app-{self.app_id}",
        )

    def list_installation_repositories(self, token: str) -> list[Json]:
        """Repositories an installation token can reach."""
        check(self.caller, Action.READ)
        return list(
            self.http.paginate(
                "/installation/repositories",
                token=token,
                throttle_key=f"app-{self.app_id}",
                items_key="repositories",
            )
        )
