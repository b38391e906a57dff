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
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from squadron.adapters.github.errors import (
    GitHubError,
    GraphQLError,
    LookupIncompleteError,
    MaybeAppliedError,
    NotFoundError,
    ValidationFailedError,
)
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.effects import marked_item, written_by
from squadron.domain.permissions import (
    REVIEW_EVENT_ACTIONS,
    Action,
    Caller,
    CallerKind,
    MergeConsent,
    check,
    tagged,
)
from squadron.domain.repo_config.limits import MAX_LISTED
from squadron.errors import FileTooLargeError

Json = dict[str, Any]


def _timestamp(at: datetime) -> str:
    """GitHub's ISO 8601 timestamp (``YYYY-MM-DDTHH:MM:SSZ``), cut to the second (still at or before ``at``)."""
    return at.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


#: A merge queue entry's fields the App reads (GitHub's GraphQL ``MergeQueueEntry``).
_ENTRY_FIELDS = "id state position enqueuedAt enqueuer { __typename login } headCommit { oid }"
ENQUEUE_PULL_REQUEST = (
    "mutation($input: EnqueuePullRequestInput!) { enqueuePullRequest(input: $input) "
    f"{{ mergeQueueEntry {{ {_ENTRY_FIELDS} }} }} }}"
)
DEQUEUE_PULL_REQUEST = (
    "mutation($input: DequeuePullRequestInput!) { dequeuePullRequest(input: $input) "
    f"{{ mergeQueueEntry {{ {_ENTRY_FIELDS} }} }} }}"
)
MERGE_QUEUE_ENTRY = (
    "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) "
    f"{{ pullRequest(number: $number) {{ id headRefOid mergeQueueEntry {{ {_ENTRY_FIELDS} }} }} }} }}"
)

ReviewEvent = Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]
#: GitHub's repository roles that are no custom role (``role_name`` of the permission endpoint).
_BASE_ROLES = frozenset({"admin", "maintain", "write", "triage", "read", "none"})


class GitHubClient:
    def __init__(
        self,
        *,
        http: GitHubHttp,
        token: Callable[[], str],
        installation_id: int,
        repo: str,
        caller: Caller,
    ) -> None:
        owner, _, name = repo.partition("/")
        if not owner or not name:
            raise ValueError(f"repo must be 'owner/name', got {repo!r}")
        self.http = http
        self._token = token
        self.installation_id = installation_id
        self.repo = repo
        self.caller = caller
        self._base = f"/repos/{quote(owner)}/{quote(name)}"

    def __repr__(self) -> str:
        return f"GitHubClient({self.repo}, installation {self.installation_id}, as {self.caller.name})"

    # --- plumbing ------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> Any:
        """One request; ``idempotent`` (a write GitHub applying twice leaves as once) lets the
        transport re-send it after a 5xx or a lost answer, else it raises MaybeAppliedError."""
        response = self.http.request(
            method,
            self._base + path,
            token=self._token(),
            throttle_key=f"installation-{self.installation_id}",
            params=params,
            json=json,
            idempotent=idempotent,
        )
        return response.json() if response.content else None

    def _list(
        self, path: str, *, params: Mapping[str, Any] | None = None, items_key: str | None = None
    ) -> list[Json]:
        """At most :data:`MAX_LISTED` items of a list (a caller that must see them all checks)."""
        return list(
            self.http.paginate(
                self._base + path,
                token=self._token(),
                throttle_key=f"installation-{self.installation_id}",
                params=params,
                items_key=items_key,
                limit=MAX_LISTED,
            )
        )

    def _every(self, path: str, what: str, *, params: Mapping[str, Any] | None = None) -> Iterable[Json]:
        """Every item of a list, page after page, for a lookup: past :data:`MAX_LISTED` it
        raises :class:`LookupIncompleteError` rather than let "not found" be a guess."""
        items = self.http.paginate(
            self._base + path,
            token=self._token(),
            throttle_key=f"installation-{self.installation_id}",
            params=params,
        )
        for count, item in enumerate(items, start=1):
            if count > MAX_LISTED:
                raise LookupIncompleteError(
                    200, f"more than {MAX_LISTED} {what} to look through", method="GET", path=path
                )
            yield item

    # --- lookups of keyed writes ---------------------------------------------------------------
    #
    # What an earlier attempt of a keyed write created: written by ``login`` (the App; None: any
    # bot) and carrying the key's hidden marker (:func:`squadron.domain.effects.marked`). Each
    # pages through all it must read and never filters on what a person may change afterwards
    # (labels, titles); None means GitHub shows no such thing, a failed read raises.

    def find_comment(self, number: int, key: str, login: str | None, since: datetime) -> Json | None:
        """The comment on ``number`` carrying ``key`` (made at or after ``since``), or None."""
        check(self.caller, Action.READ)
        comments = self._every(f"/issues/{number}/comments", "comments", params={"since": _timestamp(since)})
        return _found(marked_item(comments, key, login))

    def find_issue(self, key: str, login: str | None, since: datetime, *, pulls: bool = False) -> Json | None:
        """The issue (``pulls``: pull request, as the issues list shows it) carrying ``key``,
        opened at or after ``since``, or None. Newest first; the pages stop at the first item
        opened before ``since`` (nothing older can be it)."""
        check(self.caller, Action.READ)
        listed = self._every(
            "/issues",
            "issues",
            params={"state": "all", "since": _timestamp(since), "sort": "created", "direction": "desc"},
        )
        cutoff = _timestamp(since)

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
            (p for p in pulls if str(p.get("created_at") or "") >= _timestamp(since)), None
        )
        return self.get_pull(int(found["number"])) if found is not None else None

    def find_review(self, number: int, key: str, login: str | None) -> Json | None:
        """The review of pull request ``number`` carrying ``key``, or None."""
        check(self.caller, Action.READ)
        return _found(marked_item(self._every(f"/pulls/{number}/reviews", "reviews"), key, login))

    # --- issues --------------------------------------------------------------------------------

    def get_issue(self, number: int) -> Json:
        check(self.caller, Action.READ)
        result: Json = self._send("GET", f"/issues/{number}")
        return result

    def create_issue(
        self, title: str, body: str, *, labels: Iterable[str] = (), assignees: Iterable[str] = ()
    ) -> Json:
        check(self.caller, Action.CREATE_ISSUE)
        payload: Json = {"title": title, "body": tagged(self.caller, body)}
        if labels:
            payload["labels"] = list(labels)
        if assignees:
            payload["assignees"] = list(assignees)
        result: Json = self._send("POST", "/issues", json=payload)
        return result

    def list_issues(
        self,
        *,
        labels: Iterable[str] = (),
        state: str = "open",
        limit: int = 100,
        since: datetime | None = None,
    ) -> list[Json]:
        """The newest issues (and pull requests) with every one of ``labels``, up to ``limit``.

        ``since``: only those updated at or after it.
        """
        check(self.caller, Action.READ)
        params: dict[str, Any] = {"state": state, "per_page": min(limit, 100)}
        if labels:
            params["labels"] = ",".join(labels)
        if since is not None:
            params["since"] = _timestamp(since)
        result = self._send("GET", "/issues", params=params)
        return [item for item in result if isinstance(item, dict)][:limit] if isinstance(result, list) else []

    def update_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> Json:
        check(self.caller, Action.UPDATE_ISSUE)
        payload: Json = {}
        if title is not None:
            payload["title"] = title
        if body is not None:
            payload["body"] = tagged(self.caller, body)
        # Sets the fields: sent twice, the issue reads the same.
        result: Json = self._send("PATCH", f"/issues/{number}", json=payload, idempotent=True)
        return result

    def close_issue(self, number: int, reason: Literal["completed", "not_planned"] = "completed") -> Json:
        check(self.caller, Action.CLOSE_ISSUE)
        # Closing a closed issue changes nothing (no second "closed" event).
        result: Json = self._send(
            "PATCH", f"/issues/{number}", json={"state": "closed", "state_reason": reason}, idempotent=True
        )
        return result

    def reopen_issue(self, number: int) -> Json:
        check(self.caller, Action.REOPEN_ISSUE)
        result: Json = self._send("PATCH", f"/issues/{number}", json={"state": "open"}, idempotent=True)
        return result

    def add_labels(self, number: int, labels: Iterable[str]) -> list[Json]:
        check(self.caller, Action.LABEL)
        # Adds to the set: a label the issue has already is kept as it is (no second event).
        result: list[Json] = self._send(
            "POST", f"/issues/{number}/labels", json={"labels": list(labels)}, idempotent=True
        )
        return result

    def remove_label(self, number: int, label: str) -> None:
        check(self.caller, Action.LABEL)
        try:
            # Sent twice, the second finds it gone (404, below).
            self._send("DELETE", f"/issues/{number}/labels/{quote(label, safe='')}", idempotent=True)
        except NotFoundError:
            return  # not there: removed already

    def add_assignees(self, number: int, logins: Iterable[str]) -> Json:
        check(self.caller, Action.ASSIGN)
        # Adds to the set: an assignee already there stays (no second event).
        result: Json = self._send(
            "POST", f"/issues/{number}/assignees", json={"assignees": list(logins)}, idempotent=True
        )
        return result

    def remove_assignees(self, number: int, logins: Iterable[str]) -> Json:
        check(self.caller, Action.ASSIGN)
        result: Json = self._send(
            "DELETE", f"/issues/{number}/assignees", json={"assignees": list(logins)}, idempotent=True
        )
        return result

    def list_comments(self, number: int, *, since: datetime | None = None) -> list[Json]:
        """The comments on ``number`` (``since``: only those updated at or after it)."""
        check(self.caller, Action.READ)
        params = {"since": _timestamp(since)} if since is not None else None
        return self._list(f"/issues/{number}/comments", params=params)

    def comment(self, number: int, body: str) -> Json:
        check(self.caller, Action.COMMENT)
        result: Json = self._send(
            "POST", f"/issues/{number}/comments", json={"body": tagged(self.caller, body)}
        )
        return result

    # --- pull requests -------------------------------------------------------------------------

    def get_pull(self, number: int) -> Json:
        check(self.caller, Action.READ)
        result: Json = self._send("GET", f"/pulls/{number}")
        return result

    def create_pull(self, *, title: str, head: str, base: str, body: str, draft: bool = False) -> Json:
        check(self.caller, Action.OPEN_PR, branch=head)
        payload = {
            "title": title,
            "head": head,
            "base": base,
            "body": tagged(self.caller, body),
            "draft": draft,
        }
        result: Json = self._send("POST", "/pulls", json=payload)
        return result

    def list_pull_files(self, number: int) -> list[Json]:
        check(self.caller, Action.READ)
        return self._list(f"/pulls/{number}/files")

    def list_reviews(self, number: int) -> list[Json]:
        check(self.caller, Action.READ)
        return self._list(f"/pulls/{number}/reviews")

    def create_review(
        self, number: int, event: ReviewEvent, body: str, *, commit_id: str | None = None
    ) -> Json:
        check(self.caller, REVIEW_EVENT_ACTIONS[event])
        payload: Json = {"event": event, "body": tagged(self.caller, body)}
        if commit_id is not None:
            payload["commit_id"] = commit_id
        result: Json = self._send("POST", f"/pulls/{number}/reviews", json=payload)
        return result

    def merge_pull(
        self,
        number: int,
        *,
        consent: MergeConsent,
        method: Literal["merge", "squash", "rebase"] = "squash",
        sha: str | None = None,
    ) -> Json:
        check(self.caller, Action.MERGE, pr_number=number, consent=consent)
        payload: Json = {"merge_method": method}
        if sha is not None:
            payload["sha"] = sha
        result: Json = self._send("PUT", f"/pulls/{number}/merge", json=payload)
        return result

    # --- merge queues (GitHub's GraphQL: there is no REST endpoint for them) -------------------

    def _graphql(self, query: str, variables: Json, *, read: bool) -> Json:
        """``data`` of GitHub's answer; its ``errors`` (sent with HTTP 200) raise :class:`GraphQLError`.

        ``read``: a query, which the transport may send again like a GET; a mutation GitHub may
        have applied without answering raises MaybeAppliedError (the caller looks it up)."""
        response = self.http.request(
            "POST",
            self.http.graphql_path,
            token=self._token(),
            throttle_key=f"installation-{self.installation_id}",
            json={"query": query, "variables": variables},
            idempotent=read,
        )
        body = response.json() if response.content else {}
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors or not isinstance(body, dict) or not isinstance(body.get("data"), dict):
            listed = errors if isinstance(errors, list) else []
            said = "; ".join(str(e.get("message") or e) for e in listed if isinstance(e, dict))
            raise GraphQLError(
                200,
                said or "no data in GitHub's GraphQL answer",
                method="POST",
                path="graphql",
                errors=listed,
            )
        data: Json = body["data"]
        return data

    def branch_requires_merge_queue(self, branch: str) -> bool:
        """Whether the rules that apply to ``branch`` (rulesets) require a merge queue."""
        check(self.caller, Action.READ)
        rules = self._list(f"/rules/branches/{quote(branch, safe='')}")
        return any(rule.get("type") == "merge_queue" for rule in rules)

    def merge_queue_entry(self, number: int) -> tuple[str, Json | None]:
        """Pull request ``number``'s node id and its merge queue entry (None: not queued).

        The entry: ``id``, ``state``, ``position``, ``enqueuedAt``, ``enqueuer`` (``__typename``
        and ``login``: a GitHub App's bot is a ``Bot`` named by its slug) and ``headCommit.oid``."""
        check(self.caller, Action.READ)
        owner, _, name = self.repo.partition("/")
        data = self._graphql(MERGE_QUEUE_ENTRY, {"owner": owner, "name": name, "number": number}, read=True)
        pull = (data.get("repository") or {}).get("pullRequest")
        if not isinstance(pull, dict):
            raise NotFoundError(
                404, f"no pull request #{number} in {self.repo}", method="POST", path="graphql"
            )
        entry = pull.get("mergeQueueEntry")
        return str(pull.get("id") or ""), entry if isinstance(entry, dict) else None

    def enqueue_pull(self, number: int, *, node_id: str, consent: MergeConsent, expected_head: str) -> Json:
        """Put pull request ``number`` (GraphQL ``node_id``) in its base's merge queue, pinned to
        ``expected_head`` (GitHub refuses it if the head moved): the merge queue entry.

        A mutation: GitHub applying it and not answering raises MaybeAppliedError, and sent again
        it is refused (already queued); the caller looks the entry up (:meth:`merge_queue_entry`)."""
        check(self.caller, Action.ENQUEUE_MERGE, pr_number=number, consent=consent)
        data = self._graphql(
            ENQUEUE_PULL_REQUEST,
            {"input": {"pullRequestId": node_id, "expectedHeadOid": expected_head}},
            read=False,
        )
        entry = (data.get("enqueuePullRequest") or {}).get("mergeQueueEntry")
        return entry if isinstance(entry, dict) else {}

    def dequeue_pull(self, number: int, *, node_id: str) -> None:
        """Take pull request ``number`` (GraphQL ``node_id``) out of the merge queue; not queued
        (any more) is fine: sent twice, the second is refused as such."""
        check(self.caller, Action.DEQUEUE_MERGE)
        try:
            self._graphql(DEQUEUE_PULL_REQUEST, {"input": {"id": node_id}}, read=False)
        except (GraphQLError, MaybeAppliedError):
            # Refused, or applied without an answer: out of the queue now is what was asked.
            _, entry = self.merge_queue_entry(number)
            if entry is not None:
                raise

    def update_pull_branch(self, number: int, *, head: str, expected_head_sha: str | None = None) -> Json:
        """Merge the base into pull request ``number``, whose head branch is ``head``.

        ``head`` is the caller's claim: a dev's is checked first, then against the
        pull request itself, so naming its own branch cannot update another's PR.
        """
        check(self.caller, Action.UPDATE_PR_BRANCH, branch=head)
        if self.caller.kind is CallerKind.DEV:
            pull = self._send("GET", f"/pulls/{number}")
            ref = str(pull["head"]["ref"])
            head_repo = (pull["head"].get("repo") or {}).get("full_name")
            check(
                self.caller,
                Action.UPDATE_PR_BRANCH,
                branch=ref if head_repo == self.repo else f"{head_repo}:{ref}",
            )
        payload: Json = {} if expected_head_sha is None else {"expected_head_sha": expected_head_sha}
        result: Json = self._send("PUT", f"/pulls/{number}/update-branch", json=payload)
        return result

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
