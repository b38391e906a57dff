"""Who is calling: every request is verified against the agent's record before anything is done
(:func:`squadron.domain.launches.verify_launch`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from squadron.domain.agents import AgentRecord
from squadron.domain.gateway_wire import TaskRequest
from squadron.domain.launches import verify_launch, verify_release

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway


def verified(gw: AgentGateway, request: TaskRequest, *, winding_down: bool = False) -> AgentRecord:
    return verify_launch(
        gw.registry.get_agent(request.agent_id),
        agent_id=request.agent_id,
        launch_token=request.launch_token,
        secret=request.secret.get_secret_value(),
        now=gw.clock(),
        winding_down=winding_down,
    )


def verified_release(gw: AgentGateway, request: TaskRequest) -> AgentRecord:
    """For ``release`` only: also the task of the launch the latest one replaced
    (:func:`squadron.domain.launches.verify_release`)."""
    return verify_release(
        gw.registry.get_agent(request.agent_id),
        agent_id=request.agent_id,
        launch_token=request.launch_token,
        secret=request.secret.get_secret_value(),
        now=gw.clock(),
    )
