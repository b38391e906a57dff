"""A scripted model on 127.0.0.1 for the local stack when no model credentials are given.

An OpenAI-compatible ``POST /v1/chat/completions`` server (non-streaming) that
the real Copilot CLI talks to. Its default policy is quiet and safe: read the
events, report the assignment done, say so — enough for every agent to run
its whole lifecycle through the real CLI, SDK and framework tools. A
``policy`` function can script richer behaviour (the demo scenario does).
"""

from __future__ import annotations

import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Json = dict[str, Any]
#: (tool name, arguments) to call, or a string to say; None lets the default policy decide.
Turn = tuple[str, Json] | str
Policy = Callable[[Json], Turn | None]


def offered(request: Json) -> set[str]:
    return {str(tool.get("function", {}).get("name")) for tool in request.get("tools") or []}


def calls_since_prompt(request: Json) -> list[str]:
    """The tools the model called since the last user message, in order."""
    names: list[str] = []
    for message in request.get("messages", []):
        if message.get("role") == "user":
            names = []
        for call in message.get("tool_calls") or []:
            names.append(str(call.get("function", {}).get("name")))
    return names


def quiet(request: Json) -> Turn:
    """Read the events, report done, say so."""
    tools, done = offered(request), calls_since_prompt(request)
    if "check_for_events" in tools and "check_for_events" not in done:
        return ("check_for_events", {})
    if "report_complete" in tools and "report_complete" not in done:
        return (
            "report_complete",
            {"summary": "The local stack's quiet model read the events; nothing to do."},
        )
    return "Nothing more to do."


def completion(number: int, turn: Turn, model: str) -> Json:
    """The chat completion answering with ``turn``: a tool call (name, arguments) or a message."""
    message: Json = {"role": "assistant", "content": None}
    if isinstance(turn, tuple):
        name, arguments = turn
        message["tool_calls"] = [
            {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
        finish = "tool_calls"
    else:
        message["content"] = turn
        finish = "stop"
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def serve_chat(answer: Callable[[Json], Json], key: str | None = None) -> ThreadingHTTPServer:
    """``POST /v1/chat/completions`` (non-streaming) on 127.0.0.1, answered by ``answer``; serving.

    Given a ``key``, a request without it (``Authorization: Bearer <key>``) is answered 401, as a
    provider answers a wrong key.
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            if key is not None and not hmac.compare_digest(
                self.headers.get("authorization", "").encode(), f"Bearer {key}".encode()
            ):
                self.send_error(401, "Incorrect API key provided")
                return
            request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            if not self.path.endswith("/chat/completions") or request.get("stream"):
                self.send_error(
                    400, f"this model serves non-streaming chat completions only, not {self.path}"
                )
                return
            data = json.dumps(answer(request)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class LocalModel:
    def __init__(self, policy: Policy | None = None, key: str | None = None) -> None:
        self.policy = policy
        #: What a caller must present (the agent's model gateway adds it; None: anyone may call).
        self.key = key
        self.requests: list[Json] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.base_url = ""

    def answer(self, request: Json) -> Json:
        with self._lock:
            self.requests.append(request)
            number = next(self._ids)
        turn = (self.policy(request) if self.policy else None) or quiet(request)
        return completion(number, turn, str(request.get("model", "local")))

    def start(self) -> str:
        self._server = serve_chat(self.answer, self.key)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
