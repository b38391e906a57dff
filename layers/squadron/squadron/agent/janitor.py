"""The janitor's pass of an agent task: finished agents' state leaves the shared volume.

Disk grows only while tasks run, so every agent task sweeps once it holds its own lease and
before its own session (:class:`~squadron.agent.host.AgentHost`): through the gateway it claims
a bounded page of finished agents whose state is past the stage's retention
(:mod:`squadron.domain.retention`), moves each one's directory and the framework's clone of it
into the volume's trash (:func:`~squadron.adapters.confinement.retire`: a rename, never through
a link), and reports them purged. The trash is emptied afterwards, while the agent works.

A path that is not safe to touch (a link, not a directory) is left as found and logged; its
claim lapses and a later pass meets it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from squadron.adapters import confinement
from squadron.adapters.confinement import ConfinementError

logger = logging.getLogger(__name__)


class JanitorDoor(Protocol):
    """The two gateway calls of a pass (the host's :class:`~squadron.agent.door.Door`)."""

    agent_id: str

    def purge_claim(self) -> list[str]: ...
    def purged(self, agent_ids: list[str]) -> list[str]: ...


@dataclass(frozen=True)
class Sweep:
    """What one pass did."""

    claimed: tuple[str, ...] = ()
    #: Moved into the trash, or gone already: reported purged.
    removed: tuple[str, ...] = ()
    #: Left as found (not safe to touch, or the volume failed); not reported.
    refused: tuple[str, ...] = ()
    #: What the gateway recorded purged (those of ``removed`` still claimed by this task).
    recorded: tuple[str, ...] = ()


def sweep(door: JanitorDoor, root: Path) -> Sweep:
    """Claim the due agents, move their state out of the agents' tree, report what is gone."""
    claimed = door.purge_claim()
    removed: list[str] = []
    refused: list[str] = []
    for agent_id in claimed:
        try:
            moved = confinement.retire(root, agent_id)
        except (ConfinementError, OSError) as exc:
            logger.error("%s: the state of %s is left as found: %s", door.agent_id, agent_id, exc)
            refused.append(agent_id)
            continue
        removed.append(agent_id)
        logger.info(
            "%s: the state of %s leaves the volume (%s)",
            door.agent_id,
            agent_id,
            ", ".join(moved) or "gone already",
        )
    recorded = door.purged(removed) if removed else []
    return Sweep(tuple(claimed), tuple(removed), tuple(refused), tuple(recorded))
