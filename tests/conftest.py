"""Fixtures shared by every test: AWS is never reached for real."""

from __future__ import annotations

import os

import pytest

# Set before any boto3 client exists: tests must never find real credentials.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "Squadron",
        "POWERTOOLS_SERVICE_NAME": "test",
        "POWERTOOLS_DEV": "0",
    }
)
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)


def pytest_collection_modifyitems(config: object, items: list[pytest.Item]) -> None:
    """Under ``-n`` (pytest-xdist, `make test`), the tests that start whole stacks or synthesize
    the CDK app stay together on one worker each (``--dist loadgroup``): the end-to-end tests
    (local stacks and the Copilot CLI, one at a time as before) and the infra tests (one synth);
    everything else is shared between the workers."""
    for item in items:
        path = str(item.path)
        for folder, group in (("/tests/e2e/", "e2e"), ("/tests/infra/", "infra")):
            if folder in path:
                item.add_marker(pytest.mark.xdist_group(group))
