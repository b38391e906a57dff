"""What an agent, an issue and an issue tree cost: tokens per model and task time, priced.

Each agent's counters hold the tokens every model read and wrote over its life (as the Copilot
SDK reports each model call) and its tasks' active seconds. A :class:`PriceTable` prices them:
per model, US dollars per million input and output tokens (a model matched exactly, else by the
longest ``prefix*`` entry), and the agent task's time per hour. A model the table does not know
is counted as unpriced (named, never silently free). An issue costs what its agents cost; an
issue tree adds the issues that block it, as far as the blocker graph goes.

The default table holds the providers' published API list prices (USD, November 2026) and the
agent task's price on Fargate (bench/cost.py: ``agent_hour_usd``); models served through
Copilot are billed by premium requests instead, so for them the figure is what the same tokens
would cost at the provider's list price. A repository's configuration may replace the table
(``pricing`` in ``.squadron/config.yaml``) and set what one issue may cost (``issue_budget_usd``,
enforced by the router when each task ends and by the task's model gateway before each model call,
both with :mod:`squadron.domain.issue_budget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.agents import AgentRecord
from squadron.domain.usage import ModelTokens


class ModelPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input_usd_per_million: float = Field(ge=0, le=10_000)
    output_usd_per_million: float = Field(ge=0, le=10_000)


class PriceTable(BaseModel):
    """Prices of model tokens and of agent task time (see the module's docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[str, ModelPrice] = Field(default_factory=dict, max_length=200)
    task_usd_per_hour: float = Field(default=0.0634, ge=0, le=1_000)

    def price_of(self, model: str) -> ModelPrice | None:
        found = self.models.get(model)
        if found is not None:
            return found
        prefixes = [key for key in self.models if key.endswith("*") and model.startswith(key[:-1])]
        return self.models[max(prefixes, key=len)] if prefixes else None


DEFAULT_PRICES = PriceTable(
    models={
        "claude-sonnet-4*": ModelPrice(input_usd_per_million=3.0, output_usd_per_million=15.0),
        "claude-opus-4*": ModelPrice(input_usd_per_million=15.0, output_usd_per_million=75.0),
        "claude-haiku-4*": ModelPrice(input_usd_per_million=1.0, output_usd_per_million=5.0),
        "gpt-5*": ModelPrice(input_usd_per_million=1.25, output_usd_per_million=10.0),
        "gpt-4.1*": ModelPrice(input_usd_per_million=2.0, output_usd_per_million=8.0),
        "gpt-4o*": ModelPrice(input_usd_per_million=2.5, output_usd_per_million=10.0),
        "gemini-2.5-pro*": ModelPrice(input_usd_per_million=1.25, output_usd_per_million=10.0),
    }
)


@dataclass(frozen=True)
class Cost:
    """USD for model tokens and for task time, and the models no price was found for."""

    tokens_usd: float = 0.0
    task_usd: float = 0.0
    unpriced: frozenset[str] = field(default_factory=frozenset)

    @property
    def total_usd(self) -> float:
        return self.tokens_usd + self.task_usd

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.tokens_usd + other.tokens_usd, self.task_usd + other.task_usd, self.unpriced | other.unpriced
        )


def cost_of(tokens: Iterable[ModelTokens], active_seconds: int, prices: PriceTable = DEFAULT_PRICES) -> Cost:
    """What ``tokens`` and ``active_seconds`` of task time cost at ``prices``."""
    usd = 0.0
    unpriced: set[str] = set()
    for entry in tokens:
        price = prices.price_of(entry.model)
        if price is None:
            if entry.input_tokens or entry.output_tokens:
                unpriced.add(entry.model)
            continue
        usd += entry.input_tokens / 1e6 * price.input_usd_per_million
        usd += entry.output_tokens / 1e6 * price.output_usd_per_million
    return Cost(usd, active_seconds / 3600 * prices.task_usd_per_hour, frozenset(unpriced))


def tree_cost(issue: int, per_issue: Mapping[int, Cost], blocked_by: Mapping[int, Iterable[int]]) -> Cost:
    """``issue``'s cost with every issue that blocks it, directly or through others (each once)."""
    seen: set[int] = set()
    stack = [issue]
    total = Cost()
    while stack:
        number = stack.pop()
        if number in seen:
            continue
        seen.add(number)
        total = total + per_issue.get(number, Cost())
        stack.extend(blocked_by.get(number, ()))
    return total


def agent_cost(agent: AgentRecord, prices: PriceTable = DEFAULT_PRICES) -> Cost:
    """What one agent has cost over its life: its tokens and its tasks' active time."""
    return cost_of(agent.counters.tokens, agent.counters.active_seconds, prices)


def issue_costs(
    agents: Iterable[AgentRecord], prices: PriceTable = DEFAULT_PRICES
) -> dict[int, tuple[Cost, Cost]]:
    """Per issue of one repository's ``agents``: what its agents cost (a reviewer's counts for the
    issue its pull request serves), and with the issues blocking it.

    The tree follows the blockers the agents' records name (the open ones: a closed blocker
    drops out of a record, so a finished tree counts its issues only while they block).
    """
    per_issue: dict[int, Cost] = {}
    blocked_by: dict[int, set[int]] = {}
    for agent in agents:
        number = agent.costed_issue
        if number is None:
            continue
        per_issue[number] = per_issue.get(number, Cost()) + agent_cost(agent, prices)
        blocked_by.setdefault(number, set()).update(agent.blocked_by)
    return {n: (c, tree_cost(n, per_issue, blocked_by)) for n, c in sorted(per_issue.items())}


def usd(amount: float) -> str:
    """A dollar amount as people read it: cents, and fractions of a cent when it is that small."""
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"
