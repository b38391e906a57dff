"""The local stack's events.fifo against the outbox's holds: a retry finds what its first attempt
held lapsed (the CDK stack's side is tests/infra/test_infra_outbox_timing.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields
from datetime import timedelta

import boto3
import pytest
from moto.server import ThreadedMotoServer

from squadron.adapters.local_aws import PREFIX, ROUTER_RUN, provision
from squadron.domain.launches import ARMING_HELD
from squadron.domain.outbox import EXECUTION_LEASE, REDRIVE_AFTER
from squadron.domain.reconcile import UNFINISHED_AFTER
from squadron.local.wiring import LocalOptions


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }.items():
        monkeypatch.setenv(name, value)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def test_the_local_queue_hides_a_batch_longer_than_a_run_holds_its_decisions_and_launches(
    endpoint: str,
) -> None:
    """A retry of a delivery whose router died comes after the hold its run took (a launch's
    arming, a decision's claim: taken up to a router run after the receive) has lapsed: it
    re-arms a launch whose executor died inside RunTask rather than leaving it to the
    reconciler's rescue. Five receives outlast REDRIVE_AFTER, so a redrive is recognised, and the
    reconciler's sweep still waits for the delivery's own next attempt."""
    stack_default = next(f.default for f in fields(LocalOptions) if f.name == "visibility_timeout")
    assert isinstance(stack_default, int)
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    for given in (None, stack_default):  # provision's own default, and the stack's
        if given is None:
            provision(endpoint, webhook_secret="s" * 20, private_key_pem="key")
        else:
            provision(endpoint, webhook_secret="s" * 20, private_key_pem="key", visibility_timeout=given)
        url = sqs.get_queue_url(QueueName=f"{PREFIX}-events.fifo")["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        visibility = timedelta(seconds=int(attributes["VisibilityTimeout"]))
        receives = json.loads(attributes["RedrivePolicy"])["maxReceiveCount"]
        assert visibility >= ARMING_HELD + ROUTER_RUN and visibility >= EXECUTION_LEASE + ROUTER_RUN
        assert receives * visibility >= REDRIVE_AFTER
        assert visibility + EXECUTION_LEASE < UNFINISHED_AFTER  # the sweep waits for the retries
