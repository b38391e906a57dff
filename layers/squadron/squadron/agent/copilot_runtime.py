"""The Copilot SDK adapter: one session turn on the Copilot CLI, created or resumed by id.

Session state lives under ``home`` (``COPILOT_HOME``; EFS in ECS), so a session
created by one task is resumed by the next. Resuming re-supplies everything the
CLI does not persist: provider, tools, hooks, permission handler. The model is
always offered an explicit ``available_tools`` list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from copilot import CopilotClient, PermissionHandler, RuntimeConnection, define_tool
from copilot.session import PreToolUseHookInput, PreToolUseHookOutput, SessionHooks

from squadron.agent.tools import ToolSpec

#: (tool name, tool arguments) -> None to allow, or a PreToolUseHookOutput-shaped dict.
PreToolUse = Callable[[str, Any], dict[str, Any] | None]


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


class CopilotRuntime:
    def __init__(
        self,
        *,
        cli_path: str,
        home: str,
        env: Mapping[str, str],
        working_directory: str | None = None,
        github_token: Callable[[], str] | None = None,
    ) -> None:
        self.cli_path = cli_path
        self.home = home
        self.env = dict(env)
        self.working_directory = working_directory
        #: For models served through Copilot (no BYOK provider): read when a session starts.
        self.github_token = github_token

    async def turn(self, request: SessionRequest, then: Callable[[], str | None] | None = None) -> list[str]:
        """Send ``request.prompt`` (and, while ``then`` returns one, follow-up prompts); the replies."""
        client = CopilotClient(
            connection=RuntimeConnection.for_stdio(path=self.cli_path),
            base_directory=self.home,
            env={**self.env, "COPILOT_HOME": self.home},
            working_directory=self.working_directory,
            github_token=self.github_token() if self.github_token is not None else None,
        )
        await client.start()
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
            if request.provider is not None:
                options["provider"] = dict(request.provider)
            if request.resume:
                session = await client.resume_session(request.session_id, **options)
            else:
                # Append: the CLI keeps its own guardrails; the role definition comes after them.
                options["system_message"] = {"mode": "append", "content": request.system_prompt}
                session = await client.create_session(session_id=request.session_id, **options)
            replies: list[str] = []
            prompt: str | None = request.prompt
            while prompt is not None:
                event = await session.send_and_wait(prompt, timeout=request.timeout_seconds)
                content = getattr(event.data, "content", None) if event is not None else None
                replies.append(str(content or ""))
                prompt = then() if then is not None else None
            await session.disconnect()
            return replies
        finally:
            await client.stop()


def _handler(spec: ToolSpec) -> Callable[[Any, Any], str]:
    def handle(params: Any, invocation: Any) -> str:
        return spec.handler(params)

    return handle
