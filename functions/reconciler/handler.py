"""Reconciler Lambda (EventBridge, every five minutes): heal what the webhooks missed.

Replays onto events.fifo the webhooks GitHub's current state implies but the
registry never saw, sends the router RecoverAgent commands for dead tasks and
overdue sleepers, and asks GitHub to redeliver failed deliveries. A run that
fails raises (EventBridge's asynchronous invoke retries it; the next tick runs
anyway): every repair is idempotent.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.shell.reconciler import ReconcilerService
from squadron.shell.wiring import build_reconciler

logger = Logger()
metrics = Metrics()


@functools.cache
def service() -> ReconcilerService:
    return build_reconciler()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = service().run()
    metrics.add_metric(name="ReconcilerReplays", unit=MetricUnit.Count, value=len(report.replayed))
    metrics.add_metric(name="ReconcilerRescues", unit=MetricUnit.Count, value=len(report.rescued))
    metrics.add_metric(name="ReconcilerTimeouts", unit=MetricUnit.Count, value=len(report.timed_out))
    metrics.add_metric(name="ReconcilerRedeliveries", unit=MetricUnit.Count, value=len(report.redelivered))
    metrics.add_metric(name="ReconcilerProblems", unit=MetricUnit.Count, value=len(report.problems))
    metrics.add_metric(name="ReconcilerGitHubReads", unit=MetricUnit.Count, value=report.reads)
    summary = {
        "repositories": report.repositories,
        "agents": report.agents,
        "reads": report.reads,
        "replayed": report.replayed,
        "rescued": report.rescued,
        "timed_out": report.timed_out,
        "redelivered": report.redelivered,
        "problems": report.problems,
    }
    logger.info("reconciled", extra=summary)
    return summary
