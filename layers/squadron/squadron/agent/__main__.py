"""``python -m squadron.agent``: the entry point of an agent task (the container's command)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from squadron.agent.wiring import build_host


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    log = logging.getLogger("squadron.agent")
    try:
        host = build_host()
        result = asyncio.run(host.run())
    except Exception:
        log.exception("the agent task failed")
        return 1
    outcome = {
        "agent_id": host.agent_id,
        "outcome": result.outcome,
        "detail": result.detail,
        "saved": result.saved,
    }
    log.info(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
