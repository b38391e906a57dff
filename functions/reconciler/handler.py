"""Reconciler Lambda (EventBridge, every five minutes): heal what the webhooks missed.

Replays onto events.fifo the webhooks GitHub's current state implies but the
registry never saw, sends the router RecoverAgent commands for dead tasks and
overdue sleepers, and asks GitHub to redeliver failed deliveries. A run that
fails raises (EventBridge's asynchronous invoke retries it; the next tick runs
anyway): every repair is idempotent. A stack deployed before its GitHub App exists has
nothing to reconcile: each run says so in one line and counts as a run (nothing is wrong yet).
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.adapters.metrics import EmfMetrics
from squadron.domain.metrics import github_points, reconcile_points
from squadron.settings import AppNotConfiguredError
from squadron.shell import wiring
from squadron.shell.reconciler import ReconcilerService

logger = Logger()
metrics = Metrics()
published = EmfMetrics(metrics)


@functools.cache
def service() -> ReconcilerService:
    return wiring.build_reconciler()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        reconciler = service()
    except AppNotConfiguredError as exc:
        logger.info("nothing to reconcile", extra={"skipped": str(exc)})
        published.publish(reconcile_points(repairs={}, problems=0, by_status={}, silent=0))
        return {"skipped": str(exc)}
    try:
        report = reconciler.run()
    finally:
        published.publish(github_points(wiring.github_calls.drain()))
    published.publish(
        reconcile_points(
            repairs=report.repairs(),
            problems=len(report.problems),
            by_status=report.by_status,
            silent=len(report.relaunched),
        )
    )
    summary = {
        "repositories": report.repositories,
        "agents": report.agents,
        "by_status": report.by_status,
        "reads": report.reads,
        "replayed": report.replayed,
        "rescued": report.rescued,
        "timed_out": report.timed_out,
        "redelivered": report.redelivered,
        "pipelines": report.pipelines,
        "problems": report.problems,
    }
    logger.info("reconciled", extra=summary)
    return summary
