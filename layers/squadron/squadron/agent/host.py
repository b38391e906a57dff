"""The agent host: what one ECS task does for one agent, from lease to exit.

1. Read the agent from the registry; a task whose launch token is no longer the
   agent's latest (it was replaced) exits without touching anything.
2. Take the agent's lease (one live task per agent).
3. Start the role's Copilot session, or resume it by its id when waking, with
   the framework tools the role allows and the circuit breakers in the
   pre-tool-use hook (enforced outside the model: a breaker never fails open).
4. After the turn: a blocked agent's command is on the queue (the router puts
   it to sleep); a tripped breaker or an escalation marks the agent ESCALATED
   and hands the issue to humans; then the lease is released and the task exits.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from squadron.adapters.github.client import GitHubClient
from squadron.agent.copilot_runtime import CopilotRuntime, SessionRequest
from squadron.agent.prompts import IssueFacts, prompt_values, start_prompt, system_prompt, wake_prompt
from squadron.agent.tools import FrameworkTools, HostState, Inbox
from squadron.config.parse import SquadronConfig
from squadron.domain.agents import AgentRecord, AgentStatus, ConflictError, InboxItem
from squadron.domain.breakers import Usage, before_tool_call
from squadron.domain.effects import AgentWrite
from squadron.domain.routing import launch_token
from squadron.ports import EventQueue

logger = logging.getLogger(__name__)

LEASE_TTL = timedelta(minutes=15)
SUMMARY_PROMPT = (
    "A circuit breaker stopped you: {reason}\nTools are no longer available. Reply with a summary for "
    "the humans taking over: what is done, what is left, and what they should decide."
)


NEWS_PROMPT = "New events arrived while you worked: call check_for_events and handle them."


def _now() -> datetime:
    return datetime.now(UTC)


class HostRegistry(Inbox, Protocol):
    def get_agent(self, agent_id: str) -> AgentRecord | None: ...
    def put_agent(self, write: AgentWrite) -> None: ...
    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord: ...
    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None: ...


#: superseded: a newer task replaced this one; busy: another task holds the lease; sleeping:
#: blocked, the router puts it to sleep; escalated: handed to humans; idle: the turn ended
#: (report_complete), the agent waits ACTIVE without a task for the next event.
Outcome = Literal["superseded", "busy", "sleeping", "escalated", "idle"]


@dataclass(frozen=True)
class HostResult:
    outcome: Outcome
    detail: str = ""
    replies: tuple[str, ...] = ()


_BLOCKER_CLOSED = re.compile(r"blocker #(\d+) ")


def resolved_blockers(items: Iterable[InboxItem]) -> list[int]:
    """The blockers whose closing the inbox reports (the router's ``blocker_closed`` items)."""
    found = (_BLOCKER_CLOSED.match(item.summary) for item in items if item.kind == "blocker_closed")
    return sorted({int(match.group(1)) for match in found if match})


class AgentHost:
    def __init__(
        self,
        *,
        agent_id: str,
        launch_token: str,
        registry: HostRegistry,
        queue: EventQueue,
        config: SquadronConfig,
        runtime: CopilotRuntime,
        agent_github: Callable[[AgentRecord], GitHubClient],
        framework_github: Callable[[AgentRecord], GitHubClient],
        provider: Mapping[str, Any] | None,
        facts: IssueFacts,
        clock: Callable[[], datetime] = _now,
        timeout_seconds: float = 600,
    ) -> None:
        self.agent_id = agent_id
        self.launch_token = launch_token
        self.registry = registry
        self.queue = queue
        self.config = config
        self.runtime = runtime
        self.agent_github = agent_github
        self.framework_github = framework_github
        self.provider = provider
        self.facts = facts
        self.clock = clock
        self.timeout_seconds = timeout_seconds
        self.usage = Usage()
        self.state = HostState()

    async def run(self) -> HostResult:
        agent = self.registry.get_agent(self.agent_id)
        if (
            agent is None
            or launch_token(agent) != self.launch_token
            or (agent.status is not AgentStatus.ACTIVE and agent.status is not AgentStatus.CREATED)
        ):
            why = "no such agent" if agent is None else f"{agent.status}, latest task {launch_token(agent)}"
            return HostResult("superseded", why)
        try:
            agent = self.registry.acquire_lease(self.agent_id, self.launch_token, self.clock(), LEASE_TTL)
        except ConflictError as exc:
            return HostResult("busy", str(exc))
        try:
            if agent.status is AgentStatus.CREATED:
                active = agent.transition(AgentStatus.ACTIVE, now=self.clock())
                self.registry.put_agent(AgentWrite(active, agent.version))
                agent = active
            return await self._work(agent)
        finally:
            self.registry.release_lease(self.agent_id, self.launch_token, self.clock())

    async def _work(self, agent: AgentRecord) -> HostResult:
        role = self.config.role(agent.role)
        values = prompt_values(self.config, role, agent, self.facts)
        started = self.clock()
        tools = FrameworkTools(
            agent=agent,
            launch_token=self.launch_token,
            inbox=self.registry,
            queue=self.queue,
            github=self.agent_github(agent),
            state=self.state,
            clock=self.clock,
            default_branch=self.facts.default_branch,
        )
        offered = [spec for name, spec in tools.specs().items() if name in role.agent.tools]
        missing = sorted(set(role.agent.tools) - {spec.name for spec in offered})
        if missing:
            logger.warning("%s: tools not available in this host yet: %s", agent.agent_id, ", ".join(missing))
        # The session id is the generation's: every launch after its first resumes it.
        resume = agent.counters.launches > 1
        if agent.wake_reason is not None and resume:
            pending = self.registry.pending_inbox(agent.agent_id)
            prompt = wake_prompt(
                role,
                values,
                reason=agent.wake_reason or "",
                events=pending,
                resolved_blockers=[
                    int(i.summary.split("#")[1].split()[0])
                    for i in pending
                    if i.kind == "blocker_closed" and "#" in i.summary
                ],
            )
        else:
            prompt = start_prompt(agent, self.facts)

        def pre_tool_use(tool_name: str, args: Any) -> dict[str, Any] | None:
            command = args.get("command") if isinstance(args, dict) else None
            assessment = before_tool_call(
                self.usage, role.limits, tool_name=tool_name, command=command, elapsed=self.clock() - started
            )
            self.usage = assessment.usage
            decision = assessment.decision
            if not decision.allow:
                return {
                    "permissionDecision": "deny",
                    "permissionDecisionReason": decision.message or "denied",
                }
            if decision.message:
                return {"permissionDecision": "allow", "additionalContext": decision.message}
            return None

        def follow_up() -> str | None:
            if self.usage.tripped is not None and self.state.ending not in ("escalate", "sleep"):
                self.state.ending = "escalate"
                self.state.reason = self.usage.trip_reason or "circuit breaker"
                return SUMMARY_PROMPT.format(reason=self.state.reason)
            if self.state.ending in (None, "complete") and self.registry.pending_inbox(agent.agent_id):
                # News arrived while this task ran (the router only wakes agents without a task).
                self.state.ending = None
                return NEWS_PROMPT
            return None

        replies = await self.runtime.turn(
            SessionRequest(
                session_id=agent.session_id,
                resume=resume,
                model=role.model,
                provider=self.provider,
                system_prompt=system_prompt(role, values),
                prompt=prompt,
                tools=offered,
                host_tools=role.agent.host_tools,
                pre_tool_use=pre_tool_use,
                timeout_seconds=self.timeout_seconds,
            ),
            then=follow_up,
        )
        if self.state.ending == "sleep":
            return HostResult("sleeping", self.state.reason, tuple(replies))
        if self.state.ending == "escalate":
            self._escalate(self.state.reason, replies[-1] if replies else "")
            return HostResult("escalated", self.state.reason, tuple(replies))
        self._settle_idle()
        detail = self.state.reason if self.state.ending == "complete" else "the turn ended without a report"
        return HostResult("idle", detail, tuple(replies))

    def _settle_idle(self) -> None:
        """The task ends; the agent stays ACTIVE without a task, so the next event for it wakes it."""
        for _ in range(3):
            agent = self.registry.get_agent(self.agent_id)
            if (
                agent is None
                or agent.status is not AgentStatus.ACTIVE
                or launch_token(agent) != self.launch_token
            ):
                return  # replaced, slept or ended meanwhile: nothing of ours to settle
            try:
                self.registry.put_agent(
                    AgentWrite(agent.updated(now=self.clock(), task_arn=None), agent.version)
                )
                return
            except ConflictError:
                continue

    def _escalate(self, reason: str, summary: str) -> None:
        """Mark the agent ESCALATED and hand its issue to humans (label, comment, needs-human issue)."""
        for _ in range(3):
            agent = self.registry.get_agent(self.agent_id)
            if agent is None or agent.status in (
                AgentStatus.ESCALATED,
                AgentStatus.COMPLETED,
                AgentStatus.CANCELLED,
            ):
                break
            escalated = agent.transition(
                AgentStatus.ESCALATED, now=self.clock(), escalation_reason=reason[:1000]
            )
            try:
                self.registry.put_agent(AgentWrite(escalated, agent.version))
                break
            except ConflictError:
                continue
        agent = self.registry.get_agent(self.agent_id)
        if agent is None or agent.issue_number is None:
            return
        escalation = self.config.config.escalation
        github = self.framework_github(agent)
        body = f"{agent.display_name} needs a human: {reason}\n\n{summary}".strip()
        github.add_labels(agent.issue_number, [escalation.label])
        github.comment(agent.issue_number, body)
        if escalation.create_issue:
            github.create_issue(
                f"needs-human: #{agent.issue_number} ({agent.display_name})",
                f"#{agent.issue_number} was handed to humans.\n\n{body}",
                labels=[escalation.label],
                assignees=escalation.assign,
            )
