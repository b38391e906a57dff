"""The REST server on 127.0.0.1: each request checked, its caller found, then dispatched.

Every request is first checked against GitHub's published OpenAPI description
(an unknown operation, parameter or body key is refused with 422 and the
reason, where GitHub would often silently ignore it), then applied by the operation named
after its operation id (``_op_<group>__<name>``). Humans act with a token naming them
(``Authorization: token human:<login>``); the App's installation tokens act as
``<slug>[bot]``. A GET answer carries a weak ETag, and a conditional GET naming it gets 304.
The lists GitHub pages (:data:`PAGED`) come ``per_page`` at a time (30 unless asked, at most
100) with ``Link: rel="next"``. A test's :attr:`~.base._SandboxBase.api_fault` makes a request
applied and then answered 502, dropped, or left hanging (or refused before anything happens).
A GET under ``/ui/`` (no REST path) is a page a person browses (:mod:`.pages`), and a GET of
GitHub's web address of a repository, issue or pull request (``/<owner>/<repo>/issues/<n>``)
leads there; ``POST /graphql``
is GitHub's GraphQL for merge queues (:mod:`.queues`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jwt

from squadron.local.openapi import Call, InvalidRequestError, validate_call
from squadron.local.sandbox import grants
from squadron.local.sandbox.apps import AppOps
from squadron.local.sandbox.base import ApiError, Json, PagedObject
from squadron.local.sandbox.checks import CheckOps
from squadron.local.sandbox.pages import POLICY, PREFIX, PageOps
from squadron.local.sandbox.queues import MergeQueueOps
from squadron.local.sandbox.repositories import RepositoryOps
from squadron.local.sandbox.state import SandboxState


def weak_etag(content: bytes) -> str:
    """A weak ETag of a body, as GitHub sends on GETs (``W/"<hash>"``)."""
    return f'W/"{hashlib.sha256(content).hexdigest()}"'


#: The operations whose lists GitHub pages.
PAGED = frozenset({"issues/list-for-repo", "issues/list-comments", "pulls/list", "pulls/list-reviews"})


def _credential(headers: Mapping[str, str]) -> str:
    """The token an ``Authorization`` header presents (``token X`` or ``Bearer X``)."""
    auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
    return auth.partition(" ")[2].strip()


class Page(list[Any]):
    """One page of a list, with the URL of the next (``Link: rel="next"``) if there is one."""

    next_url: str = ""


def _tags(if_none_match: str) -> list[str]:
    """The ETags an ``If-None-Match`` header names."""
    return [tag.strip() for tag in if_none_match.split(",") if tag.strip()]


class GitHubSandbox(SandboxState, AppOps, RepositoryOps, MergeQueueOps, CheckOps, PageOps):
    """One App, one installation, its repositories; a REST server and a webhook sender."""

    def start(self, port: int = 0) -> str:
        """Serve on ``port`` (0: any free one); the base URL. ``OSError`` when it is taken."""
        sandbox = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def _page(self) -> None:
                """A page a person browses (:mod:`.pages`), never a REST answer."""
                answer = sandbox.page(urlsplit(self.path).path)
                self.send_response(answer.status)
                if answer.location:
                    self.send_header("location", answer.location)
                self.send_header("content-type", answer.content_type)
                self.send_header("content-length", str(len(answer.body)))
                self.send_header("content-security-policy", POLICY)
                self.send_header("x-content-type-options", "nosniff")
                self.end_headers()
                self.wfile.write(answer.body)

            def _serve(self) -> None:
                path = urlsplit(self.path).path
                if self.command == "GET" and (path == PREFIX or path.startswith(f"{PREFIX}/")):
                    self._page()
                    return
                web = sandbox.web_page(path) if self.command == "GET" else None
                if web is not None:  # GitHub's web address of a repository, issue or pull request
                    self.send_response(302)
                    self.send_header("location", web)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = sandbox.api_fault(self.command, self.path) if sandbox.api_fault else None
                answer: Json | list[Json] | None
                if fault == "refuse":
                    status, answer = 503, {"message": "Service Unavailable"}
                else:
                    status, answer = sandbox.handle(self.command, self.path, body, dict(self.headers))
                if fault in ("drop", "hang"):
                    if fault == "hang":  # no answer until the client hangs up (its read timeout)
                        self.connection.settimeout(30)
                        try:
                            while self.connection.recv(1024):
                                pass
                        except OSError:
                            pass
                    self.close_connection = True
                    return
                if fault == "502":  # applied; GitHub's front end timed out waiting for it
                    status, answer = 502, {"message": "Server Error"}
                data = b"" if answer is None else json.dumps(answer).encode()
                # GitHub's conditional GET: a weak ETag on a 200; If-None-Match naming it gets a
                # 304 Not Modified without a body (and without costing the rate limit).
                etag = weak_etag(data) if self.command == "GET" and status == 200 else None
                if etag is not None and etag in _tags(self.headers.get("if-none-match", "")):
                    status, data = 304, b""
                self.send_response(status)
                if etag is not None:
                    self.send_header("etag", etag)
                if isinstance(answer, Page | PagedObject) and answer.next_url:
                    self.send_header("link", f'<{answer.next_url}>; rel="next"')
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
        if parts.path == "/graphql" and method == "POST":  # no REST operation: GitHub's GraphQL (.queues)
            try:
                caller = self._caller(headers, "graphql")
            except ApiError as exc:
                return exc.status, {
                    "message": exc.message,
                    "documentation_url": "https://docs.github.com/graphql",
                }
            return 200, self.graphql(body, caller, _credential(headers))
        call = Call(method, parts.path, dict(parse_qsl(parts.query)), body)
        try:
            operation, params = validate_call(call)
            caller = self._caller(headers, operation.operation_id)
            credential = _credential(headers)
            public = False
            if "owner" in params and "repo" in params:  # a token narrowed elsewhere, as GitHub answers it
                self.check_scope(credential, method, f"{params['owner']}/{params['repo']}")
                named = self.repos.get(f"{params['owner']}/{params['repo']}")
                public = named is not None and not named.private
            grants.check(
                self.token_permissions.get(credential), operation.operation_id, method, public=public
            )
            payload = json.loads(body) if body else {}
            with self._lock:
                self._credential = credential
                try:
                    status, answer = self._dispatch(
                        operation.operation_id, params, dict(call.query), payload, caller
                    )
                finally:
                    self._credential = None
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
        if operation.operation_id in PAGED and isinstance(answer, list):
            return status, self._page(answer, parts.path, dict(call.query))
        return status, answer

    def _page(self, items: list[Any], path: str, query: Mapping[str, str]) -> Page:
        """The page of ``items`` the query asks for, linking to the next."""
        per_page = max(1, min(int(query.get("per_page") or 30), 100))
        page = max(1, int(query.get("page") or 1))
        out = Page(items[(page - 1) * per_page : page * per_page])
        if page * per_page < len(items):
            out.next_url = f"{self.base_url}{path}?{urlencode({**query, 'page': page + 1})}"
        return out

    def _caller(self, headers: Mapping[str, str], operation: str) -> str:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        scheme, _, credential = auth.partition(" ")
        if operation.startswith("apps/") and scheme.lower() == "bearer" and credential.count(".") == 2:
            self._check_app_jwt(credential)
            return f"app:{self.app_slug}"  # an App JWT
        if credential.startswith("human:"):
            return credential.removeprefix("human:")
        login = self.tokens.get(credential)
        if login is None:
            raise ApiError(401, "Bad credentials")
        return login

    def _check_app_jwt(self, credential: str) -> None:
        """GitHub's check of an App JWT: RS256 with the App's key, ``iss`` the App's id, not expired
        and issued at most ten minutes before it expires; else 401 (when the sandbox knows the key)."""
        if self.app_public_key is None:
            return
        try:
            claims = jwt.decode(
                credential,
                self.app_public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=60,
            )
        except jwt.PyJWTError as exc:
            raise ApiError(401, "A JSON web token could not be decoded") from exc
        if str(claims["iss"]) != str(self.app_id):
            raise ApiError(401, "A JSON web token could not be decoded")
        if int(claims["exp"]) - int(claims["iat"]) > 660:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")

    def _dispatch(
        self, operation: str, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        handler: Callable[..., tuple[int, Any]] | None = getattr(
            self, "_op_" + operation.replace("/", "__").replace("-", "_"), None
        )
        if handler is None:
            raise ApiError(501, f"the sandbox does not implement {operation}")
        return handler(params, query, body, caller)

    # --- inspection (tests and the demo) -------------------------------------------------------

    def events(self) -> Iterator[tuple[str, str | None]]:
        for delivery in self.deliveries:
            yield delivery.event, delivery.action
