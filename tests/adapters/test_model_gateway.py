"""The task's model gateway, played against by a caller holding everything the agent's user can get:
the gateway's address and the launch's token (the CLI's provider config), but never the key.

A real provider stand-in on 127.0.0.1 records what reached it; every case asserts on what the
caller got back (status, body, stream) and on what the provider saw and was asked to do.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from squadron.adapters.model_gateway import ModelGateway, Upstream
from squadron.domain import model_calls

KEY = "sk-real-provider-key-0123456789abcdef"
MODEL = "gpt-5"


@dataclass
class Provider:
    """A provider on 127.0.0.1: records each request, answers with ``status``, ``content_type``, ``chunks``."""

    status: int = 200
    content_type: str = "application/json"
    chunks: list[bytes] = field(default_factory=list)
    seen: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0

    def ok(self, usage: dict[str, int] | None = None) -> Provider:
        body: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
        if usage is not None:
            body["usage"] = usage
        self.chunks = [json.dumps(body).encode()]
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def provider() -> Iterator[Provider]:
    stand_in = Provider().ok({"prompt_tokens": 11, "completion_tokens": 7})

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            stand_in.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(stand_in.status)
            self.send_header("content-type", stand_in.content_type)
            self.end_headers()
            for chunk in stand_in.chunks:
                self.wfile.write(chunk)
                self.wfile.flush()

        do_GET = do_POST

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stand_in.port = server.server_address[1]
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Running:
    gateway: ModelGateway
    counted: list[tuple[str, int, int]]
    admitted: list[str]
    refuse: str | None = None

    def post(
        self, path: str = "/chat/completions", body: Any = None, *, token: str | None = None, **headers: str
    ) -> httpx.Response:
        data = json.dumps({"model": MODEL, "messages": []} if body is None else body).encode()
        presented = self.gateway.token if token is None else token
        auth = {"authorization": f"Bearer {presented}"} if presented else {}
        return httpx.post(
            self.gateway.url + path,
            content=data,
            headers={**auth, **headers, "content-type": "application/json"},
        )


def running(upstream: Upstream, **options: Any) -> Iterator[Running]:
    gateway = ModelGateway(upstream, models=frozenset({MODEL}), **options)
    state = Running(gateway, [], [])

    def admit(model: str) -> str | None:
        state.admitted.append(model)
        return state.refuse

    gateway.admit = admit
    gateway.count = lambda model, i, o: state.counted.append((model, i, o))
    gateway.start()
    try:
        yield state
    finally:
        gateway.stop()


@pytest.fixture
def openai(provider: Provider) -> Iterator[Running]:
    yield from running(Upstream("openai", provider.base_url, KEY))


def test_a_call_reaches_the_provider_with_the_key_and_is_counted(openai: Running, provider: Provider) -> None:
    config = openai.gateway.provider()
    assert config == {"type": "openai", "base_url": openai.gateway.url, "api_key": openai.gateway.token}
    assert KEY not in repr(config) + repr(openai.gateway)
    answer = openai.post()
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "hi"
    [(path, headers, _)] = provider.seen
    assert path == "/v1/chat/completions" and headers["authorization"] == f"Bearer {KEY}"
    assert openai.gateway.token not in json.dumps(headers)  # the launch's token stops here
    assert openai.admitted == [MODEL] and openai.counted == [(MODEL, 11, 7)]


@pytest.mark.parametrize(
    ("path", "body", "token", "status", "code"),
    [
        # Not this launch's token, or none.
        ("/chat/completions", None, "sk-guess", 401, "invalid_token"),
        ("/chat/completions", None, "", 401, "invalid_token"),
        ("/chat/completions", None, KEY, 401, "invalid_token"),
        # Another endpoint of the provider, another path, a way out of the prefix.
        ("/models", None, None, 403, "path_refused"),
        ("/embeddings", None, None, 403, "path_refused"),
        ("/chat/completions/../../files", None, None, 403, "path_refused"),
        ("/v1/messages", None, None, 403, "path_refused"),  # an Anthropic path on an OpenAI provider
        # Another model, none, or a body that is not a request.
        ("/chat/completions", {"model": "o3-pro", "messages": []}, None, 403, "model_refused"),
        ("/chat/completions", {"messages": []}, None, 403, "model_refused"),
        ("/chat/completions", [MODEL], None, 400, "invalid_request"),
    ],
)
def test_a_call_off_the_models_endpoints_or_models_never_reaches_the_provider(
    openai: Running, provider: Provider, *, path: str, body: Any, token: str | None, status: int, code: str
) -> None:
    answer = openai.post(path, body, token=token)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert "squadron model gateway" in answer.json()["error"]["message"]
    assert provider.seen == [] and openai.counted == []
    assert KEY not in answer.text


def test_the_token_is_checked_before_anything_else(openai: Running, provider: Provider) -> None:
    outside = httpx.post(openai.gateway.url.removesuffix("/model") + "/v1/chat/completions", content=b"{}")
    assert outside.status_code == 401
    assert httpx.get(openai.gateway.url + "/chat/completions").status_code == 405
    assert provider.seen == []


def test_a_call_past_the_budget_is_refused_before_the_provider_is_called(
    openai: Running, provider: Provider
) -> None:
    openai.refuse = "the issue's budget is spent ($2.0000 of $2.00); no more model calls"
    answer = openai.post()
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "budget_refused"
    assert "the issue's budget is spent" in answer.json()["error"]["message"]
    assert provider.seen == [] and openai.counted == []


def test_an_oversized_request_is_refused_unread(provider: Provider) -> None:
    for state in running(Upstream("openai", provider.base_url, KEY), max_request_bytes=1000):
        answer = state.post(body={"model": MODEL, "messages": [{"role": "user", "content": "x" * 2000}]})
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"
        assert provider.seen == []


def test_the_providers_echo_of_the_key_never_reaches_the_caller(openai: Running, provider: Provider) -> None:
    provider.status = 401
    provider.chunks = [json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()]
    answer = openai.post()
    assert answer.status_code == 401 and KEY not in answer.text and "[redacted]" in answer.text
    # No usage reported: the call is counted by its size, never as free.
    [(model, read, written)] = openai.counted
    assert model == MODEL and read > 0 and written > 0


def test_a_stream_passes_through_counted_and_without_the_key(openai: Running, provider: Provider) -> None:
    provider.content_type = "text/event-stream"
    events = [
        {"choices": [{"delta": {"content": "he"}}]},
        {"choices": [{"delta": {"content": f"llo {KEY[:10]}"}}]},
        {"choices": [{"delta": {"content": KEY}}]},
        {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30}},
    ]
    lines = b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"
    provider.chunks = [lines[i : i + 7] for i in range(0, len(lines), 7)]  # the key split across reads
    answer = openai.post(body={"model": MODEL, "messages": [], "stream": True})
    assert answer.status_code == 200 and answer.headers["content-type"] == "text/event-stream"
    assert KEY not in answer.text and answer.text.count("data: ") == 5 and "[DONE]" in answer.text
    sent = json.loads(provider.seen[0][2])
    assert sent["stream_options"] == {"include_usage": True}  # the usage it counts is asked for
    assert openai.counted == [(MODEL, 120, 30)]


def test_an_anthropic_provider_gets_its_own_header_path_and_usage(provider: Provider) -> None:
    provider.content_type = "text/event-stream"
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 40, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"text": "hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 25}},
    ]
    provider.chunks = [b"".join(b"event: x\ndata: %s\n\n" % json.dumps(e).encode() for e in events)]
    for state in running(Upstream("anthropic", provider.base_url.removesuffix("/v1"), KEY)):
        answer = state.post(
            "/v1/messages",
            {"model": MODEL, "messages": [], "stream": True},
            token="",
            **{"x-api-key": state.gateway.token, "anthropic-version": "2023-06-01"},
        )
        assert answer.status_code == 200 and "message_delta" in answer.text
        [(path, headers, body)] = provider.seen
        assert path == "/v1/messages" and headers["x-api-key"] == KEY and "authorization" not in headers
        assert headers["anthropic-version"] == "2023-06-01" and "stream_options" not in json.loads(body)
        assert state.counted == [(MODEL, 40, 25)]
        refused = state.post("/chat/completions", token="", **{"x-api-key": state.gateway.token})
        assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "path_refused"


def test_an_azure_deployment_must_be_the_model() -> None:
    assert model_calls.route("azure", "/openai/deployments/gpt-5/chat/completions") == (
        "openai/deployments/gpt-5/chat/completions",
        "gpt-5",
    )
    body = json.dumps({"messages": []}).encode()
    assert model_calls.requested_model(body, "gpt-5", frozenset({MODEL})) == (MODEL, {"messages": []})
    other = model_calls.requested_model(body, "o3", frozenset({MODEL}))
    assert isinstance(other, model_calls.Refusal) and other.code == "model_refused"
    mixed = json.dumps({"model": MODEL}).encode()
    assert isinstance(model_calls.requested_model(mixed, "o3", frozenset({MODEL})), model_calls.Refusal)


def test_an_unreachable_provider_is_a_clear_error_without_the_key() -> None:
    for state in running(Upstream("openai", "http://127.0.0.1:9/v1", KEY)):
        answer = state.post()
        assert answer.status_code == 502 and answer.json()["error"]["code"] == "provider_unreachable"
        assert KEY not in answer.text and "127.0.0.1:9" not in answer.text


@pytest.fixture
def copilot(provider: Provider) -> Iterator[Running]:
    github = f"http://127.0.0.1:{provider.port}/gh"
    yield from running(Upstream("copilot", provider.base_url, KEY, github_api_url=github))


@pytest.mark.parametrize(
    "case",
    [
        # (path, token: None for the launch's, status, what reached the upstream)
        # What the Copilot CLI needs: Copilot's model catalog, and GitHub's check of its token.
        ("/model/models", None, 200, "/v1/models"),
        ("/copilot_internal/user", None, 200, "/gh/copilot_internal/user"),
        # Minting a Copilot token, any other GitHub call, a completion by GET, a way out of the prefix.
        ("/copilot_internal/v2/token", None, 403, None),
        ("/user/repos", None, 403, None),
        ("/model/chat/completions", None, 403, None),
        ("/model/../copilot_internal/v2/token", None, 403, None),
        ("/model/models/../../copilot_internal/v2/token", None, 403, None),
        # Not this launch's token: a guess, or the real token itself.
        ("/copilot_internal/user", "sqmg-" + "A" * 43, 401, None),
        ("/model/models", KEY, 401, None),
    ],
)
def test_a_copilot_gateway_reads_only_the_catalog_and_the_tokens_check(
    copilot: Running, provider: Provider, case: tuple[str, str | None, int, str | None]
) -> None:
    path, token, status, reached = case
    provider.chunks = [json.dumps({"login": "seat", "echo": f"Bearer {KEY}"}).encode()]  # a hostile echo
    presented = copilot.gateway.token if token is None else token
    answer = httpx.get(copilot.gateway.github_url + path, headers={"authorization": f"Bearer {presented}"})
    assert answer.status_code == status, answer.text
    assert KEY not in answer.text
    assert [seen for seen, _, _ in provider.seen] == ([reached] if reached else [])
    if reached is not None:
        assert answer.json()["echo"] == "Bearer [redacted]"
        assert provider.seen[0][1]["authorization"] == f"Bearer {KEY}"
    assert copilot.admitted == [] and copilot.counted == []  # reads name no model and cost nothing


def test_a_copilot_completion_carries_the_clis_identity_but_not_its_token(
    copilot: Running, provider: Provider
) -> None:
    answer = copilot.post(
        **{
            "copilot-integration-id": "copilot-developer-cli",
            "x-initiator": "agent",
            "x-client-machine-id": "m",
        }
    )
    assert answer.status_code == 200
    [(path, headers, _)] = provider.seen
    assert path == "/v1/chat/completions" and headers["authorization"] == f"Bearer {KEY}"
    assert (headers["copilot-integration-id"], headers["x-initiator"]) == ("copilot-developer-cli", "agent")
    assert "x-client-machine-id" not in headers and copilot.gateway.token not in json.dumps(headers)
    assert copilot.admitted == [MODEL] and copilot.counted == [(MODEL, 11, 7)]
