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

What the App made on GitHub is told apart here too, so that each such check has one home:
:func:`is_app` (a login is the App's bot), :func:`own_pull_request` (a pull request the App
opened from a branch of the repository), :func:`is_dashboard` (the App's dashboard issue),
:func:`enqueued_by_app` (a merge queue entry the App queued) and :func:`merged_by_app` (a pull
request the App merged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.events import EventEnvelope

#: The label the App's dashboard issue carries (:mod:`squadron.domain.dashboard` renders it).
DASHBOARD_LABEL = "squadron-dashboard"


def is_app(login: str, bot_login: str) -> bool:
    """Whether ``login`` is the App's bot login (GitHub logins are case-insensitive)."""
    return login.casefold() == bot_login.casefold()


def own_pull_request(event: EventEnvelope, bot_login: str) -> bool:
    """The event's pull request is the App's own, from a branch of this repository (not a fork)."""
    pr = event.pull_request
    return (
        pr is not None
        and pr.author is not None
        and is_app(pr.author, bot_login)
        and pr.head_repo_full_name is not None
        and pr.head_repo_full_name.casefold() == event.repository.full_name.casefold()
    )


def is_dashboard(labels: Iterable[str], author: str | None, bot_login: str) -> bool:
    """Whether an issue is a dashboard: the App opened it and it carries the dashboard's label."""
    return author == bot_login and DASHBOARD_LABEL in labels


def enqueued_by_app(entry: Mapping[str, Any], bot_login: str) -> bool:
    """Whether the App put this merge queue entry there: its enqueuer is the App's bot.

    GraphQL names a GitHub App's bot by its slug (no ``[bot]``) and types it ``Bot``; a person
    whose login is the slug is a ``User``, never the App."""
    enqueuer = entry.get("enqueuer")
    if not isinstance(enqueuer, Mapping) or enqueuer.get("__typename") != "Bot":
        return False
    login = str(enqueuer.get("login") or "").casefold()
    return bool(login) and login.removesuffix("[bot]") == bot_login.casefold().removesuffix("[bot]")


def merged_by_app(pr: Mapping[str, Any], bot_login: str) -> bool:
    """Whether GitHub's pull request (REST) shows it merged, by the App."""
    by = str((pr.get("merged_by") or {}).get("login") or "")
    return bool(pr.get("merged")) and is_app(by, bot_login)


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
