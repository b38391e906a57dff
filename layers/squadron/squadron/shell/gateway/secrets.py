"""The gateway's secret scan of what an agent says: refused when a write or a fact carries one,
withheld from how a task ended (the router posts those words)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from squadron.domain.agents import AgentRecord
from squadron.domain.gateway_wire import Ended
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.threats import refusal, withheld_words, write_texts

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway

logger = logging.getLogger(__name__)


def refuse_secrets(
    gw: AgentGateway, agent: AgentRecord, action: str, texts: Iterable[tuple[str, str | None]]
) -> None:
    """Refused (``secret_found``, counted) when one of the named ``texts`` carries a secret: the
    agent hears its kind and place, never its value, and nothing is written."""
    findings = gw.scan(write_texts(texts))
    if findings:
        logger.warning(
            "%s: %s refused, secrets found: %s",
            agent.agent_id,
            action,
            ", ".join(f.said() for f in findings),
        )
        raise LaunchRefusedError("secret_found", f"not written: {refusal(findings)}")


def ended_unleaked(gw: AgentGateway, agent: AgentRecord, message: Ended) -> Ended:
    """How the task ended, its words withheld where they carry a secret (the router posts the
    summary and the reason when it hands the issue to humans): the task is escalated, the
    humans told the kind and place of what was found, never its value."""
    fields = {"reason": message.reason, "summary": message.summary, "saved": message.saved}
    outputs = {f"outputs.{key}": value for key, value in message.outputs.items()}
    findings = gw.scan(write_texts([*fields.items(), *outputs.items()]))
    if not findings:
        return message
    logger.warning(
        "%s: its task's last words withheld, secrets found: %s",
        agent.agent_id,
        ", ".join(f.said() for f in findings),
    )
    leaked = {f.field for f in findings}
    kept = {name: "" if name in leaked else text for name, text in fields.items()}
    reason = withheld_words(findings)
    if kept["reason"]:
        reason = f"{kept['reason']}; {reason}"
    return message.model_copy(
        update={**kept, "reason": reason[:4_000], "outcome": "escalated", "outputs": {}}
    )
