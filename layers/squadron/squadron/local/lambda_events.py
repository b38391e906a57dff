"""The events and context AWS Lambda hands our handlers: the local stack invokes them the same way."""

from __future__ import annotations

import base64
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


def load_handler(root: Path, name: str) -> ModuleType:
    """Import ``root``/functions/<name>/handler.py as the module ``<name>_handler`` (once)."""
    module_name = f"{name}_handler"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = root / "functions" / name / "handler.py"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class FakeLambdaContext:
    function_name: str = "test-function"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_group_name: str = "/aws/lambda/test-function"
    log_stream_name: str = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


def http_api_event(
    body: bytes,
    headers: dict[str, str],
    *,
    method: str = "POST",
    path: str = "/webhook",
    base64_encoded: bool = False,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, as Lambda receives it."""
    lowered = {key.lower(): value for key, value in headers.items()}
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": lowered,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.com",
            "domainPrefix": "api",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "GitHub-Hookshot/test",
            },
            "requestId": "request-1",
            "routeKey": f"{method} {path}",
            "stage": "$default",
            "time": "22/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795348800000,
        },
        "body": base64.b64encode(body).decode()
        if base64_encoded
        else body.decode("utf-8", errors="surrogateescape"),
        "isBase64Encoded": base64_encoded,
    }


def sqs_lambda_event(messages: Sequence[Mapping[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS event source sends for ``messages`` (ReceiveMessage output).

    Receive with ``MessageSystemAttributeNames=["All"]`` and ``MessageAttributeNames=["All"]``.
    """
    records = []
    for message in messages:
        attributes = message.get("Attributes", {})
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {
                    key: attributes[key]
                    for key in (
                        "ApproximateReceiveCount",
                        "SentTimestamp",
                        "SenderId",
                        "ApproximateFirstReceiveTimestamp",
                        "SequenceNumber",
                        "MessageGroupId",
                        "MessageDeduplicationId",
                    )
                    if key in attributes
                },
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "binaryValue": value.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": value["DataType"],
                    }
                    for name, value in message.get("MessageAttributes", {}).items()
                },
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": queue_arn.split(":")[3],
            }
        )
    return {"Records": records}
