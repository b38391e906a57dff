"""A repository whose configuration is invalid is *paused* — pure.

Its events are still routed (with its last valid policy, or the documented defaults
if it never had one), but only what starts nothing is carried out:

- **kept**: facts about GitHub (issue states, assignments, reviews), items for an
  agent's inbox (read when it next runs), writes that leave an agent no more awake
  than it was (its task ended, it sleeps, it is escalated, completed or cancelled),
  stopping tasks, and the framework's words to humans (labels, comments, needs-human
  issues);
- **withheld**: launching a task, creating an agent or a new generation of one,
  waking one, starting a pipeline's run, approving a change set (its work would start), and judging or merging a pull request (a policy nobody can read now
  merges nothing); a blocker or link whose agent write would wake it is withheld
  whole, since the reconciler replays what it implies once the repository resumes.

The router does not record a paused delivery as routed, so its replay after the
configuration is fixed is routed in full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.domain.effects import (
    AddBlocker,
    AgentWrite,
    ApproveChangeSet,
    Discard,
    Effect,
    EvaluateMerge,
    LaunchAgent,
    LinkPullRequest,
    PutAgent,
    RemoveBlocker,
    StartPipelineRun,
    SteerPipelineRuns,
)


def quiet_write(write: AgentWrite, before: Mapping[str, AgentRecord]) -> bool:
    """Whether ``write`` leaves its agent no more awake than it was (no creation, no new
    generation, no launch decided, no wake)."""
    record = write.record
    prior = before.get(record.agent_id)
    if prior is None or write.expected_version is None or record.generation != prior.generation:
        return False
    if record.pending_launch is not None:
        return False
    return not (record.status is AgentStatus.ACTIVE and prior.status is not AgentStatus.ACTIVE)


def withheld(effect: Effect, before: Mapping[str, AgentRecord]) -> bool:
    """Whether a paused repository must not carry ``effect`` out."""
    if isinstance(
        effect, LaunchAgent | EvaluateMerge | StartPipelineRun | SteerPipelineRuns | ApproveChangeSet
    ):
        return True
    if isinstance(effect, PutAgent):
        return not quiet_write(effect.write, before)
    if isinstance(effect, AddBlocker | RemoveBlocker | LinkPullRequest) and effect.agent is not None:
        return not quiet_write(effect.agent, before)
    return False


def hold_while_paused(effects: list[Effect], before: Iterable[AgentRecord], reason: str) -> list[Effect]:
    """``effects`` without what a paused repository withholds, and a Discard saying what was."""
    agents = {agent.agent_id: agent for agent in before}
    kept = [effect for effect in effects if not withheld(effect, agents)]
    held = Counter(type(effect).__name__ for effect in effects if withheld(effect, agents))
    if held:
        what = ", ".join(f"{name} x{count}" if count > 1 else name for name, count in sorted(held.items()))
        kept.append(Discard(f"paused: {reason}; withheld {what}"))
    return kept
