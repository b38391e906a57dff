"""The loopback server of ``squadron app create``: the page that posts the manifest, and the
callback GitHub sends the browser back to.

It listens on 127.0.0.1 only and answers only requests addressed to it by that name (or
``localhost``), so a web page cannot reach it through a rebound DNS name to read the state.
What each callback means is :func:`squadron.domain.app_manifest.read_callback`'s decision; the
first code with the right state is kept, every later callback is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

from squadron.domain.app_manifest import (
    CALLBACK_PATH,
    CallbackRefused,
    CodeReceived,
    callback_page,
    read_callback,
)
from squadron.errors import SquadronError

HOST = "127.0.0.1"


class CallbackTimeoutError(SquadronError):
    """GitHub did not send the browser back within the wait."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"GitHub did not send the browser back within {seconds / 60:g} min")


class ManifestCallbackServer:
    """Serves ``page`` at ``/`` and takes GitHub's redirect at ``/callback`` (bound at construction,
    so :attr:`callback_url` is known before the page is built; :meth:`start` serves)."""

    def __init__(self, *, state: str, port: int = 0, on_refused: Callable[[str], None] | None = None) -> None:
        self.state = state
        self.page = ""
        self.on_refused = on_refused
        self._code: str | None = None
        self._received = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((HOST, port), _handler(self))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def callback_url(self) -> str:
        return self.base_url + CALLBACK_PATH

    def answer(self, target: str, host: str | None) -> tuple[int, str, str]:
        """The status, content type and body for a GET of ``target`` sent to ``host``."""
        if host not in (f"{HOST}:{self.port}", f"localhost:{self.port}"):
            return 421, "text/plain; charset=utf-8", "this server answers only on 127.0.0.1\n"
        parts = urlsplit(target)
        if parts.path == "/":
            return 200, "text/html; charset=utf-8", self.page
        if parts.path != CALLBACK_PATH:
            return 404, "text/plain; charset=utf-8", "not found\n"
        with self._lock:
            outcome = read_callback(parts.query, expected_state=self.state, code_taken=self._code is not None)
            if isinstance(outcome, CodeReceived):
                self._code = outcome.code
                self._received.set()
        if isinstance(outcome, CallbackRefused) and self.on_refused is not None:
            self.on_refused(outcome.reason)
        status, page = callback_page(outcome)
        return status, "text/html; charset=utf-8", page

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), daemon=True)
        self._thread.start()

    def wait_for_code(self, timeout: float) -> str:
        """The code of the first callback with this run's state; CallbackTimeoutError after ``timeout`` s."""
        if not self._received.wait(timeout):
            raise CallbackTimeoutError(timeout)
        assert self._code is not None
        return self._code

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> ManifestCallbackServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def _handler(server: ManifestCallbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return  # the request line carries the code

        def do_GET(self) -> None:
            status, content_type, body = server.answer(self.path, self.headers.get("host"))
            data = body.encode()
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.send_header("cache-control", "no-store")
            self.send_header("referrer-policy", "no-referrer")
            self.end_headers()
            self.wfile.write(data)

    return Handler
