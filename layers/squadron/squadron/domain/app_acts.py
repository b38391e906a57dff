"""What the App itself did, as an inbound message tells it — one typed family — pure.

The App acts in three ways, and routing must know which, since none of them is a person's input:

- :class:`AgentReported`: an agent's task did something on GitHub through the agent gateway
  (opened an issue, assigned one, opened a pull request, pushed, reviewed, posted a status) or
  sent a command of its own (a blocker, how its task ended). The gateway stamps the verified
  agent; the router handles the act like the webhook GitHub would have sent for it
  (:func:`squadron.domain.routing.normalize.as_webhook`), the App as its sender.
- :class:`FrameworkCommand`: the framework's own command (the reconciler's recovery, a blocker
  the router files, a retrospective's schedule).
- :class:`OwnWebhook`: GitHub's copy of an act of the App (its sender is the App's bot login).
  The ingress drops these (:func:`squadron.domain.routed.performed_by_app`); one that got through
  never acts (the authority rule's ``own-webhook``), so nothing loops.

:func:`app_act` is the one place that tells them apart; routing asks it rather than reading an
envelope's ``origin`` or comparing its sender with the App's login.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.events import EventEnvelope


def is_app(login: str, bot_login: str) -> bool:
    """Whether ``login`` is the App's bot login (GitHub logins are case-insensitive)."""
    return login.casefold() == bot_login.casefold()


class _Act(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentReported(_Act):
    """An agent's task reported the App's act (through the agent gateway, which verified it)."""

    kind: Literal["agent_reported"] = "agent_reported"
    #: The verified agent (None: an envelope without it, which routing refuses).
    agent_id: str | None
    #: The issue that agent works for (None: the PM, or an id that is no agent's).
    issue_number: int | None = None


class FrameworkCommand(_Act):
    """The framework's own command."""

    kind: Literal["framework"] = "framework"


class OwnWebhook(_Act):
    """GitHub's webhook of the App's own act (its sender is the App)."""

    kind: Literal["own_webhook"] = "own_webhook"
    login: str


AppAct = Annotated[AgentReported | FrameworkCommand | OwnWebhook, Field(discriminator="kind")]


def app_act(inbound: EventEnvelope, bot_login: str) -> AppAct | None:
    """What the App did, as ``inbound`` tells it; None when it is no act of the App (a person's
    or another bot's webhook, or the reconciler's replay of one)."""
    if inbound.origin == "squadron":
        return FrameworkCommand()
    if inbound.origin == "agent":
        return AgentReported(agent_id=inbound.source_agent, issue_number=_agent_issue(inbound.source_agent))
    if is_app(inbound.sender.login, bot_login):
        return OwnWebhook(login=inbound.sender.login)
    return None


def _agent_issue(agent_id: str | None) -> int | None:
    # Imported here: agents -> trust -> authority -> this module would be a cycle at import time.
    from squadron.domain.agents import RegistryError, parse_agent_id  # noqa: PLC0415

    try:
        _, number, _ = parse_agent_id(agent_id or "")
    except RegistryError:
        return None
    return number
