"""The ingress: the pure triage, and the real Lambda handler per published webhook example."""

from __future__ import annotations

import io
import json
import time
import uuid
from collections import defaultdict
from contextlib import redirect_stdout
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

from bench.stats import distribution
from bench.support import AWS_UNSET, FAKE_AWS, QUIET_LAMBDA, fresh_handler, scoped_env
from bench.timing import timed
from squadron.domain.webhook import Accepted, AppIdentity, sign, triage_webhook
from tests.support.lambdas import FakeLambdaContext, http_api_event
from tests.support.webhook_examples import load_examples

SECRET = "bench-secret"  # noqa: S105 - a throwaway HMAC key for the benchmark
APP_ID = 424242
ROUNDS = 5  # measured passes over the corpus, after one warm-up pass


def bench_ingress_triage() -> dict[str, Any]:
    """Signature check + validation + envelope for every published webhook example."""
    app = AppIdentity(app_id=1, slug="squadron")
    requests = []
    for item in load_examples():
        body = json.dumps(item.payload).encode()
        headers = {
            "X-GitHub-Event": item.event,
            "X-GitHub-Delivery": f"d-{item.index}",
            "X-Hub-Signature-256": sign(body, SECRET),
        }
        requests.append((headers, body))
    now = datetime.now(UTC)

    def run() -> int:
        accepted = 0
        for headers, body in requests:
            decision = triage_webhook(
                headers=headers, body=body, secret=SECRET, app=app, max_body_bytes=1 << 20, received_at=now
            )
            accepted += isinstance(decision, Accepted)
        return len(requests)

    return {"examples": len(requests), **timed(run, repeats=5)}


def _requests(round_number: int) -> list[dict[str, Any]]:
    """One API Gateway event per published example, signed, each with its own delivery id."""
    events = []
    for item in load_examples():
        body = json.dumps(item.payload).encode()
        headers = {
            "X-GitHub-Event": item.event,
            "X-GitHub-Delivery": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{item.id}/{round_number}")),
            "X-Hub-Signature-256": sign(body, SECRET),
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/bench",
        }
        events.append(http_api_event(body, headers))
    return events


def bench_ingress_handler() -> dict[str, Any]:
    """functions/ingress/handler.py per example: API Gateway event in, events.fifo message out."""
    by_outcome: dict[str, list[float]] = defaultdict(list)
    every: list[float] = []
    printed = io.StringIO()
    with scoped_env({**FAKE_AWS, **QUIET_LAMBDA}, unset=AWS_UNSET), mock_aws():
        sqs = boto3.client("sqs")
        queue_url = sqs.create_queue(
            QueueName="events.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        )["QueueUrl"]
        secret_arn = boto3.client("secretsmanager").create_secret(Name="webhook-secret", SecretString=SECRET)[
            "ARN"
        ]
        wiring = {
            "EVENTS_QUEUE_URL": queue_url,
            "WEBHOOK_SECRET_ARN": secret_arn,
            "GITHUB_APP_ID": str(APP_ID),
            "GITHUB_APP_SLUG": "squadron",
        }
        # Powertools still prints a metric set once a metric reaches 100 values, metrics disabled
        # or not: counted (the few events that pay for it are in the figures), kept off the terminal.
        with scoped_env(wiring), fresh_handler("ingress") as module, redirect_stdout(printed):
            context = FakeLambdaContext()
            for round_number in range(ROUNDS + 1):
                for event in _requests(round_number):
                    start = time.perf_counter_ns()
                    response = module.handler(event, context)
                    elapsed_us = (time.perf_counter_ns() - start) / 1000
                    outcome = json.loads(response["body"])["status"] if response.get("body") else "?"
                    if outcome == "accepted":
                        _drain(sqs, queue_url)  # moto slows down as a queue fills: keep it empty
                    if round_number == 0:
                        continue  # warm-up: the secret's first read, the clients, lazy imports
                    every.append(elapsed_us)
                    by_outcome[outcome].append(elapsed_us)
            module.ingress.cache_clear()
        reference = _moto_send_message_us(sqs, queue_url)
    examples = len(load_examples())
    return {
        "method": (
            "the real ingress handler called in-process once per published webhook example "
            f"(@octokit/webhooks-examples, {examples} payloads), correctly signed, each with its own "
            f"delivery id; {ROUNDS} measured passes after one warm-up pass; SQS (events.fifo) and "
            "Secrets Manager are moto in-process (SendMessage is a local call, not a network round "
            "trip; the secret is cached after the warm-up); POWERTOOLS_METRICS_DISABLED and "
            "POWERTOOLS_TRACE_DISABLED set and logging at CRITICAL so printing does not dominate; "
            "stdout_lines_printed: metric sets Powertools 3.37 still prints when one metric reaches "
            "100 values (disabled metrics are never cleared), swallowed, the few events that paid "
            "for one included"
        ),
        "examples": examples,
        "passes": ROUNDS,
        "stdout_lines_printed": len(printed.getvalue().splitlines()),
        "microseconds_per_event": distribution(every),
        "by_outcome": {outcome: distribution(values) for outcome, values in sorted(by_outcome.items())},
        "reference_moto_send_message_us": {
            "note": "one SendMessage of a 2 KB body to moto's in-process events.fifo, alone: what an "
            "accepted event's figure includes that real SQS would replace with a network round trip",
            **distribution(reference, quantiles=(50, 90)),
        },
    }


def _moto_send_message_us(sqs: Any, queue_url: str, count: int = 200) -> list[float]:
    timings = []
    body = "x" * 2048
    for n in range(count):
        start = time.perf_counter_ns()
        sqs.send_message(
            QueueUrl=queue_url, MessageBody=body, MessageGroupId="1#1", MessageDeduplicationId=f"ref-{n}"
        )
        timings.append((time.perf_counter_ns() - start) / 1000)
        _drain(sqs, queue_url)
    return timings


def _drain(sqs: Any, queue_url: str) -> None:
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def triage_summary(result: dict[str, Any]) -> str:
    return f"{result['ops_per_second_median']} examples/s ({result['microseconds_per_op_median']} us each)"


def handler_summary(result: dict[str, Any]) -> str:
    per = result["microseconds_per_event"]
    return f"p50 {per['p50']} us, p99 {per['p99']} us, max {per['max']} us per event ({per['count']} calls)"
