"""The janitor: ``purge_claim`` (finished agents past the retention, claimed) and ``purged``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from squadron.domain.agents import TERMINAL, AgentRecord, ConflictError
from squadron.domain.effects import AgentWrite
from squadron.domain.gateway_wire import PurgeClaim, PurgeClaimAnswer, Purged, PurgedAnswer
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.retention import PURGE_PAGE, PURGE_WINDOW, claim, purge_due, purge_owner, purged
from squadron.shell.conditional import read_change_put
from squadron.shell.gateway.protocol import Answer, Handler
from squadron.shell.gateway.verify import verified

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway

logger = logging.getLogger(__name__)


def _purge_claim(gw: AgentGateway, request: PurgeClaim) -> Answer:
    """Claim the janitor's page of finished agents past the retention; their ids only."""
    agent = verified(gw, request)
    now = gw.clock()
    if agent.lease_owner != request.launch_token or not agent.lease_is_live(now):
        raise LaunchRefusedError(
            "forbidden", f"{agent.agent_id}'s task sweeps once it holds its own lease (begin first)"
        )
    owner = purge_owner(request.launch_token)
    claimed: list[str] = []
    for candidate in gw.registry.finished_agents(now - gw.state_retention, PURGE_WINDOW):
        if len(claimed) == PURGE_PAGE:
            break
        # A task mounts only its own repository's root: another's state is not there to remove.
        if candidate.repo_id != agent.repo_id:
            continue
        if not purge_due(candidate, now=now, retention=gw.state_retention):
            continue
        try:  # on the version read: a restart or another janitor since then wins
            gw.registry.put_agent(AgentWrite(claim(candidate, owner, now), candidate.version))
        except ConflictError:
            continue
        claimed.append(candidate.agent_id)
    if claimed:
        logger.info("%s claims the state of %s for removal", agent.agent_id, ", ".join(claimed))
    return Answer(PurgeClaimAnswer(agents=claimed))


def _purged(gw: AgentGateway, request: Purged) -> Answer:
    """Record ``purged_at`` on the agents this task claimed (each once); an agent restarted
    since its claim only loses the claim (its new generation starts from nothing)."""
    verified(gw, request, winding_down=True)
    owner = purge_owner(request.launch_token)
    recorded: list[str] = []
    for agent_id in dict.fromkeys(request.agents):
        if _purge(gw, agent_id, owner):
            recorded.append(agent_id)
    return Answer(PurgedAnswer(purged=recorded))


def _purge(gw: AgentGateway, agent_id: str, owner: str) -> bool:
    """Record ``agent_id`` purged if it is still ``owner``'s claim and finished (whether it was);
    an agent restarted since its claim only loses the claim."""

    def record(current: AgentRecord | None) -> AgentRecord | None:
        if current is None or current.lease_owner != owner:
            return None  # not this task's claim (never, or lapsed and taken since): nothing to record
        return purged(current, gw.clock()) if current.status in TERMINAL else None

    def put(current: AgentRecord | None, done: AgentRecord) -> None:
        assert current is not None  # record() made ``done`` of it
        gw.registry.put_agent(AgentWrite(done, current.version))

    try:  # changed under the claim (a restart keeps it): read again
        done = read_change_put(lambda: gw.registry.get_agent(agent_id), record, put)
    except ConflictError:
        return False
    current = done.read
    if done.written is None and current is not None and current.lease_owner == owner:
        gw.registry.release_lease(agent_id, owner, gw.clock())  # restarted since the claim
    return done.written is not None


#: The janitor's two calls (:mod:`squadron.agent.janitor`).
OPS: dict[str, Handler] = {"purge_claim": _purge_claim, "purged": _purged}
