"""What an agent's task spends on its model: counted, priced, admitted against the budgets, reported.

The host's model gateway (:mod:`squadron.adapters.model_gateway`) asks :meth:`ModelSpending._admit_model_call`
before each call it forwards (the breakers' model calls, the issue's budget with every agent of the issue
counted through the agent gateway's ``issue_spend``) and reports each call's tokens to
:meth:`ModelSpending._count_tokens`; the task's end and its metrics carry what was counted. Mixed into
:class:`squadron.agent.host.AgentHost`, whose state (its door, configuration, role, breaker usage and
active time) it reads; docs/security.md says what the budget guarantees.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from squadron.domain import model_calls
from squadron.domain.breakers import Usage
from squadron.domain.commands import TaskUsage
from squadron.domain.cost import Cost, cost_of
from squadron.domain.metrics import agent_task_points, github_points
from squadron.domain.usage import ModelTokens, add_tokens

if TYPE_CHECKING:
    from collections.abc import Callable

    from squadron.adapters.copilot import CopilotRuntime
    from squadron.adapters.model_gateway import ModelGateway
    from squadron.agent.door import Door
    from squadron.config.parse import ResolvedRole, SquadronConfig
    from squadron.domain.metrics import GitHubTraffic

#: The host's logger: the task's log reads as before the split.
logger = logging.getLogger("squadron.agent.host")


class ModelSpending:
    """The task's model spend (tokens per model, the calls admitted) and the budgets it is held to."""

    # What the host provides.
    agent_id: str
    door: Door
    config: SquadronConfig
    runtime: CopilotRuntime
    agent_role: ResolvedRole | None
    usage: Usage
    spent: Usage
    active_seconds: float
    github_traffic: Callable[[], GitHubTraffic] | None
    #: Aborts the prompt in flight (a refusal for good ends the session).
    _stop: Callable[[], None]

    def _init_spending(self, model_gateway: ModelGateway | None) -> None:
        #: Tokens per model over the whole task, as the model gateway counted each call (the SDK's
        #: reports for a role served by Copilot).
        self.tokens: dict[str, tuple[int, int]] = {}
        self._tokens_lock = threading.Lock()
        #: Model calls the gateway let through, and their number when a breaker tripped.
        self.model_calls = 0
        self._calls_at_trip: int | None = None
        #: What the agent cost before this task (its record's counters, priced), for the issue's budget.
        self._cost_before: Cost | None = None
        #: Why the model gateway refused a call for good (the issue's budget spent, the calls the
        #: breakers allow made): the session stops and the task ends escalated with it.
        self.model_refused: str | None = None
        #: One report of this task's spend to the agent gateway at a time (they land in order).
        self._report_lock = threading.Lock()
        if model_gateway is not None:
            model_gateway.admit = self._admit_model_call
            model_gateway.count = self._count_tokens

    @property
    def total_usage(self) -> Usage:
        """What the whole task used (every batch), with the current batch's trip if any."""
        return replace(
            self.usage,
            tool_calls=self.spent.tool_calls + self.usage.tool_calls,
            turns=self.spent.turns + self.usage.turns,
            iterations=self.spent.iterations + self.usage.iterations,
            warned=self.spent.warned | self.usage.warned,
        )

    def _publish(self, outcome: str) -> None:
        mode, seconds = getattr(self.runtime, "session_start", None) or (None, None)
        points = agent_task_points(
            outcome=outcome,
            tool_calls=self.total_usage.tool_calls,
            turns=self.total_usage.turns,
            active_seconds=self.active_seconds,
            tripped=self.usage.tripped.value if self.usage.tripped is not None else None,
            session_mode=mode,
            session_seconds=seconds,
            input_tokens=sum(i for i, _ in self.tokens.values()),
            output_tokens=sum(o for _, o in self.tokens.values()),
            cost_usd=self._cost().total_usd,
        )
        if self.github_traffic is not None:
            points += github_points(self.github_traffic())
        try:
            self.door.publish(points)
        except Exception as exc:  # metrics are not worth failing the task over: say so and go on
            logger.warning("%s: metrics not published: %s", self.agent_id, exc)

    def _task_usage(self) -> TaskUsage:
        """What the whole task used, as its end reports it."""
        used = self.total_usage
        return TaskUsage(
            tool_calls=used.tool_calls,
            turns=used.turns,
            iterations=used.iterations,
            active_seconds=int(self.active_seconds),
            tokens=add_tokens(
                (),
                tuple(
                    ModelTokens(model=m, input_tokens=i, output_tokens=o) for m, (i, o) in self.tokens.items()
                ),
            ),
            warned=tuple(sorted(used.warned)),
            tripped=used.tripped,
        )

    def _cost(self) -> Cost:
        """What this task cost at the repository's prices (tokens and task time)."""
        spent = [ModelTokens(model=m, input_tokens=i, output_tokens=o) for m, (i, o) in self.tokens.items()]
        return cost_of(spent, int(self.active_seconds), self.config.config.pricing)

    def _count_tokens(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """One model call's tokens (called by the model gateway's threads, or the SDK's)."""
        name = model[:100] or "unknown"
        with self._tokens_lock:
            before = self.tokens.get(name, (0, 0))
            self.tokens[name] = (before[0] + input_tokens, before[1] + output_tokens)

    def _admit_model_call(self, model: str) -> str | None:
        """Whether the model gateway may forward one more call (None), or why not (the model sees it).

        Asked before the provider is called, for the CLI's calls and any other caller alike.
        """
        if self.agent_role is None or self._cost_before is None:
            return "the agent's task has not begun"
        others = Cost()
        if self.config.config.issue_budget_usd is not None:
            read = self._issue_spend()
            if isinstance(read, str):
                return read  # fail closed, but not for good: the door may answer the next call
            others = read
        with self._tokens_lock:
            self.model_calls += 1
            if self.usage.tripped is not None and self._calls_at_trip is None:
                self._calls_at_trip = self.model_calls - 1
            spent = others + self._cost_before + self._cost()
            refused = model_calls.budget_refusal(
                calls=self.model_calls,
                max_turns=self.agent_role.limits.max_turns,
                calls_since_trip=None
                if self._calls_at_trip is None
                else self.model_calls - 1 - self._calls_at_trip,
                spent_usd=spent.total_usd,
                budget_usd=self.config.config.issue_budget_usd,
            )
            if refused is not None:
                self.model_calls -= 1
                logger.warning("%s: a model call was refused: %s", self.agent_id, refused)
                if self.model_refused is None:
                    self.model_refused = refused
                    self._stop()  # no model call will pass: the session ends, the task escalates
            return refused

    def _issue_spend(self) -> Cost | str:
        """Report this task's spend through the agent gateway; what the issue's others have spent
        (recorded, and their running tasks' last reports), or why it could not be read."""
        with self._report_lock:
            with self._tokens_lock:
                tokens = tuple(
                    ModelTokens(model=m, input_tokens=i, output_tokens=o) for m, (i, o) in self.tokens.items()
                )
            try:
                answer = self.door.issue_spend(add_tokens((), tokens), int(self.active_seconds))
            except Exception as exc:
                logger.warning("%s: the issue's spend was not read: %s", self.agent_id, exc)
                return f"the issue's spend could not be read ({type(exc).__name__}); try again"
            return Cost(tokens_usd=answer.others_usd)
