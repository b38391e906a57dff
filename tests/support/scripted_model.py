"""A scripted OpenAI-compatible model on 127.0.0.1 that the agent tests own.

The Copilot CLI sends ``POST /v1/chat/completions`` with the whole conversation;
the server answers the next scripted turn — a tool call or a final message —
and records every request, so tests can assert what the model was shown (for
example the earlier conversation after a resume). Non-streaming only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from squadron.local.model import completion, serve_chat


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Say:
    content: str


@dataclass(frozen=True)
class Stall:
    """A model that takes long: the answer waits until the test ends (or ``seconds``), then says ``content``."""

    seconds: float = 60.0
    content: str = "(too late)"


Turn = ToolCall | Say | Stall


@dataclass
class ScriptedModel:
    script: list[Turn] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Answer when the script has run out (a model that keeps calling a tool, for breakers).
    then: Turn = field(default_factory=lambda: Say("Nothing more to do."))
    port: int = 0
    #: Set when the server stops: stalled answers return at once.
    released: threading.Event = field(default_factory=threading.Event)
    #: Set when a stalled request has arrived (the test may then act while the model "thinks").
    stalled: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def provider(self) -> dict[str, str]:
        return {"type": "openai", "base_url": self.base_url, "api_key": "scripted"}

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(request)
            turn = self.script.pop(0) if self.script else self.then
            number = len(self.requests)
        if isinstance(turn, Stall):
            self.stalled.set()
            self.released.wait(turn.seconds)
            turn = Say(turn.content)
        said = (turn.name, turn.arguments) if isinstance(turn, ToolCall) else turn.content
        return completion(number, said, str(request.get("model", "scripted")))

    def contents_seen(self, index: int = -1) -> list[str]:
        """The text of every message in request ``index`` (tool results included)."""
        messages = self.requests[index]["messages"]
        return [str(m.get("content") or "") for m in messages]


@contextmanager
def serve(model: ScriptedModel, key: str | None = None) -> Iterator[ScriptedModel]:
    """Serve ``model``; given a ``key``, only to a caller presenting it (as a provider)."""
    server = serve_chat(model.answer, key)
    model.port = server.server_address[1]
    try:
        yield model
    finally:
        model.released.set()
        server.shutdown()
        server.server_close()
