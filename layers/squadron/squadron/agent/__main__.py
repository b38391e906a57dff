"""``python -m squadron.agent``: the entry point of an agent task (the container's command).

Logs are JSON lines (Powertools' formatter, as the Lambdas write them) carrying the agent's
id, its issue and the launch: ``correlation_id`` is the delivery that launched the task, so
one query over the stack's log groups follows a webhook from the ingress to the agent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import sys
from pathlib import Path

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from squadron.agent.wiring import build_host
from squadron.domain.agents import RegistryError, parse_agent_id
from squadron.domain.launches import SECRET_ENV, LaunchRefusedError
from squadron.settings import MODEL_KEY_ENV


def configure_logging(environ: dict[str, str] | os._Environ[str]) -> LambdaPowertoolsFormatter:
    """JSON logs on stdout for every logger of the task, keyed by agent, issue and launch."""
    formatter = LambdaPowertoolsFormatter(service="agent")
    agent_id = environ.get("SQUADRON_AGENT_ID", "")
    keys: dict[str, object] = {"agent_id": agent_id, "launch": environ.get("SQUADRON_LAUNCH_TOKEN")}
    try:
        _, issue, role = parse_agent_id(agent_id)
        keys.update(issue=issue, role=role)
    except RegistryError:
        pass  # the settings name the problem when the host is built
    formatter.append_keys(**keys)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    for chatty in ("botocore", "boto3", "httpx", "urllib3"):  # a line per request or credential lookup
        logging.getLogger(chatty).setLevel(logging.WARNING)
    return formatter


def main() -> int:
    formatter = configure_logging(os.environ)
    log = logging.getLogger("squadron.agent")
    environ = dict(os.environ)
    # Only the host's own copy keeps the launch secret: no process it starts inherits it.
    os.environ.pop(SECRET_ENV, None)
    os.environ.pop(MODEL_KEY_ENV, None)  # the local stack's model key: the model gateway's alone
    try:
        host = build_host(environ)
    except LaunchRefusedError as exc:
        # Replaced, ended or expired before it began: another task (or nobody) does the work.
        log.info("the agent task ended before it began: %s", exc, extra={"code": exc.code})
        return 0
    except Exception:
        log.exception("the agent task failed")
        return 1
    try:
        formatter.append_keys(correlation_id=host.launch_cause)
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
    # How long its session took to open, and the peak RSS of this host and of the largest child
    # it reaped (the Copilot CLI, reaped when its client stopped), in MiB: read by the benchmarks.
    # The host's own is VmHWM: ru_maxrss survives exec, so it would count the launcher's fork.
    mode, seconds = getattr(host.runtime, "session_start", None) or (None, None)
    try:
        status = Path("/proc/self/status").read_text(encoding="utf-8")
        host_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        host_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = {
        "host": round(host_kb / 1024, 1),
        "cli": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }
    log.info(
        "the agent task ended: %s",
        result.outcome,
        extra={
            "result": outcome,
            "session_start": {"mode": mode, "seconds": seconds},
            "peak_rss_mb": peak,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
