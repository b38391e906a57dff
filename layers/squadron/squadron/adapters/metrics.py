"""Publishing metric points (squadron.domain.metrics) to CloudWatch.

Lambdas write the embedded metric format with Powertools: totals go to the handler's
``Metrics`` (flushed by ``log_metrics`` at the end of the invocation), each breakdown to an
``EphemeralMetrics`` flushed at once (its dimension set is its own). Both respect
``POWERTOOLS_METRICS_DISABLED``.

Agent tasks hold no CloudWatch rights (containment): a task hands its points to the agent
gateway when it ends, which writes them as EMF under the ``agent`` service
(:class:`ServiceEmfMetrics`). :class:`CloudWatchMetrics` (PutMetricData, the same
total-plus-breakdown shape) is for processes outside Lambda that may publish themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

import boto3
from aws_lambda_powertools.metrics import EphemeralMetrics, Metrics, MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from squadron.domain.metrics import MetricPoint

logger = logging.getLogger(__name__)

#: PutMetricData takes at most 1,000 data points per call.
MAX_DATA_PER_CALL = 1000


class EmfMetrics:
    """Points into a Lambda's Powertools ``Metrics`` (the totals) and EMF lines (breakdowns)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def publish(self, points: Iterable[MetricPoint]) -> None:
        if is_metrics_disabled():
            # Powertools would still keep them and print a full set (100 values) in spite of the
            # flag: a long-lived process (the local stack) would fill its terminal with them.
            return
        points = list(points)
        for point in points:
            self.metrics.add_metric(name=point.name, unit=MetricUnit(point.unit), value=point.value)
        broken_down = sorted((p for p in points if p.dimension is not None), key=_dimension_key)
        for dimension, group in groupby(broken_down, key=_dimension_key):
            emf = EphemeralMetrics(namespace=self.metrics.namespace, service=self.metrics.service)
            for point in group:
                emf.add_metric(name=point.name, unit=MetricUnit(point.unit), value=point.value)
            emf.add_dimension(name=dimension[0], value=dimension[1])
            emf.flush_metrics()


class ServiceEmfMetrics:
    """Points published as EMF under another service than the handler's own (flushed at once).

    The agent gateway publishes what agent tasks report under ``service=agent``, so the agents'
    metrics stay where the dashboard and alarms look for them.
    """

    def __init__(self, namespace: str | None, service: str) -> None:
        self.namespace = namespace
        self.service = service

    def publish(self, points: Iterable[MetricPoint]) -> None:
        if is_metrics_disabled():
            return
        points = list(points)
        if not points:
            return
        totals = EphemeralMetrics(namespace=self.namespace, service=self.service)
        for point in points:
            totals.add_metric(name=point.name, unit=MetricUnit(point.unit), value=point.value)
        totals.flush_metrics()
        broken_down = sorted((p for p in points if p.dimension is not None), key=_dimension_key)
        for dimension, group in groupby(broken_down, key=_dimension_key):
            emf = EphemeralMetrics(namespace=self.namespace, service=self.service)
            for point in group:
                emf.add_metric(name=point.name, unit=MetricUnit(point.unit), value=point.value)
            emf.add_dimension(name=dimension[0], value=dimension[1])
            emf.flush_metrics()


def _dimension_key(point: MetricPoint) -> tuple[str, str]:
    return point.dimension or ("", "")


class CloudWatchMetrics:
    """PutMetricData for processes outside Lambda (the agent host)."""

    def __init__(self, namespace: str, service: str, *, client: Any = None) -> None:
        self.namespace = namespace
        self.service = service
        self._client = client or boto3.client("cloudwatch")

    def publish(self, points: Iterable[MetricPoint], *, at: datetime | None = None) -> None:
        data = metric_data(points, service=self.service, at=at or datetime.now(UTC))
        for start in range(0, len(data), MAX_DATA_PER_CALL):
            self._client.put_metric_data(
                Namespace=self.namespace, MetricData=data[start : start + MAX_DATA_PER_CALL]
            )


def metric_data(points: Iterable[MetricPoint], *, service: str, at: datetime) -> list[dict[str, Any]]:
    """PutMetricData's MetricData for ``points``: each as a total and, if any, its breakdown."""
    data: list[dict[str, Any]] = []
    for point in points:
        dimension_sets: Sequence[list[dict[str, str]]] = [[{"Name": "service", "Value": service}]]
        if point.dimension is not None:
            name, value = point.dimension
            dimension_sets = [*dimension_sets, [*dimension_sets[0], {"Name": name, "Value": value}]]
        data.extend(
            {
                "MetricName": point.name,
                "Dimensions": dimensions,
                "Timestamp": at,
                "Value": point.value,
                "Unit": point.unit,
            }
            for dimensions in dimension_sets
        )
    return data


class RecordedMetrics:
    """Keeps what is published, for whoever reads it back (the agent host tests)."""

    def __init__(self) -> None:
        self.points: list[MetricPoint] = []

    def publish(self, points: Iterable[MetricPoint], *, at: datetime | None = None) -> None:
        self.points.extend(points)
