"""The task's model gateway: the Copilot CLI's provider, on 127.0.0.1, holding the real key.

The host (root) runs it for its own launch. The CLI's provider ``base_url`` points here and its
``api_key`` is a random per-launch token (compared in constant time), worthless outside this
task and this launch. Each call: the token checked; the path one of the provider type's model
endpoints (:func:`squadron.domain.model_calls.route`); the body bounded and naming one of the
role's models; the budget asked (``admit``) before the provider is called; then the call is
forwarded with the real key (streaming passed through line by line), its usage read as it
passes and counted (``count``). The key lives in this object's memory only: it is never put in
an environment, an argument or a log line, and any echo of it in the provider's answer is
replaced before the answer leaves. A refused call gets the provider's error shape with the
reason, which the CLI shows the model.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx

from squadron.domain import model_calls
from squadron.domain.model_calls import Refusal, Tokens

logger = logging.getLogger(__name__)

#: The largest request body forwarded (a long conversation with tool results; not a file dump).
MAX_REQUEST_BYTES = 16 * 1024 * 1024
#: Calls in flight at once (the CLI makes one at a time; its shell gets the rest).
MAX_CONCURRENT = 4
#: How long a client may take to send its request.
CLIENT_TIMEOUT_SECONDS = 60.0
#: The provider: to connect, and between two bytes of its answer (a long completion streams).
UPSTREAM_TIMEOUT = httpx.Timeout(connect=15.0, read=600.0, write=60.0, pool=15.0)
#: The request headers passed on (the rest, and every credential, stay here).
FORWARDED_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta")
#: Where the CLI may put its api_key, per provider type.
_TOKEN_HEADERS = ("authorization", "x-api-key", "api-key")
#: What the Copilot CLI sends Copilot's API besides its token (its identity, the interaction's kind and
#: ids, who initiated the call: premium requests are billed by it); passed on for a "copilot" upstream.
COPILOT_HEADERS = (
    "copilot-integration-id",
    "copilot-harness-id",
    "editor-version",
    "openai-intent",
    "user-agent",
    "x-github-api-version",
    "x-initiator",
    "x-interaction-id",
    "x-interaction-type",
    "x-agent-task-id",
    "x-client-session-id",
)
#: The path prefix the CLI's provider base URL has (anything else is refused).
PREFIX = "/model"


@dataclass(frozen=True)
class Upstream:
    """The role's provider: its type, base URL and key (never shown by ``repr``).

    For ``copilot`` (GitHub Copilot's API), the key is the Copilot token and ``github_api_url`` the
    GitHub API that answers the CLI's check of it (``copilot_internal/user``).
    """

    provider_type: str
    base_url: str
    key: str = field(repr=False)
    azure_api_version: str | None = None
    github_api_url: str | None = None

    def headers(self) -> dict[str, str]:
        if self.provider_type == "anthropic":
            return {"x-api-key": self.key}
        if self.provider_type == "azure":
            return {"api-key": self.key}
        return {"authorization": f"Bearer {self.key}"}


def _refuse_all(model: str) -> str | None:
    return "the model gateway is not attached to its agent yet"


class ModelGateway:
    def __init__(
        self,
        upstream: Upstream,
        *,
        models: frozenset[str],
        client: httpx.Client | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        self._upstream = upstream
        self.models = models
        self.max_request_bytes = max_request_bytes
        #: The launch-scoped token the CLI presents (its provider's api_key).
        self.token = f"sqmg-{secrets.token_urlsafe(32)}"
        self._client = client or httpx.Client(timeout=UPSTREAM_TIMEOUT, follow_redirects=False)
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        #: Before each call: None to let it through, else why not (the budget; set by the host).
        self.admit: Callable[[str], str | None] = _refuse_all
        #: After each call: (model, input tokens, output tokens) as the response reported them.
        self.count: Callable[[str, int, int], None] = lambda model, i, o: None
        self._server: ThreadingHTTPServer | None = None

    def __repr__(self) -> str:  # never the key or the token
        return f"ModelGateway({self._upstream.provider_type}, {self.url or 'stopped'})"

    @property
    def url(self) -> str:
        if self._server is None:
            return ""
        return f"http://127.0.0.1:{self._server.server_address[1]}{PREFIX}"

    @property
    def github_url(self) -> str:
        """The GitHub API the Copilot CLI is given: it answers the one call that checks its token (at
        the root: the CLI drops any path of the URL it is given)."""
        if self._server is None:
            return ""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def reads(self) -> bool:
        """Whether anything may be read (GET) through this gateway (Copilot's catalog, its token check)."""
        return self._upstream.provider_type == "copilot"

    def start(self) -> str:
        """Listen on a random loopback port; the base URL the CLI's provider gets."""
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            self._server.daemon_threads = True
            threading.Thread(
                target=self._server.serve_forever, args=(0.1,), name="model-gateway", daemon=True
            ).start()
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._client.close()

    def provider(self) -> dict[str, Any]:
        """The SDK provider config of the CLI: this gateway and the launch's token, never the key."""
        config: dict[str, Any] = {
            "type": self._upstream.provider_type,
            "base_url": self.start(),
            "api_key": self.token,
        }
        if self._upstream.azure_api_version:
            config["azure"] = {"api_version": self._upstream.azure_api_version}
        return config

    # --- one call ----------------------------------------------------------------------------

    def authorized(self, headers: Any) -> bool:
        """Whether the request carries this launch's token (compared in constant time)."""
        expected = self.token.encode()
        for name in _TOKEN_HEADERS:
            value = str(headers.get(name) or "")
            presented = value[7:] if name == "authorization" and value[:7].lower() == "bearer " else value
            if presented and hmac.compare_digest(presented.encode(), expected):
                return True
        return False

    def prepare(
        self, path: str, headers: Any, body: bytes
    ) -> tuple[str, str, bytes, dict[str, str]] | Refusal:
        """The upstream URL, the model, the body and the headers of a call, or why it is refused."""
        if not self.authorized(headers):
            return Refusal(401, "invalid_token", "this is not the token of this agent's launch")
        parts = urlsplit(path)
        if not parts.path.startswith(PREFIX + "/"):
            return Refusal(403, "path_refused", "the model gateway forwards the model endpoints only")
        routed = model_calls.route(self._upstream.provider_type, parts.path[len(PREFIX) :])
        if isinstance(routed, Refusal):
            return routed
        suffix, deployment = routed
        named = model_calls.requested_model(body, deployment, self.models)
        if isinstance(named, Refusal):
            return named
        model, parsed = named
        refused = self.admit(model)
        if refused is not None:
            return Refusal(403, "budget_refused", refused)
        body = model_calls.json_bytes(model_calls.with_usage_reported(parsed, self._upstream.provider_type))
        query = [(k, v) for k, v in parse_qsl(parts.query) if k in model_calls.KEPT_QUERY]
        url = f"{self._upstream.base_url.rstrip('/')}/{suffix}" + (f"?{urlencode(query)}" if query else "")
        return url, model, body, self._headers(headers)

    def prepare_read(self, path: str, headers: Any) -> tuple[str, dict[str, str]] | Refusal:
        """The upstream URL and headers of a GET (Copilot's model catalog, the CLI's check of its
        token at GitHub's API), or why it is refused. Neither names a model nor costs anything."""
        if not self.authorized(headers):
            return Refusal(401, "invalid_token", "this is not the token of this agent's launch")
        where = urlsplit(path).path
        github = self._upstream.github_api_url
        if where.startswith(PREFIX + "/"):
            read = model_calls.readable(self._upstream.provider_type, where[len(PREFIX) :])
            base = self._upstream.base_url
        elif github is not None:
            read = model_calls.readable("github", where, model_calls.GITHUB_READS)
            base = github
        else:
            return Refusal(403, "path_refused", "the model gateway forwards the model endpoints only")
        if isinstance(read, Refusal):
            return read
        return f"{base.rstrip('/')}/{read}", self._headers(headers)

    def _headers(self, headers: Any) -> dict[str, str]:
        """The caller's headers passed on (no credential among them), and the upstream's key."""
        names = FORWARDED_HEADERS + (COPILOT_HEADERS if self._upstream.provider_type == "copilot" else ())
        forwarded = {name: str(headers[name]) for name in names if headers.get(name)}
        return {**forwarded, **self._upstream.headers()}

    def redact(self, data: bytes) -> bytes:
        """``data`` without the key (a provider may echo it in an error)."""
        key = self._upstream.key.encode()
        return data.replace(key, b"[redacted]") if key and key in data else data


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` cut at line ends (a key is never split between two pieces that are checked apart)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if pending:
        yield pending


def _handler(gateway: ModelGateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = CLIENT_TIMEOUT_SECONDS

        def setup(self) -> None:
            super().setup()
            # Headers and body go out as separate writes: without this, Nagle's algorithm holds the
            # body for the client's delayed ACK (40 ms a call on a kept-alive connection).
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: object) -> None:
            return  # no request lines (nor anything from the client) in the task's log

        def do_GET(self) -> None:
            if not gateway.reads:
                self._refuse(Refusal(405, "method_refused", "the model gateway takes POST requests only"))
                return
            if not gateway._slots.acquire(blocking=False):
                self._refuse(Refusal(429, "too_many_calls", f"at most {MAX_CONCURRENT} model calls at once"))
                return
            try:
                prepared = gateway.prepare_read(self.path, self.headers)
                if isinstance(prepared, Refusal):
                    self._refuse(prepared)
                    return
                url, headers = prepared
                try:
                    response = gateway._client.get(url, headers=headers)
                except httpx.HTTPError as exc:
                    logger.warning("the model provider did not answer: %s", type(exc).__name__)
                    self._refuse(
                        Refusal(
                            502,
                            "provider_unreachable",
                            f"the model provider did not answer ({type(exc).__name__})",
                        )
                    )
                    return
                self._send(
                    response.status_code,
                    response.headers.get("content-type", "application/json"),
                    gateway.redact(response.content),
                )
            finally:
                gateway._slots.release()

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > gateway.max_request_bytes:
                self.close_connection = True
                self._refuse(
                    Refusal(
                        413,
                        "too_large",
                        f"a request to the model is at most {gateway.max_request_bytes} bytes",
                    )
                )
                return
            body = self.rfile.read(length)
            if not gateway._slots.acquire(blocking=False):
                self._refuse(Refusal(429, "too_many_calls", f"at most {MAX_CONCURRENT} model calls at once"))
                return
            try:
                prepared = gateway.prepare(self.path, self.headers, body)
                if isinstance(prepared, Refusal):
                    self._refuse(prepared)
                    return
                self._forward(*prepared)
            finally:
                gateway._slots.release()

        def _refuse(self, refusal: Refusal) -> None:
            self._send(
                refusal.status,
                "application/json",
                model_calls.error_body(gateway._upstream.provider_type, refusal),
            )

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _forward(self, url: str, model: str, body: bytes, headers: dict[str, str]) -> None:
            used = Tokens()
            answered = 0
            reported = False
            sent = True
            counted = False

            def settle() -> None:
                # Counted before the caller sees the answer end, so its next call's budget check
                # already includes this one (and a test reading the count after the answer sees it).
                nonlocal used, counted
                if counted or not sent:
                    return
                counted = True
                if not reported:  # never free: a call without usage is counted by its size
                    used = model_calls.estimate(len(body), answered)
                gateway.count(model, used.input_tokens, used.output_tokens)

            try:
                with gateway._client.stream("POST", url, content=body, headers=headers) as response:
                    content_type = response.headers.get("content-type", "application/json")
                    streamed = "text/event-stream" in content_type
                    if not streamed:
                        data = gateway.redact(response.read())
                        answered = len(data)
                        found = model_calls.tokens_of(model_calls.parsed(data))
                        if found is not None:
                            used, reported = found, True
                        settle()
                        self._send(response.status_code, content_type, data)
                        return
                    self.send_response(response.status_code)
                    self.send_header("content-type", content_type)
                    self.send_header("cache-control", "no-cache")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for line in _lines(response.iter_raw()):
                        found = model_calls.event_tokens(line)
                        if found is not None:
                            used, reported = used.merged(found), True
                        answered += len(line)
                        piece = gateway.redact(line)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    settle()
                    self.wfile.write(b"0\r\n\r\n")
            except httpx.HTTPError as exc:
                sent = not isinstance(exc, httpx.ConnectError)  # a provider never reached cost nothing
                logger.warning("the model provider did not answer: %s", type(exc).__name__)
                settle()
                if answered == 0:
                    self._refuse(
                        Refusal(
                            502,
                            "provider_unreachable",
                            f"the model provider did not answer ({type(exc).__name__})",
                        )
                    )
                else:
                    self.close_connection = True
            finally:
                settle()

    return Handler
