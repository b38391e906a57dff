"""The Copilot SDK adapter: one session turn on the Copilot CLI, created or resumed by id.

Session state lives under ``home`` (``COPILOT_HOME``: the agent's own directory on
EFS in ECS), so a session created by one task is resumed by the next. The CLI runs
as the agent's own user (:class:`~squadron.adapters.confinement.AgentUser`, through
setpriv), with an environment of exactly PATH, HOME, the CLI's read-only package
cache and its own home: nothing in it, or readable by it, holds a framework secret. Resuming re-supplies everything the
CLI does not persist: provider, tools, hooks, permission handler, and the
appended system message (the role's definition). The model is
always offered an explicit ``available_tools`` list. A session whose task died
before the CLI saved its conversation cannot be resumed: given a ``lost_prompt``,
it starts afresh under the same id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx
from copilot import CopilotClient, PermissionHandler, RuntimeConnection, define_tool
from copilot.copilot_request_handler import (
    CopilotRequestContext,
    CopilotRequestHandler,
    CopilotWebSocketHandler,
)
from copilot.generated.session_events import SessionEventType
from copilot.session import CopilotSession, PreToolUseHookInput, PreToolUseHookOutput, SessionHooks
from pydantic import BaseModel

from squadron.adapters.confinement import TRUSTED_CWD, AgentDirs, AgentUser

logger = logging.getLogger(__name__)


#: The host's calls to its own model gateway on 127.0.0.1.
GATEWAY_TIMEOUT = httpx.Timeout(connect=5.0, read=660.0, write=60.0, pool=15.0)


class ThroughGateway(CopilotRequestHandler):
    """Every model-layer request the CLI would send Copilot's API (inference, the model catalog), sent
    by the host to its task's model gateway instead: the same path, body and headers, the CLI's token
    among them (the launch's token: the CLI never holds the Copilot token). The gateway checks it,
    the endpoint, the model and the budget, then adds the real token (docs/security.md).

    The SDK hands the host each request over the CLI's own pipe (its ``request_handler``), so no
    address or variable of the CLI's decides where inference goes.
    """

    def __init__(self, gateway_url: str) -> None:
        self.gateway_url = gateway_url.rstrip("/")
        # The gateway bounds the provider's call; a read outlasts its longest wait between two bytes.
        self._client = httpx.AsyncClient(timeout=GATEWAY_TIMEOUT, follow_redirects=False)

    def target(self, url: httpx.URL) -> httpx.URL:
        """Where a request for ``url`` goes: the gateway, with the request's path and query."""
        return httpx.URL(self.gateway_url + url.raw_path.decode("ascii"))

    async def send_request(self, request: httpx.Request, ctx: CopilotRequestContext) -> httpx.Response:
        headers = [(name, value) for name, value in request.headers.multi_items() if name.lower() != "host"]
        forwarded = httpx.Request(
            request.method, self.target(request.url), headers=headers, content=request.content
        )
        return await self._client.send(forwarded, stream=True)

    async def open_websocket(self, ctx: CopilotRequestContext) -> CopilotWebSocketHandler:
        # The gateway forwards HTTP calls only: a WebSocket would reach Copilot's API unchecked.
        raise RuntimeError("the model gateway takes HTTP requests only")


#: (tool name, tool arguments) -> None to allow, or a PreToolUseHookOutput-shaped dict.
PreToolUse = Callable[[str, Any], dict[str, Any] | None]


@dataclass(frozen=True)
class ToolSpec:
    """A framework tool as the session offers it to the model: its name, what it does, the model
    of its arguments, and the handler that runs it (and returns its text)."""

    name: str
    description: str
    params: type[BaseModel]
    handler: Callable[[Any], str]


@dataclass(frozen=True)
class SessionRequest:
    session_id: str
    resume: bool
    model: str
    provider: Mapping[str, Any] | None
    system_prompt: str
    prompt: str
    tools: Sequence[ToolSpec]
    host_tools: Sequence[str]
    pre_tool_use: PreToolUse
    timeout_seconds: float
    #: Where the CLI runs and its host tools act: the agent's working copy.
    working_directory: str | None = None
    #: Called at the start of every model turn (the breakers count turns).
    on_turn: Callable[[], None] | None = None
    #: Called with (model, input tokens, output tokens) for every model call, as the SDK reports it.
    on_usage: Callable[[str, int, int], None] | None = None
    #: Set by the host (a breaker timer, a lost lease) to abort the prompt in flight.
    stop: asyncio.Event | None = None
    #: When resuming: the prompt for a fresh session if the saved one is not there (the task that
    #: held it died before the CLI wrote its conversation to disk). None: a lost session fails.
    lost_prompt: str | None = None


class CopilotRuntime:
    def __init__(
        self,
        *,
        cli_path: str,
        home: str,
        env: Mapping[str, str],
        github_token: Callable[[], str] | None = None,
        request_handler: CopilotRequestHandler | None = None,
    ) -> None:
        self.cli_path = cli_path
        self.home = home
        self.env = dict(env)
        #: For models served through Copilot (no BYOK provider): read when a session starts.
        self.github_token = github_token
        #: Where the CLI's model-layer requests go instead of Copilot's API (:class:`ThroughGateway`).
        self.request_handler = request_handler
        #: How the latest session was opened (create, resume, or recreate when it was lost) and
        #: the seconds from starting the CLI until the session was ready.
        self.session_start: tuple[str, float] | None = None
        #: Who the CLI runs as (the host's own user until :meth:`confine`).
        self.user = AgentUser()

    def confine(self, user: AgentUser, dirs: AgentDirs) -> None:
        """Run the CLI as the agent's user, with its home and sessions in the agent's directory."""
        self.user = user
        self.home = str(dirs.copilot_home)
        self.env["HOME"] = str(dirs.home)

    async def turn(
        self, request: SessionRequest, then: Callable[[], Awaitable[str | None]] | None = None
    ) -> list[str]:
        """Send ``request.prompt`` (and, while ``then`` returns one, follow-up prompts); the replies."""
        opening = time.perf_counter()
        client = await self._started(request)
        try:
            tools = [
                define_tool(
                    spec.name,
                    description=spec.description,
                    handler=_handler(spec),
                    params_type=spec.params,
                    skip_permission=True,
                )
                for spec in request.tools
            ]

            def pre_tool_use(
                data: PreToolUseHookInput, context: dict[str, str]
            ) -> PreToolUseHookOutput | None:
                decision = request.pre_tool_use(data["toolName"], data.get("toolArgs"))
                return cast(PreToolUseHookOutput, decision) if decision is not None else None

            hooks: SessionHooks = {"on_pre_tool_use": pre_tool_use}
            options: dict[str, Any] = {
                "model": request.model,
                "tools": tools,
                "available_tools": [spec.name for spec in request.tools] + list(request.host_tools),
                "hooks": hooks,
                "on_permission_request": PermissionHandler.approve_all,
                "streaming": False,
            }
            if request.working_directory is not None:
                options["working_directory"] = request.working_directory
            if request.provider is not None:
                options["provider"] = dict(request.provider)
            # Append: the CLI keeps its own guardrails; the role definition comes after them. It is
            # not persisted with the session, so a resume supplies it again like tools and hooks.
            options["system_message"] = {"mode": "append", "content": request.system_prompt}
            session, first, mode = await _open(client, request, options)
            self.session_start = (mode, time.perf_counter() - opening)
            listening = request.on_turn is not None or request.on_usage is not None
            unsubscribe = session.on(usage_listener(request.on_turn, request.on_usage)) if listening else None
            replies: list[str] = []
            prompt: str | None = first
            try:
                while prompt is not None:
                    replies.append(await _send(session, prompt, request))
                    prompt = await then() if then is not None else None
            finally:
                if unsubscribe is not None:
                    unsubscribe()
                await session.disconnect()
            return replies
        finally:
            await client.stop()

    async def _started(self, request: SessionRequest) -> CopilotClient:
        """A started Copilot CLI for ``request``.

        A CLI that exits while starting (seen on a loaded machine: "CLI process exited with code
        1" before it answered ``connect``) is started again, up to :data:`CLI_START_ATTEMPTS`
        times with a growing pause, its stderr logged; the task fails only when every attempt did.
        """
        # The CLI starts in the host's own directory and enters the agent's after it dropped to the
        # agent's user: a link the agent left in place of its working copy leads nowhere it could
        # not go itself (subprocess enters its cwd as root, before the drop).
        program, args = self.user.command(
            self.cli_path, cwd=request.working_directory or self.env.get("HOME") or TRUSTED_CWD
        )
        for attempt in range(1, CLI_START_ATTEMPTS + 1):
            client = CopilotClient(
                connection=RuntimeConnection.for_stdio(path=program, args=args),
                base_directory=self.home,
                env={**self.env, "COPILOT_HOME": self.home},
                working_directory=TRUSTED_CWD,
                github_token=self.github_token() if self.github_token is not None else None,
                request_handler=self.request_handler,
            )
            try:
                await client.start()
            except RuntimeError as exc:  # the SDK's "CLI process exited with code N"
                with contextlib.suppress(Exception):
                    await client.force_stop()
                if attempt == CLI_START_ATTEMPTS:
                    raise
                logger.warning(
                    "the Copilot CLI did not start (attempt %d of %d): %s; starting it again",
                    attempt,
                    CLI_START_ATTEMPTS,
                    exc,
                )
                await asyncio.sleep(CLI_START_PAUSE_SECONDS * attempt)
                continue
            return client
        raise AssertionError("unreachable")  # pragma: no cover


#: How often the CLI is started for one turn before the task fails, and the pause after the
#: first failed start (doubled after the second).
CLI_START_ATTEMPTS = 3
CLI_START_PAUSE_SECONDS = 1.0

#: What the CLI answers session.resume with when the session's conversation was never saved.
_LOST_SESSION = ("Session not found", "Failed to load session events")


async def _open(
    client: CopilotClient, request: SessionRequest, options: dict[str, Any]
) -> tuple[CopilotSession, str, str]:
    """The session to drive, its first prompt, and how it was opened: resumed, or created (afresh
    when it was lost)."""
    if request.resume:
        try:
            return await client.resume_session(request.session_id, **options), request.prompt, "resume"
        except Exception as exc:  # the SDK raises its private JsonRpcError
            if request.lost_prompt is None or not any(sign in str(exc) for sign in _LOST_SESSION):
                raise
            logger.warning("session %s was never saved (%s): it starts afresh", request.session_id, exc)
            with contextlib.suppress(Exception):  # what is left of it (a directory without events)
                await client.delete_session(request.session_id)
            session = await client.create_session(session_id=request.session_id, **options)
            return session, request.lost_prompt, "recreate"
    return await client.create_session(session_id=request.session_id, **options), request.prompt, "create"


async def _send(session: CopilotSession, prompt: str, request: SessionRequest) -> str:
    """One prompt until the session is idle; aborted in flight when ``request.stop`` is set.

    An aborted prompt has no reply (""): the host decides what comes next.
    """
    sending = asyncio.ensure_future(session.send_and_wait(prompt, timeout=request.timeout_seconds))
    aborted = False
    if request.stop is not None and not request.stop.is_set():
        stopping = asyncio.ensure_future(request.stop.wait())
        done, _ = await asyncio.wait({sending, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if sending not in done:
            aborted = True
            await session.abort()
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
    try:
        event = await sending
    except RuntimeError:
        if aborted:  # "Session aborted before response completed"
            return ""
        raise
    content = getattr(event.data, "content", None) if event is not None else None
    return str(content or "")


def usage_listener(
    on_turn: Callable[[], None] | None, on_usage: Callable[[str, int, int], None] | None
) -> Callable[[Any], None]:
    """Turn starts (the breakers count them) and each model call's tokens (what the task cost)."""

    def handle(event: Any) -> None:
        if event.type == SessionEventType.ASSISTANT_TURN_START and not getattr(event, "agent_id", None):
            if on_turn is not None:
                on_turn()
        elif event.type == SessionEventType.ASSISTANT_USAGE and on_usage is not None:
            data = event.data
            on_usage(
                str(getattr(data, "model", "") or "unknown"),
                int(getattr(data, "input_tokens", 0) or 0),
                int(getattr(data, "output_tokens", 0) or 0),
            )

    return handle


def _handler(spec: ToolSpec) -> Callable[[Any, Any], str]:
    def handle(params: Any, invocation: Any) -> str:
        return spec.handler(params)

    return handle
