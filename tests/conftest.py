"""Fixtures shared by every test: AWS is never reached for real."""

from __future__ import annotations

import os

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
