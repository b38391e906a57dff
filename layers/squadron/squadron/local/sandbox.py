"""The GitHub sandbox: the REST subset Squadron uses, on 127.0.0.1, with signed webhooks.

Every request is first checked against GitHub's published OpenAPI description
(an unknown operation, parameter or body key is refused with 422 and the
reason, where GitHub would often silently ignore it), then applied to an
in-memory GitHub — issues, comments, labels, assignees, pull requests,
reviews, statuses, check runs, contents, branches, webhook deliveries — whose
repositories are real bare git repositories (:mod:`squadron.local.git_store`).
Each change sends the webhook GitHub would send, shaped like GitHub's
published examples and signed with the webhook secret, and is recorded as a
delivery the App can list and redeliver.

Humans act through the same REST API with a token naming them
(``Authorization: token human:<login>``); the App's installation tokens come
from ``POST /app/installations/{id}/access_tokens`` and act as ``<slug>[bot]``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import logging
import queue
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from squadron.local.git_store import GitStore, GitStoreError
from squadron.local.openapi import Call, InvalidRequestError, validate_call

logger = logging.getLogger(__name__)

Json = dict[str, Any]
_CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[Json] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


def weak_etag(content: bytes) -> str:
    """A weak ETag of a body, as GitHub sends on GETs (``W/"<hash>"``)."""
    return f'W/"{hashlib.sha256(content).hexdigest()}"'


def _tags(if_none_match: str) -> list[str]:
    """The ETags an ``If-None-Match`` header names."""
    return [tag.strip() for tag in if_none_match.split(",") if tag.strip()]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    store: GitStore
    #: Issues and pull requests share numbers, as on GitHub.
    issues: dict[int, Json] = field(default_factory=dict)
    pulls: dict[int, Json] = field(default_factory=dict)
    comments: dict[int, list[Json]] = field(default_factory=dict)
    reviews: dict[int, list[Json]] = field(default_factory=dict)
    statuses: dict[str, list[Json]] = field(default_factory=dict)
    check_runs: dict[str, list[Json]] = field(default_factory=dict)
    protections: dict[str, Json] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Delivery:
    id: int
    guid: str
    event: str
    action: str | None
    payload: Json
    delivered_at: str
    status_code: int = 0
    redelivery: bool = False
    duration: float = 0.0
    #: Never sent and not listed: a delivery GitHub lost (a fault a test injects).
    lost: bool = False
    #: How many times it was posted to the webhook URL.
    attempts: int = 0


#: What a test makes of one delivery: ``lose`` it (never sent, not listed), ``fail`` it (not
#: sent, listed as failed with 502 so the App may redeliver it), or send it twice.
Fault = Literal["lose", "fail", "duplicate"]


class GitHubSandbox:
    """One App, one installation, its repositories; a REST server and a webhook sender."""

    def __init__(
        self,
        root: Path,
        *,
        app_id: int = 424242,
        app_slug: str = "squadron",
        installation_id: int = 77,
        webhook_url: str | None = None,
        webhook_secret: str,
        examples: Mapping[tuple[str, str | None], Json] | None = None,
    ) -> None:
        self.root = root
        self.app_id = app_id
        self.app_slug = app_slug
        self.installation_id = installation_id
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        #: GitHub's published example payload per (event, action): the shape webhooks take.
        self.examples = dict(examples or {})
        self.repos: dict[str, Repo] = {}
        self.deliveries: list[Delivery] = []
        self.tokens: dict[str, str] = {}
        self._ids = itertools.count(1000)
        self._lock = threading.RLock()
        self._outbox: queue.Queue[Delivery | None] = queue.Queue()
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self.base_url = ""
        #: A fault to apply to each delivery (None: every webhook is sent once).
        self.fault: Callable[[Delivery], Fault | None] | None = None

    # --- identities ------------------------------------------------------------------------

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    def is_app(self, login: str) -> bool:
        """Whether ``login`` is this App (another App's ``<slug>[bot]`` is a bot, not the App)."""
        return login == self.bot_login

    def user(self, login: str) -> Json:
        bot = login.endswith("[bot]")
        return {
            "login": login,
            # The App's bot user has its own id on GitHub; any other account (another App's bot
            # included) has one of its own too, never this App's.
            "id": self.app_id if self.is_app(login) else 10_000 + sum(login.encode()),
            "node_id": f"U_{login}",
            "type": "Bot" if bot else "User",
            "site_admin": False,
            "html_url": f"https://github.com/{login}",
        }

    def _app(self) -> Json:
        return {"id": self.app_id, "slug": self.app_slug, "name": self.app_slug, "owner": self.user("octo")}

    # --- repositories ------------------------------------------------------------------------

    def add_repository(
        self, full_name: str, files: Mapping[str, str], *, permissions: Mapping[str, str] | None = None
    ) -> Repo:
        owner, name = full_name.split("/")
        store = GitStore.create(self.root / "git" / owner / f"{name}.git", dict(files))
        repo = Repo(len(self.repos) + 1, owner, name, "main", store, permissions=dict(permissions or {}))
        with self._lock:
            self.repos[full_name] = repo
        if self.base_url:
            store.install_push_hook(f"{self.base_url}/_sandbox/pushed", full_name)
        return repo

    # --- state (a restart resumes where the sandbox stopped) ----------------------------------

    _SAVED = (
        "issues",
        "pulls",
        "comments",
        "reviews",
        "statuses",
        "check_runs",
        "protections",
        "permissions",
    )

    def save(self, path: Path) -> None:
        """Everything but the git repositories (already on disk) as one JSON file."""
        with self._lock:
            next_id = next(self._ids)
            self._ids = itertools.count(next_id)
            state = {
                "next_id": next_id,
                "tokens": self.tokens,
                "repos": [
                    {
                        "id": r.id,
                        "owner": r.owner,
                        "name": r.name,
                        "default_branch": r.default_branch,
                        **{name: getattr(r, name) for name in self._SAVED},
                    }
                    for r in self.repos.values()
                ],
                "deliveries": [vars(d) for d in self.deliveries],
            }
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state), encoding="utf-8")
        temporary.replace(path)

    def load(self, path: Path) -> None:
        """The state :meth:`save` wrote: its repositories (their git stores reopened) and deliveries."""
        state = json.loads(path.read_text(encoding="utf-8"))
        with self._lock:
            for saved in state["repos"]:
                owner, name = saved["owner"], saved["name"]
                store = GitStore(self.root / "git" / owner / f"{name}.git")
                if not store.path.is_dir():
                    raise FileNotFoundError(f"{store.path}: the saved repository's git store is missing")
                repo = Repo(saved["id"], owner, name, saved["default_branch"], store)
                for field_name in self._SAVED:
                    value = saved[field_name]
                    if field_name in ("issues", "pulls", "comments", "reviews"):
                        value = {int(k): v for k, v in value.items()}  # JSON keys are strings
                    setattr(repo, field_name, value)
                self.repos[repo.full_name] = repo
            self.deliveries = [Delivery(**d) for d in state["deliveries"]]
            self.tokens = dict(state["tokens"])
            self._ids = itertools.count(int(state["next_id"]))

    def git_url(self, full_name: str) -> str:
        return str(self.repos[full_name].store.path)

    def repository(self, repo: Repo) -> Json:
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "private": False,
            "owner": self.user(repo.owner),
            "html_url": f"https://github.com/{repo.full_name}",
            "default_branch": repo.default_branch,
        }

    # --- server --------------------------------------------------------------------------------

    def start(self, port: int = 0) -> str:
        sandbox = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                status, answer = sandbox.handle(self.command, self.path, body, dict(self.headers))
                data = b"" if answer is None else json.dumps(answer).encode()
                # GitHub's conditional GET: a weak ETag on a 200; If-None-Match naming it gets a
                # 304 Not Modified without a body (and without costing the rate limit).
                etag = weak_etag(data) if self.command == "GET" and status == 200 else None
                if etag is not None and etag in _tags(self.headers.get("if-none-match", "")):
                    status, data = 304, b""
                self.send_response(status)
                if etag is not None:
                    self.send_header("etag", etag)
                if status != 304:
                    self.send_header("content-type", "application/json; charset=utf-8")
                    self.send_header("content-length", str(len(data)))
                self.send_header("x-ratelimit-remaining", "4999")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        for target in (self._server.serve_forever, self._send_webhooks):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        for name, repo in self.repos.items():
            repo.store.install_push_hook(f"{self.base_url}/_sandbox/pushed", name)
        return self.base_url

    def stop(self) -> None:
        self._outbox.put(None)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def handle(
        self, method: str, raw: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, Json | list[Json] | None]:
        """One request: the status and the JSON answer (GitHub's error shape on failure)."""
        parts = urlsplit(raw)
        if parts.path == "/_sandbox/pushed":
            self._pushed(json.loads(body or b"{}"))
            return 204, None
        call = Call(method, parts.path, dict(parse_qsl(parts.query)), body)
        try:
            operation, params = validate_call(call)
            caller = self._caller(headers, operation.operation_id)
            payload = json.loads(body) if body else {}
            with self._lock:
                status, answer = self._dispatch(
                    operation.operation_id, params, dict(call.query), payload, caller
                )
        except InvalidRequestError as exc:
            return 422, {
                "message": f"Invalid request: {exc}",
                "documentation_url": "https://docs.github.com/rest",
            }
        except ApiError as exc:
            answer_err: Json = {"message": exc.message, "documentation_url": "https://docs.github.com/rest"}
            if exc.errors:
                answer_err["errors"] = exc.errors
            return exc.status, answer_err
        return status, answer

    def _caller(self, headers: Mapping[str, str], operation: str) -> str:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        scheme, _, credential = auth.partition(" ")
        if operation.startswith("apps/") and scheme.lower() == "bearer" and credential.count(".") == 2:
            return f"app:{self.app_slug}"  # an App JWT
        if credential.startswith("human:"):
            return credential.removeprefix("human:")
        login = self.tokens.get(credential)
        if login is None:
            raise ApiError(401, "Bad credentials")
        return login

    # --- webhooks ------------------------------------------------------------------------------

    def _shape(self, event: str, action: str | None, parts: Json) -> Json:
        """GitHub's example payload for the event with our objects laid over its own."""
        example = json.loads(json.dumps(self.examples.get((event, action)) or {}))
        payload: Json = {**({"action": action} if action else {})}
        for key, value in example.items():
            payload[key] = value
        for key, value in parts.items():
            base = example.get(key)
            payload[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        if action:
            payload["action"] = action
        return payload

    def emit(self, repo: Repo, event: str, action: str | None, parts: Json, sender: str) -> None:
        payload = self._shape(
            event,
            action,
            {
                **parts,
                "repository": self.repository(repo),
                "sender": self.user(sender if "[bot]" in sender or ":" not in sender else self.bot_login),
                "installation": {"id": self.installation_id, "node_id": f"I_{self.installation_id}"},
            },
        )
        delivery = Delivery(next(self._ids), str(uuid.uuid4()), event, action, payload, _now())
        self.deliveries.append(delivery)
        self._outbox.put(delivery)

    def _send_webhooks(self) -> None:
        while True:
            delivery = self._outbox.get()
            try:
                if delivery is None:
                    return
                self._deliver(delivery)
            finally:
                self._outbox.task_done()

    def _deliver(self, delivery: Delivery) -> None:
        if not self.webhook_url:
            return
        fault = self.fault(delivery) if self.fault is not None else None
        if fault == "lose":
            delivery.lost = True
            return
        if fault == "fail":
            delivery.status_code = 502
            return
        self._send(self.webhook_url, delivery)
        if fault == "duplicate":
            self._send(self.webhook_url, delivery)

    def _send(self, url: str, delivery: Delivery) -> None:
        delivery.attempts += 1
        body = json.dumps(delivery.payload).encode()
        signature = "sha256=" + hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(  # noqa: S310 (the configured loopback webhook URL)
            url,
            data=body,
            headers={
                "content-type": "application/json",
                "user-agent": "GitHub-Hookshot/sandbox",
                "x-github-event": delivery.event,
                "x-github-delivery": delivery.guid,
                "x-github-hook-id": "1",
                "x-github-hook-installation-target-id": str(self.app_id),
                "x-github-hook-installation-target-type": "integration",
                "x-hub-signature-256": signature,
            },
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                delivery.status_code = response.status
        except urllib.error.HTTPError as exc:
            delivery.status_code = exc.code
        except OSError as exc:
            delivery.status_code = 0
            logger.warning("webhook %s %s not delivered: %s", delivery.event, delivery.guid, exc)
        delivery.duration = time.monotonic() - started

    def wait_for_deliveries(self, timeout: float = 10.0) -> None:
        """Until every webhook so far was sent (tests and the demo's pacing)."""
        deadline = time.monotonic() + timeout
        while self._outbox.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    # --- pushes (the post-receive hook) ------------------------------------------------------

    def _pushed(self, notice: Json) -> None:
        with self._lock:
            repo = self.repos.get(str(notice.get("repository")))
            if repo is None:
                return
            for old, new, ref in notice.get("updates", []):
                branch = ref.removeprefix("refs/heads/")
                for pr in repo.pulls.values():
                    if pr["state"] == "open" and pr["head"]["ref"] == branch and new != "0" * 40:
                        self._refresh_pull(repo, pr)
                        pr["updated_at"] = _now()
                        self.emit(
                            repo,
                            "pull_request",
                            "synchronize",
                            {"pull_request": pr, "before": old, "after": new},
                            self.bot_login,
                        )

    # --- operations ----------------------------------------------------------------------------

    def _repo(self, params: Mapping[str, str]) -> Repo:
        repo = self.repos.get(f"{params.get('owner')}/{params.get('repo')}")
        if repo is None:
            raise ApiError(404, "Not Found")
        return repo

    def _dispatch(
        self, operation: str, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        handler: Callable[..., tuple[int, Any]] | None = getattr(
            self, "_op_" + operation.replace("/", "__").replace("-", "_"), None
        )
        if handler is None:
            raise ApiError(501, f"the sandbox does not implement {operation}")
        return handler(params, query, body, caller)

    # app

    def _op_apps__create_installation_access_token(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        if int(params["installation_id"]) != self.installation_id:
            raise ApiError(404, "Not Found")
        token = f"ghs_sandbox{next(self._ids)}"
        self.tokens[token] = self.bot_login
        return 201, {
            "token": token,
            "expires_at": datetime.fromtimestamp(time.time() + 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": body.get("permissions")
            or {"issues": "write", "pull_requests": "write", "contents": "write"},
            "repository_selection": "selected" if body.get("repositories") else "all",
        }

    def _op_apps__get_authenticated(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        if not caller.startswith("app:"):
            raise ApiError(401, "A JSON web token could not be decoded")
        return 200, self._app()

    def _op_apps__list_webhook_deliveries(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        return 200, [
            {
                "id": d.id,
                "guid": d.guid,
                "delivered_at": d.delivered_at,
                "redelivery": d.redelivery,
                "duration": d.duration,
                "status": "OK" if 200 <= d.status_code < 300 else str(d.status_code),
                "status_code": d.status_code,
                "event": d.event,
                "action": d.action,
                "installation_id": self.installation_id,
                "repository_id": (d.payload.get("repository") or {}).get("id"),
            }
            for d in reversed(self.deliveries)
            if not d.lost
        ]

    def _op_apps__redeliver_webhook_delivery(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        original = next(
            (d for d in self.deliveries if d.id == int(params["delivery_id"]) and not d.lost), None
        )
        if original is None:
            raise ApiError(404, "Not Found")
        again = Delivery(
            next(self._ids),
            original.guid,
            original.event,
            original.action,
            original.payload,
            _now(),
            redelivery=True,
        )
        self.deliveries.append(again)
        self._outbox.put(again)
        return 202, {}

    def _op_apps__list_repos_accessible_to_installation(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repos = [self.repository(r) for r in self.repos.values()]
        return 200, {"total_count": len(repos), "repositories": repos}

    # repository, branches, contents

    def _op_repos__get(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        return 200, self.repository(self._repo(params))

    def _op_repos__list_branches(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        return 200, [
            {"name": n, "commit": {"sha": s}, "protected": n in repo.protections}
            for n, s in sorted(repo.store.branches().items())
        ]

    def _op_repos__get_branch(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        sha = repo.store.sha(f"refs/heads/{params['branch']}")
        if sha is None:
            raise ApiError(404, "Branch not found")
        return 200, {
            "name": params["branch"],
            "commit": {"sha": sha},
            "protected": params["branch"] in repo.protections,
        }

    def _op_repos__update_branch_protection(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        if repo.permissions.get(caller) != "admin":
            raise ApiError(
                403,
                "Resource not accessible by integration"
                if caller.endswith("[bot]")
                else "Must have admin rights to Repository.",
            )
        repo.protections[params["branch"]] = body
        return 200, body

    def _op_repos__get_content(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        ref = query.get("ref") or repo.default_branch
        path = unquote(params["path"]).strip("/")
        text = repo.store.read(ref, path)
        if text is not None:
            data = text.encode()
            sha = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
            return 200, {
                "type": "file",
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "sha": sha,
                "size": len(data),
                "encoding": "base64",
                "content": base64.b64encode(data).decode(),
            }
        listing = repo.store.list_dir(ref, path)
        if listing is None:
            raise ApiError(404, "Not Found")
        return 200, [
            # GitHub lists a submodule as a "file" (for compatibility), and a link as a "symlink".
            {
                "type": "file" if kind == "submodule" else kind,
                "name": name,
                "path": f"{path}/{name}".strip("/"),
                "size": size,
            }
            for name, kind, size in listing
        ]

    def _op_repos__get_collaborator_permission_level(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        permission = repo.permissions.get(params["username"], "read")
        return 200, {
            "permission": "write" if permission == "maintain" else permission,
            "role_name": permission,
            "user": self.user(params["username"]),
        }

    def _op_git__delete_ref(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        ref = unquote(params["ref"]).removeprefix("heads/")
        if not repo.store.delete_branch(ref):
            raise ApiError(422, "Reference does not exist")
        return 204, None

    # issues

    def _issue(self, repo: Repo, number: int) -> Json:
        issue = repo.issues.get(number)
        if issue is None:
            raise ApiError(404, "Not Found")
        return issue

    def _label(self, name: str) -> Json:
        return {"id": sum(name.encode()), "name": name, "color": "ededed", "default": False}

    def _new_issue(self, repo: Repo, title: str, body: str, author: str, *, pull: bool = False) -> Json:
        number = len(repo.issues) + 1
        now = _now()
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
        """Newest first, by state (open by default) and labels (each one required); one page."""
        repo = self._repo(params)
        state = query.get("state") or "open"
        wanted = {name for name in str(query.get("labels") or "").split(",") if name}
        per_page = min(int(query.get("per_page") or 30), 100)
        found = [
            issue
            for _, issue in sorted(repo.issues.items(), reverse=True)
            if state in ("all", issue["state"]) and wanted <= {label["name"] for label in issue["labels"]}
        ]
        return 200, found[:per_page]

    def _op_issues__get(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        return 200, self._issue(self._repo(params), int(params["issue_number"]))

    def _op_issues__update(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        edited: Json = {k: body[k] for k in ("title", "body") if k in body and body[k] != issue[k]}
        issue.update(edited)
        issue["updated_at"] = _now()
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
                "closed_at": _now(),
                "updated_at": _now(),
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
                issue["updated_at"] = _now()
                kind = "pull_request" if "pull_request" in issue else "issues"
                subject = (
                    {"pull_request": repo.pulls[issue["number"]]}
                    if kind == "pull_request"
                    else {"issue": issue}
                )
                self.emit(repo, kind, "labeled", {**subject, "label": label}, caller)
        return 200, issue["labels"]

    def _op_issues__remove_label(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        issue = self._issue(repo, int(params["issue_number"]))
        name = unquote(params["name"])
        if name not in {label["name"] for label in issue["labels"]}:
            raise ApiError(404, "Label does not exist")
        issue["labels"] = [label for label in issue["labels"] if label["name"] != name]
        self.emit(repo, "issues", "unlabeled", {"issue": issue, "label": self._label(name)}, caller)
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
                issue["updated_at"] = _now()
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
                issue["updated_at"] = _now()
                self.emit(
                    repo, "issues", "unassigned", {"issue": issue, "assignee": self.user(login)}, caller
                )
        return 200, issue

    def _op_issues__list_comments(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        self._issue(repo, int(params["issue_number"]))
        return 200, repo.comments.get(int(params["issue_number"]), [])

    def _op_issues__create_comment(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        number = int(params["issue_number"])
        issue = self._issue(repo, number)
        now = _now()
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

    # pull requests

    def _refresh_pull(self, repo: Repo, pr: Json) -> None:
        head = repo.store.sha(f"refs/heads/{pr['head']['ref']}") or pr["head"]["sha"]
        base = repo.store.sha(f"refs/heads/{pr['base']['ref']}") or pr["base"]["sha"]
        pr["head"]["sha"], pr["base"]["sha"] = head, base
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
            "submitted_at": _now(),
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
        now = _now()
        pr.update(
            {
                "state": "closed",
                "merged": True,
                "merged_at": now,
                "closed_at": now,
                "updated_at": now,
                "merge_commit_sha": sha,
                "merged_by": self.user(caller),
            }
        )
        issue = repo.issues[number]
        issue.update({"state": "closed", "closed_at": now, "updated_at": now})
        issue["pull_request"]["merged_at"] = now
        self.emit(repo, "pull_request", "closed", {"pull_request": pr, "number": number}, caller)
        if pr["base"]["ref"] == repo.default_branch:  # closing keywords close issues on the default branch
            for ref in dict.fromkeys(int(n) for n in _CLOSING.findall(pr.get("body") or "")):
                target = repo.issues.get(ref)
                if target is not None and target["state"] == "open" and "pull_request" not in target:
                    self._close_issue(repo, target, "completed", caller)
        return 200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}

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
            }
        )
        return 202, {"message": "Updating pull request branch.", "url": pr["html_url"]}

    # statuses and checks

    def _op_repos__create_commit_status(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        now = _now()
        status: Json = {
            "id": next(self._ids),
            "state": body["state"],
            "context": body.get("context") or "default",
            "description": body.get("description"),
            "target_url": body.get("target_url"),
            "creator": self.user(caller),
            "created_at": now,
            "updated_at": now,
        }
        repo.statuses.setdefault(params["sha"], []).insert(0, status)
        branches = [
            {"name": n, "commit": {"sha": s}} for n, s in repo.store.branches().items() if s == params["sha"]
        ]
        self.emit(
            repo,
            "status",
            None,
            {**status, "sha": params["sha"], "branches": branches, "commit": {"sha": params["sha"]}},
            caller,
        )
        return 201, status

    def _op_repos__get_combined_status_for_ref(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        sha = repo.store.sha(params["ref"]) or params["ref"]
        latest: dict[str, Json] = {}
        for status in repo.statuses.get(sha, []):
            latest.setdefault(status["context"], status)
        states = {s["state"] for s in latest.values()}
        combined = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if "pending" in states or not states
            else "success"
        )
        return 200, {
            "state": combined,
            "sha": sha,
            "total_count": len(latest),
            "statuses": list(latest.values()),
        }

    def _op_checks__create(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        run: Json = {
            "id": next(self._ids),
            "name": body["name"],
            "head_sha": body["head_sha"],
            "status": body.get("status", "queued"),
            "conclusion": body.get("conclusion"),
            "started_at": _now(),
            "completed_at": _now() if body.get("conclusion") else None,
            "app": self._app(),
            "check_suite": {"id": next(self._ids)},
            "pull_requests": [
                {"number": n} for n, p in repo.pulls.items() if p["head"]["sha"] == body["head_sha"]
            ],
        }
        repo.check_runs.setdefault(body["head_sha"], []).append(run)
        if run["conclusion"]:
            run["status"] = "completed"
            self.emit(repo, "check_run", "completed", {"check_run": run}, caller)
        return 201, run

    def _op_checks__update(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        run = next(
            (r for runs in repo.check_runs.values() for r in runs if r["id"] == int(params["check_run_id"])),
            None,
        )
        if run is None:
            raise ApiError(404, "Not Found")
        run.update({k: body[k] for k in ("status", "conclusion") if k in body})
        if run.get("conclusion"):
            run.update({"status": "completed", "completed_at": _now()})
            self.emit(repo, "check_run", "completed", {"check_run": run}, caller)
        return 200, run

    def _op_checks__list_for_ref(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        sha = repo.store.sha(params["ref"]) or params["ref"]
        runs = repo.check_runs.get(sha, [])
        return 200, {"total_count": len(runs), "check_runs": runs}

    # --- inspection (tests and the demo) -------------------------------------------------------

    def events(self) -> Iterator[tuple[str, str | None]]:
        for delivery in self.deliveries:
            yield delivery.event, delivery.action
