"""An agent stage whose agent a person's event finished — pure (docs/pipelines.md, "Agent stages,
once"): which events may end agents, which agents a routing ended, and the answer their stage gets
(the run cancelled with why, never the agent's failure)."""

from __future__ import annotations

from collections.abc import Iterable

from squadron.domain.agents import TERMINAL, AgentRecord
from squadron.domain.effects import Effect, PutAgent
from squadron.domain.pipeline_wire import RUN_CANCELLED, StageFailed
from squadron.domain.pipelines.agent_stage import StageWait, forgotten_answer

#: Webhook events whose routing may end an issue's or a pull request's agents (the issue closed,
#: deleted, transferred or unassigned from the App; the pull request closed or merged).
ENDS_AGENTS = frozenset(
    {
        ("issues", "closed"),
        ("issues", "deleted"),
        ("issues", "transferred"),
        ("issues", "unassigned"),
        ("pull_request", "closed"),
    }
)


def ended_agents(effects: Iterable[Effect]) -> set[str]:
    """The agents a routing's ``effects`` finish (completed or cancelled)."""
    return {
        effect.write.record.agent_id
        for effect in effects
        if isinstance(effect, PutAgent) and effect.write.record.status in TERMINAL
    }


def ended_by_others_answer(wait: StageWait, agent: AgentRecord | None) -> StageFailed | None:
    """The answer when a person's event finished the stage's agent (:data:`ENDS_AGENTS`: its issue
    closed or unassigned, its pull request closed or merged): the run is cancelled with why
    (``Squadron.Cancelled``: every run's stages take it to the run's cancel end). It is no failure
    of the agent's, so neither ``on_error``'s retries (which
    would put an agent to work again on the closed issue) nor its ``then`` apply. An agent gone or
    of another generation is :func:`forgotten_answer`'s; one still live, None."""
    if agent is None or agent.generation != wait.generation or agent.status not in TERMINAL:
        return forgotten_answer(wait, agent)
    return StageFailed.of(
        RUN_CANCELLED,
        f"agent stage {wait.stage!r}: agent {wait.agent_id} was ended before it completed the stage "
        f"({agent.status}: {agent.end_reason or 'no reason'}), so the run is cancelled",
    )
