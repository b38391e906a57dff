"""A role served by GitHub Copilot: the Copilot token never reaches the agent's user.

The real Copilot CLI and SDK drive a dev agent whose model is Copilot's (no BYOK provider). The host
wires it as the deployed task does (:func:`squadron.agent.wiring.copilot_route`): the CLI's GitHub
token is the launch's token, its one GitHub API call (the token's check) goes to the task's model
gateway, and every model-layer request it makes (the catalog, each completion) is handed to the host
by the SDK and sent through the gateway, which adds the real token. The stand-in plays Copilot's API
and GitHub's: it answers only the real token, and echoes the credential it got in every answer (a
hostile upstream). The scripted model's shell, as the agent's own user, searches every environment,
command line, process memory and file it can read for the real token, then uses what it found on the
gateway: the token check, a minted Copilot token, another GitHub call, another model. Asserted on
what it got and on what reached the stand-in.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from squadron.adapters.copilot import CopilotRuntime
from squadron.adapters.model_gateway import ModelGateway, Upstream
from squadron.agent.wiring import copilot_route
from squadron.config import load_directory
from squadron.domain.commands import TaskEnded
from tests.agent.test_agent_host import CLI, ROOT, cli_env, run, stack_for, tool_results
from tests.support.hunt import SEARCH_PROCESSES
from tests.support.scripted_model import Say, ScriptedModel, ToolCall

pytestmark = pytest.mark.agent

MODEL = "claude-sonnet-4.5"

#: The attacker, as the agent's own user: any GitHub user token (the real one's shape) searched for
#: everywhere it can read (it is not told the real one: its own memory would hold it), then
#: the gateway used with the launch's token it finds (its address is in the CLI's environment).
HUNT = (
    SEARCH_PROCESSES
    + r"""
import base64, json, os, re, sys, urllib.error, urllib.request
real = re.compile(rb"ghu_[0-9a-f]{36}")  # a GitHub user token's shape (the seat's token is one)
launch = re.compile(rb"sqmg-[A-Za-z0-9_-]{43}")
door = re.compile(rb"COPILOT_DEBUG_GITHUB_API_URL=(http://127\.0\.0\.1:[0-9]{2,5})")
found, memories = search_processes({"real": real, "launch": launch, "doors": door}, memory=("real", "launch"))
got = {**found, "memories": memories, "valid": 0, "calls": {}}
for top in (os.environ.get("HOME", "/"), os.getcwd()):
    for where, _, names in os.walk(top):
        for name in names:
            try:
                got["real"].update(m.decode() for m in real.findall(open(os.path.join(where, name), "rb").read(1 << 22)))
            except OSError:
                pass


def call(url, token, body=None):
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(), method="GET" if body is None else "POST",
        headers={"authorization": "Bearer " + token, "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode()]


for github in sorted(got["doors"]):
    model = github + "/model"
    for token in sorted(got["launch"]):
        check = call(github + "/copilot_internal/user", token)
        if check[0] == 401:
            continue  # not this launch's token (the gateway says so before anything else)
        got["valid"] += 1
        got["calls"]["token check"] = check
        got["calls"]["minted token"] = call(github + "/copilot_internal/v2/token", token)
        got["calls"]["other github call"] = call(github + "/user/repos", token)
        got["calls"]["catalog"] = call(model + "/models", token)
        got["calls"]["other model"] = call(
            model + "/chat/completions", token, {"model": "o3-pro", "messages": [{"role": "user", "content": "hi"}]}
        )
        got["calls"]["guessed token"] = call(github + "/copilot_internal/user", "sqmg-" + "A" * 43)
got["real"], got["launch"], got["doors"] = sorted(got["real"]), len(got["launch"]), sorted(got["doors"])
print("got", base64.b64encode(json.dumps(got).encode()).decode())  # as data, whatever the CLI shows
"""
)


#: The role's model as Copilot's catalog lists it (chat completions only: what the scripted model serves).
CATALOG_ENTRY = {
    "id": MODEL,
    "name": "Claude Sonnet 4.5",
    "object": "model",
    "vendor": "Anthropic",
    "version": MODEL,
    "preview": False,
    "model_picker_enabled": True,
    "capabilities": {
        "family": MODEL,
        "type": "chat",
        "object": "model_capabilities",
        "tokenizer": "o200k_base",
        "limits": {
            "max_context_window_tokens": 200000,
            "max_output_tokens": 16000,
            "max_prompt_tokens": 128000,
        },
        "supports": {"streaming": True, "tool_calls": True, "parallel_tool_calls": True},
    },
    "supported_endpoints": ["/chat/completions"],
    "policy": {"state": "enabled", "terms": ""},
    "billing": {"is_premium": True, "multiplier": 1},
}


@dataclass
class CopilotStandIn:
    """Copilot's API (``/capi``) and GitHub's (``/gh``) for one real token, answering nobody else; every
    answer echoes the credential it was given (what the gateway must keep from the CLI)."""

    model: ScriptedModel
    token: str
    #: (method, path, the authorization header) of every request that reached it.
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    url: str = ""

    def answer(self, method: str, path: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        self.seen.append((method, path, authorization))
        if authorization != f"Bearer {self.token}":
            return 401, {"message": "Bad credentials"}
        echo = {"credential": authorization}
        if method == "GET" and path == "/gh/copilot_internal/user":
            return 200, {
                "login": "squadron-seat",
                "endpoints": {"api": "https://api.githubcopilot.com"},
                **echo,
            }
        if method == "GET" and path == "/capi/models":
            return 200, {"data": [CATALOG_ENTRY], "object": "list", **echo}
        if method == "POST" and path == "/capi/chat/completions":
            return 200, {**self.model.answer(json.loads(body)), **echo}
        return 404, {"message": "Not Found", **echo}


@contextmanager
def serving(stand_in: CopilotStandIn) -> Iterator[CopilotStandIn]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            status, payload = stand_in.answer(
                self.command, self.path, self.headers.get("authorization", ""), body
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


def test_a_copilot_served_agent_never_holds_the_copilot_token(tmp_path: Path) -> None:
    real = f"ghu_{secrets.token_hex(18)}"
    model = ScriptedModel(
        [
            ToolCall("bash", {"command": f"python3 - <<'PY'\n{HUNT}\nPY", "description": "look around"}),
            Say("Done."),
        ]
    )
    with (
        stack_for(tmp_path, load_directory(ROOT / ".squadron")) as stack,
        serving(CopilotStandIn(model, real)) as copilot,
    ):
        stack.route(stack.events.assigned(38))
        gateway = ModelGateway(
            Upstream("copilot", f"{copilot.url}/capi", real, github_api_url=f"{copilot.url}/gh"),
            models=frozenset({MODEL}),
        )
        env = cli_env(stack.root)
        provider, route = copilot_route(gateway, env)
        assert provider is None and route is not None  # no BYOK provider: Copilot's API, through the host
        github_token, handler = route
        runtime = CopilotRuntime(
            cli_path=str(CLI),
            home=str(stack.root),
            env=env,
            github_token=github_token,
            request_handler=handler,
        )
        host = stack.host(model, model_gateway=gateway, runtime=runtime, provider=None)
        door = gateway.github_url
        assert real not in repr(runtime.env) + github_token() + repr(host.provider)
        result = run(host)

        assert result.outcome == "idle", result
        (shell,) = tool_results(model)
        got = json.loads(base64.b64decode(re.search(r"got ([A-Za-z0-9+/=]+)", shell)[1]))  # type: ignore[index]
        # The real token: in no environment, command line, readable memory or file.
        assert got["real"] == [] and got["memories"] >= 1, got
        # What it found and could use: the launch's token, on the gateway, for what the CLI needs.
        assert got["valid"] == 1 and got["doors"] == [door], got
        calls = got["calls"]
        assert calls["token check"][0] == 200 and "squadron-seat" in calls["token check"][1]
        assert calls["catalog"][0] == 200
        # Every answer's echo of the token replaced; nothing else of GitHub's or Copilot's API open.
        assert real not in json.dumps(got)
        assert "[redacted]" in calls["token check"][1] and "[redacted]" in calls["catalog"][1]
        for refused in ("minted token", "other github call"):
            assert calls[refused][0] == 403 and "path_refused" in calls[refused][1], calls
        assert calls["other model"][0] == 403 and "model_refused" in calls["other model"][1]
        assert calls["guessed token"][0] == 401

        # Copilot's side: every request carried the real token, added by the host (the CLI's own
        # token check, its catalog, both of its model calls and the attacker's allowed reads).
        assert copilot.seen and {auth for _, _, auth in copilot.seen} == {f"Bearer {real}"}
        paths = [path for _, path, _ in copilot.seen]
        assert paths.count("/capi/chat/completions") == 2 and "/gh/copilot_internal/user" in paths
        assert not {"/gh/copilot_internal/v2/token", "/gh/user/repos"} & set(paths)
        # What the task used is what the gateway counted.
        (ended,) = [e for e in stack.route_queued() if isinstance(e.command, TaskEnded)]
        assert isinstance(ended.command, TaskEnded)
        assert [(t.model, t.input_tokens, t.output_tokens) for t in ended.command.usage.tokens] == [
            (MODEL, 2, 2)
        ]
