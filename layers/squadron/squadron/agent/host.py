"""The agent host: what one ECS task does for one agent, from lease to exit.

1. Through the agent gateway (its one door, every call carrying the launch's
   secret), take the agent's lease; a task whose launch was replaced, ended or
   expired exits without touching anything.
2. Set up the agent's confinement: its own directory on the shared volume,
   owned by its own POSIX user, which the Copilot CLI, the model's shell and
   the agent's git run as (:mod:`squadron.adapters.confinement`); then the
   janitor's pass: finished agents' state past the retention leaves the
   volume (:mod:`squadron.agent.janitor`; the trash is emptied while it works).
3. Start the role's Copilot session, or resume it by its id when waking, with
   the framework tools the role allows and the circuit breakers in the
   pre-tool-use hook and in every framework tool (enforced outside the model:
   a breaker never fails open).
4. After the turn: save the work in progress (the framework pushes it), give up
   the lease and report how the task ended as a command (the router, the
   registry's only writer, puts it to sleep, lets it idle or hands it to
   humans), then publish the task's metrics through the gateway and exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from squadron.adapters import confinement
from squadron.adapters.confinement import AgentDirs, AgentUser
from squadron.adapters.copilot import CopilotRuntime, SessionRequest
from squadron.adapters.git import GitError, WorkingCopy
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.model_gateway import ModelGateway
from squadron.agent import janitor
from squadron.agent.door import Door
from squadron.agent.prompts import IssueFacts, prompt_values, start_prompt, system_prompt, wake_prompt
from squadron.agent.reading import authors, vetted
from squadron.agent.spending import ModelSpending
from squadron.agent.tools import FrameworkTools, HostState
from squadron.agent.writes import GatewayWrites
from squadron.config.parse import ResolvedRole, SquadronConfig
from squadron.domain import breakers, lifecycle
from squadron.domain.agents import AgentRecord, InboxItem, RoleKind
from squadron.domain.breakers import Usage, before_tool_call
from squadron.domain.cost import agent_cost
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.lifecycle import NEWS_POLL_SECONDS, Outcome
from squadron.domain.metrics import GitHubTraffic
from squadron.domain.retrospective import PATHS as RETRO_PATHS
from squadron.domain.retrospective import ROLE as RETRO_ROLE
from squadron.domain.shell_policy import refuse_shell
from squadron.domain.trust import pull_request_history

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "A circuit breaker stopped you: {reason}\nTools are no longer available. Reply with a summary for "
    "the humans taking over: what is done, what is left, and what they should decide."
)


#: Tool calls denied after a trip before the prompt in flight is aborted.
DENIALS_BEFORE_ABORT = 3

NEWS_PROMPT = "New events arrived while you worked: call check_for_events and handle them."
LOST_SESSION_NOTE = (
    "Your earlier conversation on this assignment was lost: the task that held it ended before it "
    "was saved. Start again from the issue; your branch has whatever work was pushed."
)


def _now() -> datetime:
    return datetime.now(UTC)


#: superseded: the gateway refused its launch (replaced, ended, expired); busy: another task holds
#: the lease; sleeping: blocked, the router puts it to sleep; escalated: handed to humans; idle:
#: the turn ended (report_complete), the agent waits ACTIVE without a task for the next event;
#: failed: the host crashed (reported, so the reconciler relaunches it). Decided in
#: :mod:`squadron.domain.lifecycle.task`.


@dataclass(frozen=True)
class HostResult:
    outcome: Outcome
    detail: str = ""
    replies: tuple[str, ...] = ()
    #: What happened to the work in progress (committed and pushed, or why not).
    saved: str = ""


def resolved_blockers(items: Iterable[InboxItem]) -> list[int]:
    """The blockers whose closing the inbox reports (the router's ``blocker_closed`` items)."""
    return sorted(
        {item.subject for item in items if item.kind == "blocker_closed" and item.subject is not None}
    )


def session_of(agent: AgentRecord, session_lifecycle: str) -> tuple[str, bool]:
    """The Copilot session a task uses, and whether it resumes it.

    Persistent roles keep one session per generation: every launch after the first resumes
    it. Ephemeral roles (the PM) start a fresh session for each launch (each batch).
    """
    if session_lifecycle == "ephemeral":
        return f"{agent.session_id}-l{agent.counters.launches}", False
    return agent.session_id, agent.counters.launches > 1


#: Builds the agent's working copy once its user and directories are known (None: no checkout).
WorkspaceFactory = Callable[[AgentUser, AgentDirs], WorkingCopy]


class AgentHost(ModelSpending):
    def __init__(
        self,
        *,
        door: Door,
        config: SquadronConfig,
        runtime: CopilotRuntime,
        agent_github: Callable[[AgentRecord], GitHubClient],
        provider: dict[str, Any] | None,
        facts: IssueFacts,
        agents_root: Path,
        workspace: WorkspaceFactory | None = None,
        separate_users: bool | None = None,
        clock: Callable[[], datetime] = _now,
        timeout_seconds: float = 600,
        watchdog_seconds: float | None = None,
        linger_seconds: float = 0,
        launch_cause: str | None = None,
        github_traffic: Callable[[], GitHubTraffic] | None = None,
        model_gateway: ModelGateway | None = None,
    ) -> None:
        self.door = door
        self.agent_id = door.agent_id
        self.launch_token = door.launch_token
        self.config = config
        self.runtime = runtime
        self.agent_github = agent_github
        self.provider = provider
        self.facts = facts
        #: Where every agent's directory lives (the shared volume).
        self.agents_root = agents_root
        self.workspace = workspace
        #: Whether the CLI and the agent's git run as the agent's own user (None: when root).
        self.separate_users = separate_users
        self.clock = clock
        self.timeout_seconds = timeout_seconds
        self.working_copy: WorkingCopy | None = None
        #: The user the agent's processes run as, once its launch began.
        self.user: AgentUser | None = None
        #: How often the watchdog beats and checks the clock; the config's heartbeat_interval by default.
        self.watchdog_seconds = watchdog_seconds
        #: How long the task waits for news once its work is done before it ends (the PM's batching).
        self.linger_seconds = linger_seconds
        #: The delivery whose routing launched this task (the logs' correlation id).
        self.launch_cause = launch_cause
        #: What the task's GitHub transport sent (drained into the metrics when it ends).
        self.github_traffic = github_traffic
        self.active_seconds = 0.0
        #: What the current batch of work has used (what the breakers limit) ...
        self.usage = Usage()
        #: ... and what earlier batches of this task used: a lingering PM's every batch of news
        #: gets the role's whole budget (a runaway is one batch looping, not a busy repository).
        self.spent = Usage()
        self.batch_started: datetime | None = None
        self.state = HostState()
        #: Warnings for the model that arrived outside a tool call (turns, the timer): the next
        #: tool call carries them.
        self.pending_context: list[str] = []
        self.stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.lease_lost = False
        self.denials = 0
        #: What the janitor's pass before the session did (None: it failed, or has not run).
        self.swept: janitor.Sweep | None = None
        self._emptying: asyncio.Future[int] | None = None
        #: The task's model gateway (the CLI's provider; it holds the key): what it counts is the
        #: task's tokens, and every call it forwards is admitted by :meth:`_admit_model_call` first.
        self.model_gateway = model_gateway
        self.agent_role: ResolvedRole | None = None
        #: Inbox items (their keys) the model was already told of (its wake prompt, a news
        #: prompt): an item it leaves unread is news once, never a prompt every turn until a
        #: breaker trips; the task's end names them, so the router does not wake the agent for
        #: them either (they wait for its next task).
        self.told: set[str] = set()
        #: The keys of the inbox's items when the host last looked (every page's, oldest first, up
        #: to MAX_TOLD): its task's end names those of them the model was told of.
        self.seen: list[str] = []
        self._init_spending(model_gateway)

    async def run(self) -> HostResult:
        """Do the agent's work for this launch; its metrics are published when it ends."""
        try:
            result = await self._run()
        except BaseException:
            self._publish("failed")
            raise
        finally:
            if self.model_gateway is not None:
                self.model_gateway.stop()
        self._publish(result.outcome)
        return result

    async def _run(self) -> HostResult:
        try:
            agent, uid = await asyncio.to_thread(self.door.begin)
        except LaunchRefusedError as exc:
            return HostResult("busy" if exc.code == "lease_held" else "superseded", str(exc))
        result: HostResult | None = None
        try:
            self._confine(agent, uid)
            await self._sweep()
            result = await self._work(agent)
            return result
        finally:
            await self._end(agent, result)
            await self._trash_emptied()

    async def _sweep(self) -> None:
        """The janitor's pass, before the agent's own session; the trash is emptied meanwhile.

        Never a reason to fail the agent's own work: a pass that fails is logged, and its claims
        lapse for a later task to take.
        """
        try:
            self.swept = await asyncio.to_thread(janitor.sweep, self.door, self.agents_root)
        except Exception as exc:
            logger.warning("%s: the janitor's pass failed: %s", self.agent_id, exc)
        self._emptying = asyncio.ensure_future(asyncio.to_thread(confinement.empty_trash, self.agents_root))

    async def _trash_emptied(self) -> None:
        """Wait for the trash to be emptied (what is left, the next task's pass removes)."""
        if self._emptying is None:
            return
        try:
            await self._emptying
        except Exception as exc:
            logger.warning("%s: the trash was not emptied: %s", self.agent_id, exc)

    def _confine(self, agent: AgentRecord, uid: int) -> None:
        """The agent's own directory and user; its working copy and Copilot home inside it."""
        self.user = AgentUser.for_uid(uid, separate=self.separate_users)
        self._cost_before = agent_cost(agent, self.config.config.pricing)
        dirs = AgentDirs(self.agents_root, agent.agent_id)
        confinement.prepare(dirs, self.user)
        self.runtime.confine(self.user, dirs)
        if self.workspace is not None and agent.kind is not RoleKind.PM:
            self.working_copy = self.workspace(self.user, dirs)
            if agent.role == RETRO_ROLE:  # a retrospective changes .squadron/ only
                self.working_copy.only_under = RETRO_PATHS

    async def _end(self, agent: AgentRecord, result: HostResult | None) -> None:
        """Give up the lease and tell the router how the task ended (also when it crashed)."""
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.door.release)
        told = lifecycle.reported(result.outcome if result is not None else None)
        if told is None:
            return
        usage = self._task_usage()
        try:
            if result is None:
                await asyncio.to_thread(
                    self.door.task_ended,
                    "failed",
                    usage=usage,
                    reason="the agent task failed",
                    finished=False,
                )
            else:
                await asyncio.to_thread(
                    self.door.task_ended,
                    told,
                    usage=usage,
                    reason=result.detail,
                    summary=result.replies[-1] if result.replies else "",
                    saved=result.saved,
                    finished=True,
                    outputs=dict(self.state.outputs) if told == "idle" else {},
                    # the told items still in the inbox when it last looked (any page's, at
                    # most MAX_TOLD): what was read since is gone, what came since is news
                    told=[key for key in self.seen if key in self.told],
                )
        except Exception as exc:  # the reconciler notices a task that ended without a word
            logger.error("%s: the end of the task was not reported: %s", self.agent_id, exc)

    def _stop(self) -> None:
        """Abort the prompt in flight (safe from any thread: SDK callbacks may run off the loop)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.stop.set)

    def _tripped(self) -> str | None:
        """Why framework tools are refused now (a tripped breaker), checked in the tools themselves:
        a CLI that skipped the pre-tool-use hook still meets it."""
        if self.usage.tripped is None:
            return None
        return f"circuit breaker tripped: {self.usage.trip_reason or self.usage.tripped.value}"

    async def _work(self, agent: AgentRecord) -> HostResult:
        self._loop = asyncio.get_running_loop()
        role = self.config.role(agent.role)
        self.agent_role = role
        values = prompt_values(self.config, role, agent, self.facts)
        started = self.clock()
        found = await asyncio.to_thread(self._prepare_working_copy, agent)
        reader = self.agent_github(agent)
        tools = FrameworkTools(
            agent=agent,
            launch_token=self.launch_token,
            door=self.door,
            github=reader,
            writes=GatewayWrites(self.door, reader.caller),
            state=self.state,
            clock=self.clock,
            default_branch=self.facts.default_branch,
            working_copy=self.working_copy,
            repo_config=self.config.config,
            stopped=self._tripped,
        )
        offered = [spec for name, spec in tools.specs().items() if name in role.agent.tools]
        missing = sorted(set(role.agent.tools) - {spec.name for spec in offered})
        if missing:
            logger.warning("%s: unknown tools in its definition: %s", agent.agent_id, ", ".join(missing))
        session_id, resume = session_of(agent, role.lifecycle)
        prompt = self._first_prompt(agent, role, values, resume=resume, found=found)

        def pre_tool_use(tool_name: str, args: Any) -> dict[str, Any] | None:
            command = args.get("command") if isinstance(args, dict) else None
            assessment = before_tool_call(
                self.usage,
                role.limits,
                tool_name=tool_name,
                command=command,
                elapsed=self.clock() - (self.batch_started or started),
            )
            self.usage = assessment.usage
            decision = assessment.decision
            if not decision.allow:
                self.denials += 1
                if self.denials % DENIALS_BEFORE_ABORT == 0:
                    # A model that keeps calling tools after the trip is cut off, not argued with.
                    self._stop()
                return {
                    "permissionDecision": "deny",
                    "permissionDecisionReason": decision.message or "denied",
                }
            refused = refuse_shell(command) if tool_name in breakers.SHELL_TOOLS else None
            if refused is not None:
                return {"permissionDecision": "deny", "permissionDecisionReason": refused}
            context = [*self.pending_context, *([decision.message] if decision.message else [])]
            self.pending_context.clear()
            if context:
                return {"permissionDecision": "allow", "additionalContext": "\n".join(context)}
            return None

        def on_turn() -> None:
            assessment = breakers.on_turn(self.usage, role.limits)
            self.usage = assessment.usage
            self._heed(assessment)

        self.batch_started = started
        watchdog = asyncio.ensure_future(self._watchdog(role))
        replies: list[str] = []
        try:
            replies = await self.runtime.turn(
                SessionRequest(
                    session_id=session_id,
                    resume=resume,
                    model=role.model,
                    provider=self.provider,
                    system_prompt=system_prompt(role, values),
                    prompt=prompt,
                    tools=offered,
                    host_tools=role.agent.host_tools,
                    pre_tool_use=pre_tool_use,
                    timeout_seconds=self.timeout_seconds,
                    working_directory=str(self.working_copy.path) if self.working_copy else None,
                    on_turn=on_turn,
                    # With a model gateway, what it counted is what the task used (a call from the
                    # shell too); the SDK's reports would count the CLI's calls twice.
                    on_usage=self._count_tokens if self.model_gateway is None else None,
                    stop=self.stop,
                    lost_prompt=self._lost_prompt(agent, prompt) if resume else None,
                ),
                then=lambda: self._follow_up(agent),
            )
        except Exception:
            if self.model_refused is None:
                raise
            # The CLI gave the session up on the refused call: the task ends as the refusal says.
            logger.warning("%s: the session ended on a refused model call", self.agent_id)
        finally:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
            self.active_seconds = max(0.0, (self.clock() - started).total_seconds())
        return await asyncio.to_thread(self._finish, agent, replies)

    def _first_prompt(
        self, agent: AgentRecord, role: ResolvedRole, values: dict[str, Any], *, resume: bool, found: str
    ) -> str:
        if agent.wake_reason is not None and resume:
            pending, self.seen = self.door.inbox_news()
            prompt = wake_prompt(
                role,
                values,
                reason=agent.wake_reason or "",
                events=vetted(
                    pending,
                    authors(self.agent_github(agent), self.config.config.bot_login),
                    self.config.config.trust.reads,
                ),
                resolved_blockers=resolved_blockers(pending),
            )
            self.told |= {item.key for item in pending}
        else:
            prompt = start_prompt(agent, self.facts)
            prompt = "\n\n".join(part for part in (*self._brief(agent), prompt) if part)
        return f"{prompt}\n\nYour working copy (the current directory): {found}" if found else prompt

    def _brief(self, agent: AgentRecord) -> tuple[str, str, str]:
        """The shared context, the memory and the artifacts a new session starts with (none if the door fails:
        the session is worth more than its brief)."""
        try:
            return self.door.brief(self.facts.title or agent.role)
        except Exception as exc:
            logger.warning("%s: no context or memory for its session: %s", agent.agent_id, exc)
            return "", "", ""

    async def _news(self) -> bool:
        """Whether news waits in the inbox (items the model was not told of yet, which it is now),
        lingering up to ``linger_seconds`` for some to come.

        It looks quickly at first, then less and less often (a lingering PM is a few gateway
        calls a minute, not one a second).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.linger_seconds
        polls = 0
        while True:
            # every page's items: the news prompt tells of the whole inbox, past its first page
            _, self.seen = await asyncio.to_thread(self.door.inbox_news)
            if any(key not in self.told for key in self.seen):
                self.told |= set(self.seen)
                return True
            remaining = deadline - loop.time()
            if remaining <= 0 or self.stop.is_set() or self.lease_lost:
                return False
            pause = NEWS_POLL_SECONDS[min(polls, len(NEWS_POLL_SECONDS) - 1)]
            polls += 1
            await asyncio.sleep(min(pause, remaining))

    def _lost_prompt(self, agent: AgentRecord, first: str) -> str:
        """The first prompt of a fresh session when the one to resume was never saved."""
        if agent.wake_reason is None:
            return f"{LOST_SESSION_NOTE}\n\n{first}"
        return f"{LOST_SESSION_NOTE}\n\n{start_prompt(agent, self.facts)}\n\nWhy you run now:\n{first}"

    def _finish(self, agent: AgentRecord, replies: list[str]) -> HostResult:
        """After the session: sleep, escalate or go idle, saving the work first."""
        if self.model_gateway is not None and self.config.config.issue_budget_usd is not None:
            self._issue_spend()  # the last calls' spend, for the issue's others until the end is routed
        ended = lifecycle.task_outcome(
            ending=self.state.ending,
            reason=self.state.reason,
            lease_lost=self.lease_lost,
            refused=self.model_refused,
        )
        saved = self._save_work(agent, ended.save_as) if ended.save_as is not None else ""
        return HostResult(ended.outcome, ended.detail, tuple(replies), saved)

    def _heed(self, assessment: breakers.Assessment) -> None:
        """A breaker verdict reached outside a tool call: warn at the next call, or stop the turn."""
        if assessment.decision.tripped_now is not None:
            self._stop()
        elif assessment.decision.allow and assessment.decision.message:
            self.pending_context.append(assessment.decision.message)

    async def _follow_up(self, agent: AgentRecord) -> str | None:
        """The prompt after the model's turn ended: a summary when a breaker tripped, the news that
        came meanwhile, or None to end the session."""
        decided = lifecycle.after_turn(
            ending=self.state.ending,
            reason=self.state.reason,
            lease_lost=self.lease_lost,
            tripped=self.usage.tripped,
            trip_reason=self.usage.trip_reason or "",
            refused=self.model_refused,
        )
        self.state.ending, self.state.reason = decided.ending, decided.reason
        if decided.step == lifecycle.SUMMARIZE:
            self.stop.clear()  # the summary turn runs (tools stay denied)
            return SUMMARY_PROMPT.format(reason=self.state.reason)
        if decided.step == lifecycle.CHECK_NEWS and await self._news():
            # News arrived while this task ran (the router only wakes agents without a task).
            self.state.ending = None
            if self.linger_seconds > 0:
                self._new_batch()
            return NEWS_PROMPT
        return None

    def _new_batch(self) -> None:
        """Start a new batch of work: its own budget; what the last one used is kept in the totals."""
        self.spent = self.total_usage
        self.usage = Usage()
        self.batch_started = self.clock()
        with self._tokens_lock:  # the model calls its turns allow, counted afresh (the cost is not)
            self.model_calls, self._calls_at_trip = 0, None

    async def _watchdog(self, role: ResolvedRole) -> None:
        """While the session works: renew the lease (the heartbeat) and check the active-time breaker."""
        interval = self.watchdog_seconds or float(self.config.config.runtime.heartbeat_interval)
        while True:
            await asyncio.sleep(interval)
            now = self.clock()
            started = self.batch_started or now
            assessment = breakers.on_timer(self.usage, role.limits, elapsed=now - started)
            self.usage = assessment.usage
            self._heed(assessment)
            try:
                await asyncio.to_thread(self.door.heartbeat)
            except LaunchRefusedError as exc:
                # Another task holds the agent now (this one was presumed dead), or the launch
                # was replaced or ended: stop touching it.
                logger.error("%s: %s; stopping", self.agent_id, exc)
                self.lease_lost = True
                self.stop.set()
                return
            except Exception:  # a missed beat is retried at the next one; the lease outlives a few
                logger.exception("%s: heartbeat failed", self.agent_id)

    def _prepare_working_copy(self, agent: AgentRecord) -> str:
        """Check out the agent's branch (dev) or its PR's head (review); what it found, in words."""
        wc = self.working_copy
        if wc is None:
            return ""
        try:
            if agent.kind is RoleKind.DEV and agent.branch:
                return wc.prepare(agent.branch, self.facts.base_branch)
            if agent.kind is RoleKind.REVIEW and agent.pr_number is not None:
                stranger, reads = self.facts.head_author, self.config.config.trust.reads
                return wc.prepare_review(
                    f"refs/pull/{agent.pr_number}/head",
                    self.facts.head_sha,
                    base=self.facts.base_branch,
                    squash=None
                    if stranger is None
                    else lambda log: pull_request_history(log, stranger, reads),
                )
        except GitError as exc:
            logger.error("%s: working copy not prepared: %s", agent.agent_id, exc)
            return f"it could not be prepared ({exc}); say so with escalate_to_human if you need it."
        return ""

    def _save_work(self, agent: AgentRecord, message: str) -> str:
        """Commit and push a dev agent's work in progress before its task ends."""
        if self.working_copy is None or agent.kind is not RoleKind.DEV or not agent.branch:
            return ""
        saved = self.working_copy.save(self.agent_github(agent).caller, agent.branch, message[:200])
        logger.info("%s: %s", agent.agent_id, saved)
        return saved
