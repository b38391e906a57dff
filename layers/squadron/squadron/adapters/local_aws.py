"""AWS as the local stack sees it: a moto server on loopback, provisioned like the CDK stack.

The same resources the stack deploys, with the same settings that matter to the
code: events.fifo (content-based deduplication off, a DLQ after five
receives), the registry table from the adapter's own definition, the two
secrets, an ECS cluster and an agent task definition (tasks are registered
there by the local launcher, so the reconciler's DescribeTasks sees them).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import ClientError

from squadron.adapters.dynamo_registry import EVENT_ENTITY, EVENT_STREAM, HISTORY_ENTITY, TABLE_DEFINITION
from squadron.adapters.moto_clock import SCALE_ENV
from squadron.adapters.operations import RECEIVE_TO_RESEND, resend_arguments
from squadron.adapters.zygote import Zygote, ZygoteProcess, ZygoteUnavailable
from squadron.adapters.zygote import enabled as zygote_enabled
from squadron.domain.dashboard_refresh import DASHBOARD_EVENTS
from squadron.domain.domain_events import SOURCE
from squadron.domain.launches import ARMING_HELD
from squadron.domain.schedules import fired

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

PREFIX = "squadron-local"
MAX_RECEIVE_COUNT = 5

#: How long a router run may last: the CDK stack's router timeout (``EventQueue.ROUTER_TIMEOUT``,
#: tests/infra keeps them equal). The local stack stops its router's runs at it too, as Lambda
#: does (:mod:`squadron.local.invocation`), so the reasoning below holds there as well.
ROUTER_RUN = timedelta(seconds=90)
#: How long events.fifo hides a batch handed to the router before handing it again: longer than
#: what a run holds (a decision's claim, a launch's arming: ``ARMING_HELD``, 2 min) from the
#: latest moment it may take it (a router run after the receive). So the retry of a delivery
#: whose router died finds that hold lapsed: it re-arms a launch whose executor died inside
#: RunTask and starts its task (:mod:`squadron.shell.launching`, step 3) instead of leaving it to
#: the reconciler's rescue, and it claims the decision instead of failing, a receive spent
#: towards the dead-letter queue, until the claim lapses. It also keeps a redriven message
#: recognisable (five receives take longer than ``REDRIVE_AFTER``). The CDK stack's is 9 min (six
#: times its router's timeout, as Lambda advises); tests/infra and tests/adapters pin both.
EVENTS_VISIBILITY = ARMING_HELD + ROUTER_RUN


@dataclass(frozen=True)
class LocalResources:
    endpoint: str
    queue_url: str
    queue_arn: str
    dead_letter_queue_url: str
    table_name: str
    webhook_secret_arn: str
    private_key_arn: str
    cluster_arn: str
    task_definition_arn: str
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    #: The domain events: the registry's stream, the local bus, and the log group a rule of the
    #: bus writes every event to (what ``squadron events tail --local`` and the feed read).
    stream_arn: str = ""
    event_bus_name: str = f"{PREFIX}-events"
    event_log_group: str = "/squadron/local/domain-events"
    #: The retrospective schedules' group and the role they send with (moto keeps them; it does
    #: not fire them: :func:`fire_schedule` sends what a firing sends).
    schedule_group: str = f"{PREFIX}-retrospectives"
    scheduler_role_arn: str = f"arn:aws:iam::123456789012:role/{PREFIX}-scheduler"
    #: The dashboards queue: a rule of the bus puts every event there, the reconciler its sweeps,
    #: the dashboards Lambda its deferred renderings (see :func:`provision_dashboards`).
    dashboard_queue_url: str = ""
    dashboard_queue_arn: str = ""
    #: The pipelines' state machines (``<prefix>_<repository id>-<pipeline>``) and the role they
    #: run with; moto's server runs them (its interpreter, switched on at provisioning; it checks
    #: neither the names nor the role: they are AWS's, for the same code paths).
    pipelines_prefix: str = "sq-local"
    pipelines_role_arn: str = f"arn:aws:iam::123456789012:role/{PREFIX}-pipelines"


def provision(
    endpoint: str,
    *,
    webhook_secret: str,
    private_key_pem: str,
    visibility_timeout: int = int(EVENTS_VISIBILITY.total_seconds()),
    copilot_token: str | None = None,
) -> LocalResources:
    """Create (or find) every resource on the moto server at ``endpoint``.

    ``visibility_timeout`` is how long a batch the router did not answer stays hidden before
    it is received again (a crashed router's whole batch comes back after it); shorter than
    :data:`EVENTS_VISIBILITY` only in tests that want a crashed batch back quickly.

    The server's state is reset first: whatever used the endpoint before, the stack starts
    from nothing.
    """
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310 (loopback)
    with urllib.request.urlopen(reset, timeout=30):  # noqa: S310
        pass
    # Pipelines' state machines run on the server's interpreter (docs/pipelines.md).
    running = urllib.request.Request(  # noqa: S310 (loopback)
        f"{endpoint}/moto-api/config",
        data=json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(running, timeout=30):  # noqa: S310
        pass
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    dlq_url = sqs.create_queue(QueueName=f"{PREFIX}-events-dlq.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(
        QueueName=f"{PREFIX}-events.fifo",
        Attributes={
            "FifoQueue": "true",
            "VisibilityTimeout": str(visibility_timeout),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
            ),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]

    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint)
    table = f"{PREFIX}-registry"
    try:
        dynamodb.create_table(TableName=table, StreamSpecification=EVENT_STREAM, **TABLE_DEFINITION)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
    stream_arn = str(dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"])
    bus, log_group = provision_event_bus(endpoint)
    dashboards_url, dashboards_arn = provision_dashboards(endpoint, bus)

    secrets = boto3.client("secretsmanager", endpoint_url=endpoint)
    webhook_arn = _secret(secrets, f"{PREFIX}/webhook-secret", webhook_secret)
    key_arn = _secret(secrets, f"{PREFIX}/github-app-private-key", private_key_pem)
    if copilot_token is not None:  # the agents' Copilot token (real GitHub with real models)
        _secret(secrets, f"{PREFIX}/copilot-token", copilot_token)

    ec2 = boto3.client("ec2", endpoint_url=endpoint)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})  # awsvpc tasks need it
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"{PREFIX}-agents-{vpc}", Description="agents", VpcId=vpc)[
        "GroupId"
    ]
    ecs = boto3.client("ecs", endpoint_url=endpoint)
    cluster = ecs.create_cluster(clusterName=PREFIX)["cluster"]["clusterArn"]
    definition = ecs.register_task_definition(
        family=f"{PREFIX}-agent",
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="1024",
        memory="2048",
        containerDefinitions=[{"name": "agent", "image": "squadron-agent:local", "memory": 2048}],
    )["taskDefinition"]["taskDefinitionArn"]
    boto3.client("scheduler", endpoint_url=endpoint).create_schedule_group(Name=f"{PREFIX}-retrospectives")
    return LocalResources(
        endpoint,
        queue_url,
        queue_arn,
        dlq_url,
        table,
        webhook_arn,
        key_arn,
        cluster,
        definition,
        (subnet,),
        (group,),
        stream_arn,
        bus,
        log_group,
        dashboard_queue_url=dashboards_url,
        dashboard_queue_arn=dashboards_arn,
    )


def provision_event_bus(endpoint: str | None) -> tuple[str, str]:
    """The local bus and the rule that writes every Squadron event to a log group (as in AWS).

    ``endpoint`` None: boto3's own (moto's in-process mock in tests)."""
    bus, log_group = f"{PREFIX}-events", "/squadron/local/domain-events"
    events = boto3.client("events", endpoint_url=endpoint)
    events.create_event_bus(Name=bus)
    logs = boto3.client("logs", endpoint_url=endpoint)
    logs.create_log_group(logGroupName=log_group)
    group_arn = logs.describe_log_groups(logGroupNamePrefix=log_group)["logGroups"][0]["arn"]
    events.put_rule(
        Name=f"{PREFIX}-events-to-log",
        EventBusName=bus,
        EventPattern=json.dumps({"source": [SOURCE]}),
    )
    events.put_targets(
        Rule=f"{PREFIX}-events-to-log",
        EventBusName=bus,
        Targets=[{"Id": "log", "Arn": group_arn.removesuffix(":*")}],
    )
    return bus, log_group


def provision_dashboards(endpoint: str | None, bus: str) -> tuple[str, str]:
    """The dashboards queue (a standard queue, a DLQ after five receives) and the rule of ``bus``
    that puts every Squadron event on it, as the CDK stack's DashboardIssues makes them.

    ``endpoint`` None: boto3's own (moto's in-process mock in tests)."""
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    dlq_url = sqs.create_queue(QueueName=f"{PREFIX}-dashboards-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName=f"{PREFIX}-dashboards",
        Attributes={
            "VisibilityTimeout": "60",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
            ),
        },
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = boto3.client("events", endpoint_url=endpoint)
    rule = f"{PREFIX}-events-to-dashboards"
    events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps(DASHBOARD_EVENTS))
    events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "dashboards", "Arn": arn}])
    return url, arn


def _secret(client: Any, name: str, value: str) -> str:
    try:
        arn: str = client.create_secret(Name=name, SecretString=value)["ARN"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceExistsException":
            raise
        arn = client.put_secret_value(SecretId=name, SecretString=value)["ARN"]
    return arn


def save_state(resources: LocalResources, path: Path) -> dict[str, int]:
    """What a restart needs of AWS, as one JSON file: the registry's items, the queues' messages.

    Called when the stack stops (nothing routes any more): each queue is drained, oldest first
    per message group, with what SendMessage needs to put the message back as it was.
    """
    dynamodb = boto3.client("dynamodb", endpoint_url=resources.endpoint)
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=resources.table_name):
        # Committed events were published already: restored as events, their inserts would be
        # published again. They come back as history only (still on the history index).
        items.extend(_to_json(_as_history(item)) for item in page["Items"])
    queues = {
        "events": _drain(resources.endpoint, resources.queue_url),
        "dead_letters": _drain(resources.endpoint, resources.dead_letter_queue_url),
    }
    event_log = _logged(resources.endpoint, resources.event_log_group)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(
        json.dumps({"registry": items, "queues": queues, "event_log": event_log}), encoding="utf-8"
    )
    temporary.replace(path)
    return {
        "items": len(items),
        **{name: len(messages) for name, messages in queues.items()},
        "history": len(event_log),
    }


#: The log stream the domain events of earlier runs are put back into after a restart.
HISTORY_STREAM = "history"
#: PutLogEvents takes at most this many events at once (AWS's limit is 10,000 and 1 MB).
_PUT_BATCH = 500


def _logged(endpoint: str, log_group: str) -> list[dict[str, Any]]:
    """Every event of the domain events' log group, oldest first (what ``events tail`` reads)."""
    logs = boto3.client("logs", endpoint_url=endpoint)
    found: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"logGroupName": log_group}
    while True:
        try:
            page = logs.filter_log_events(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return found
            raise
        found += [{"timestamp": int(e["timestamp"]), "message": str(e["message"])} for e in page["events"]]
        token = page.get("nextToken")
        if not token:
            return sorted(found, key=lambda e: e["timestamp"])
        kwargs["nextToken"] = token


def _put_history(endpoint: str, log_group: str, events: list[dict[str, Any]]) -> int:
    """Put the domain events of earlier runs back, at their own times; how many CloudWatch Logs
    took (it refuses events older than 14 days: those are gone, as its retention would have it)."""
    if not events:
        return 0
    logs = boto3.client("logs", endpoint_url=endpoint)
    logs.create_log_stream(logGroupName=log_group, logStreamName=HISTORY_STREAM)
    ordered = sorted(events, key=lambda e: int(e["timestamp"]))
    taken = 0
    for start in range(0, len(ordered), _PUT_BATCH):
        batch = ordered[start : start + _PUT_BATCH]
        answer = logs.put_log_events(logGroupName=log_group, logStreamName=HISTORY_STREAM, logEvents=batch)
        rejected = answer.get("rejectedLogEventsInfo") or {}
        too_old = rejected.get("tooOldLogEventEndIndex")
        too_new = rejected.get("tooNewLogEventStartIndex")
        taken += (too_new if too_new is not None else len(batch)) - (
            too_old + 1 if too_old is not None else 0
        )
    return taken


def _as_history(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("entity", {}).get("S") != EVENT_ENTITY:
        return item
    return {**item, "entity": {"S": HISTORY_ENTITY}}


def restore_state(resources: LocalResources, path: Path) -> dict[str, int]:
    """Put back what :func:`save_state` wrote (into freshly provisioned resources)."""
    state = json.loads(path.read_text(encoding="utf-8"))
    dynamodb = boto3.client("dynamodb", endpoint_url=resources.endpoint)
    for item in state["registry"]:
        dynamodb.put_item(TableName=resources.table_name, Item=_from_json(item))
    sqs = boto3.client("sqs", endpoint_url=resources.endpoint)
    urls = {"events": resources.queue_url, "dead_letters": resources.dead_letter_queue_url}
    for name, messages in state["queues"].items():
        for message in messages:
            sqs.send_message(QueueUrl=urls[name], **message)
    # The domain events of earlier runs: `squadron events tail --local` shows them after a
    # restart (the feed of `squadron local` counts them as history, never as news).
    history = _put_history(resources.endpoint, resources.event_log_group, state.get("event_log", []))
    return {
        "items": len(state["registry"]),
        **{n: len(m) for n, m in state["queues"].items()},
        "history": history,
    }


def _to_json(value: Any) -> Any:
    """A DynamoDB item as JSON can hold it: binary attributes (a decision's outbox) in base64."""
    if isinstance(value, dict):
        if set(value) == {"B"}:
            return {"B64": base64.b64encode(bytes(value["B"])).decode("ascii")}
        return {key: _to_json(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_to_json(inner) for inner in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"B64"}:
            return {"B": base64.b64decode(value["B64"])}
        return {key: _from_json(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_from_json(inner) for inner in value]
    return value


def _drain(endpoint: str, queue_url: str) -> list[dict[str, Any]]:
    """Every message of a FIFO queue, received and deleted until none is left."""
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    out: list[dict[str, Any]] = []
    while True:
        answer = sqs.receive_message(QueueUrl=queue_url, **RECEIVE_TO_RESEND)
        messages = answer.get("Messages", [])
        if not messages:
            return out
        for message in messages:
            out.append(resend_arguments(dict(message)))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


#: The moto server's module, imported once per process by :func:`_moto_zygote` (about 2.5 s, 5 s on
#: a busy machine, of every stack's start): each server is a fresh fork of it, so no state of one
#: stack's server reaches another's. moto's settings read at import (``TEST_SERVER_MODE`` and the
#: like, none of which the stack sets) are their defaults: the zygote starts with PATH, PYTHONPATH
#: and HOME only, and each server's environment reaches only its fork (a launch file).
MOTO_SERVER = "squadron.adapters.moto_server"
_zygote_lock = threading.Lock()
_zygotes: dict[str, Zygote] = {}


def _moto_zygote(log: Path) -> Zygote | None:
    if not zygote_enabled(os.environ):
        return None
    with _zygote_lock:
        zygote = _zygotes.get(MOTO_SERVER)
        if zygote is None or not zygote.alive():
            zygote = _zygotes[MOTO_SERVER] = Zygote(
                MOTO_SERVER, env=os.environ, log=log.with_name("moto-zygote.log")
            )
            atexit.register(zygote.stop)  # it serves every stack of this process: it ends with it
        return zygote


class MotoProcess:
    """The moto server in its own process (on loopback): AWS calls do not contend for the
    local stack's interpreter lock, and stopping it leaves nothing behind.

    Its Step Functions interpreter calls AWS services (a pipeline's
    ``sqs:sendMessage.waitForTaskToken`` task, a child execution) through a boto3 client of its
    own whose endpoint is ``http://localhost:<MOTO_PORT>`` (moto's
    ``stepfunctions/parser/asl/utils/boto_client.py``; ``moto.settings.moto_server_port``, 5000
    when unset). moto's server sets ``MOTO_PORT`` to the port it serves only when the
    environment has none, so an inherited ``MOTO_PORT`` (a developer's shell, another moto)
    sent every task elsewhere and failed the run (``States.Runtime``: could not connect to
    ``http://localhost:5000/``). The server is started with ``MOTO_PORT`` set to its own port
    (docs/local-stack.md).
    """

    def __init__(self, log: Path, *, wait_scale: int = 1) -> None:
        self.log = log
        #: How many times faster its Step Functions ``Wait`` states pass (a test clock:
        #: :mod:`squadron.adapters.moto_clock`); 1, as written.
        self.wait_scale = wait_scale
        self.process: ZygoteProcess | subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    def start(self, timeout: float = 60.0) -> str:
        with socket.socket() as probe:  # a free port (moto's server takes no port 0)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        # moto's server, its DynamoDB requests one at a time (see squadron.adapters.moto_server), in
        # a session of its own (the stack stops it; a terminal's Ctrl-C goes to the stack).
        arguments = ["-H", "127.0.0.1", "-p", str(port)]
        # Where its Step Functions interpreter sends a state's service calls: itself.
        env = {**os.environ, "MOTO_PORT": str(port), SCALE_ENV: str(self.wait_scale)}
        zygote = _moto_zygote(self.log)
        self.process = None
        if zygote is not None:
            with contextlib.suppress(ZygoteUnavailable):  # it died: started afresh
                self.process = zygote.spawn(arguments, env=env, log=self.log)
        if self.process is None:
            with self.log.open("ab") as out:
                self.process = subprocess.Popen(  # noqa: S603 (this interpreter's moto, on loopback)
                    [sys.executable, "-m", MOTO_SERVER, *arguments],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the moto server exited with {self.process.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):  # noqa: S310
                    return self.endpoint
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the moto server did not answer on {self.endpoint} in {timeout:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


class QueuePoller:
    """What Lambda's SQS event source does: receive a batch, later delete what succeeded."""

    def __init__(self, endpoint: str, queue_url: str) -> None:
        self.queue_url = queue_url
        self.client: SQSClient = boto3.client("sqs", endpoint_url=endpoint)

    def receive(self, *, wait_seconds: int = 1, max_messages: int = 10) -> list[dict[str, Any]]:
        answer = self.client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return [dict(message) for message in answer.get("Messages", [])]

    def delete(self, receipt_handles: list[str]) -> None:
        for handle in receipt_handles:
            self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=handle)

    def depth(self, queue_url: str | None = None) -> int:
        attributes = self.client.get_queue_attributes(
            QueueUrl=queue_url or self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


def fire_schedule(endpoint: str, group: str, name: str, at: datetime) -> str | None:
    """What EventBridge Scheduler sends when schedule ``name`` fires at ``at``: its universal SQS
    target's SendMessage, its input substituted (moto stores schedules but never fires them).
    The message id, or None when there is no such schedule."""
    scheduler = boto3.client("scheduler", endpoint_url=endpoint)
    try:
        held = scheduler.get_schedule(Name=name, GroupName=group)
    except scheduler.exceptions.ResourceNotFoundException:
        return None
    parameters = fired(held["Target"]["Input"], at)
    sent = boto3.client("sqs", endpoint_url=endpoint).send_message(**parameters)
    return str(sent["MessageId"])
