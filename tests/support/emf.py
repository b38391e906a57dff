"""Reading back what a handler printed in the embedded metric format."""

from __future__ import annotations

import json
from collections import Counter

#: (metric name, its dimension names sorted, the breakdown's value or "" for a total)
Published = Counter[tuple[str, tuple[str, ...], str]]


def published_metrics(stdout: str) -> Published:
    """How many values of each metric, per dimension set, the EMF lines in ``stdout`` carry."""
    published: Published = Counter()
    for raw in stdout.splitlines():
        if '"_aws"' not in raw:
            continue
        line = json.loads(raw)
        for directive in line["_aws"]["CloudWatchMetrics"]:
            (dimensions,) = directive["Dimensions"]
            breakdown = "/".join(str(line[d]) for d in dimensions if d != "service")
            for metric in directive["Metrics"]:
                values = line[metric["Name"]]
                published[(metric["Name"], tuple(sorted(dimensions)), breakdown)] += (
                    len(values) if isinstance(values, list) else 1
                )
    return published


def totals(published: Published) -> dict[str, int]:
    """Each metric's total (its service-only series), by name."""
    return {name: count for (name, dimensions, _), count in published.items() if dimensions == ("service",)}
