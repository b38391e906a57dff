"""What routing one event costs in calls: DynamoDB, GitHub, SQS and ECS, per event type.

The real router Lambda handler (functions/router/handler.py) wired from its environment by
``squadron.shell.wiring.build_router`` (delivery records, the DynamoDB registry, events.fifo,
the ECS launcher, GitHub through the App) on moto, with GitHub answered by the recording fake
transport of the tests. One issue's lifecycle is sent one record per invocation, in order, and
every call each record causes is counted (see :mod:`bench.aws_calls`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any
from unittest import mock

import boto3
import httpx
from moto import mock_aws

from bench.aws_calls import AwsCalls
from bench.support import AWS_UNSET, FAKE_AWS, QUIET_LAMBDA, fresh_handler, scoped_env
from squadron.adapters.dynamo_registry import TABLE_DEFINITION
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.events import EventEnvelope
from squadron.shell import wiring
from tests.support import github_fake
from tests.support.aws import agent_compute
from tests.support.events import Events
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.lambdas import FakeLambdaContext, sqs_lambda_event

A38 = "1-38-feat-dev"
BRANCH = "feat/issue-38"
PR = 101
BLOCKER = 42
QUEUE = "events.fifo"
TABLE = "registry"

#: One issue's life, in the order GitHub (and the agents' commands) would send it:
#: (event type, what happens, the envelope, what the event changed on GitHub: the GET routes
#: whose answers GitHub would now give a new ETag).
Step = tuple[str, str, Callable[[Events], EventEnvelope], tuple[str, ...]]
PULL = "GET /repos/{owner}/{repo}/pulls/{n}"
REVIEWS = "GET /repos/{owner}/{repo}/pulls/{n}/reviews"
FILES = "GET /repos/{owner}/{repo}/pulls/{n}/files"
CHECK_RUNS = "GET /repos/{owner}/{repo}/commits/{sha}/check-runs"
STATUS = "GET /repos/{owner}/{repo}/commits/{sha}/status"
ISSUE = "GET /repos/{owner}/{repo}/issues/{n}"
LIFECYCLE: list[Step] = [
    (
        "issues.opened",
        "a human opens #38: the PM batch (no PM agent yet, so one is created and launched)",
        lambda e: e.opened(38),
        (ISSUE,),
    ),
    (
        "issues.assigned",
        "#38 assigned to squadron[bot]: the assigner's permission looked up, its dev agent created and launched",
        lambda e: e.assigned(38),
        (ISSUE,),
    ),
    (
        "squadron.register_blocker",
        "the dev agent's report_blocked command (events.fifo): #38 waits on #42, the agent sleeps",
        lambda e: e.register_blocker(38, BLOCKER, agent_id=A38, sleep=True),
        (),
    ),
    (
        "issues.closed",
        "the blocker #42 is closed by a human: the sleeping dev agent of #38 is woken (launched)",
        lambda e: e.closed(BLOCKER),
        (ISSUE,),
    ),
    (
        "issue_comment.created",
        "a collaborator comments on #38: permission looked up, the comment goes to the agent's inbox",
        lambda e: e.comment(38),
        (ISSUE,),
    ),
    (
        "pull_request.opened",
        "the dev agent opens PR #101 (Fixes #38): linked, a review agent launched, the merge gate run",
        lambda e: e.pr(PR, BRANCH, "Fixes #38"),
        (PULL, FILES, REVIEWS, CHECK_RUNS, STATUS),  # all new
    ),
    (
        "pull_request_review.submitted",
        "a human requests changes on PR #101: their permission looked up, the dev agent hears of it, "
        "the merge gate runs",
        lambda e: e.review(PR, BRANCH, "changes_requested"),
        (PULL, REVIEWS),
    ),
    (
        "check_run.completed",
        "one CI job of PR #101 completes (success): the merge gate runs",
        lambda e: e.check(BRANCH, "success", prs=(PR,)),
        (CHECK_RUNS,),
    ),
    (
        "check_suite.completed",
        "PR #101's check suite completes (success): the merge gate runs",
        lambda e: _check_suite(e, BRANCH, "success", (PR,)),
        (CHECK_RUNS,),
    ),
    (
        "status",
        "a commit status on the PR's branch (external CI; GitHub's status event has no action)",
        lambda e: e.status((BRANCH,), "success"),
        (STATUS,),
    ),
    (
        "pull_request.closed",
        "PR #101 merged: #38 closed through the API, its agents completed and their tasks stopped",
        lambda e: e.pr_closed(PR, BRANCH, merged=True, body="Fixes #38"),
        (PULL, ISSUE),
    ),
]


def _check_suite(events: Events, branch: str, conclusion: str, prs: tuple[int, ...]) -> EventEnvelope:
    check = {
        "id": 7001,
        "kind": "check_suite",
        "status": "completed",
        "conclusion": conclusion,
        "head_sha": "abc1234def",
        "head_branch": branch,
        "pull_request_numbers": list(prs),
    }
    return events._base("check_suite", "completed", sender="github-actions[bot]", check=check)


#: What the App's own writes change on GitHub (the GET routes answered with a new ETag after).
#: A write not named here changes every resource (the conservative guess).
WRITES_CHANGE: dict[str, tuple[str, ...]] = {
    "POST /repos/{owner}/{repo}/statuses/{sha}": (STATUS,),
    "POST /repos/{owner}/{repo}/check-runs": (CHECK_RUNS,),
    "PATCH /repos/{owner}/{repo}/check-runs/{n}": (CHECK_RUNS,),
    "POST /repos/{owner}/{repo}/pulls/{n}/reviews": (REVIEWS, PULL),
    "POST /repos/{owner}/{repo}/issues/{n}/comments": (
        ISSUE,
        "GET /repos/{owner}/{repo}/issues/{n}/comments",
    ),
    "POST /repos/{owner}/{repo}/issues/{n}/labels": (ISSUE, PULL),
    "PATCH /repos/{owner}/{repo}/issues/{n}": (ISSUE, PULL),
    "POST /app/installations/{n}/access_tokens": (),
}


#: The fake's repository under ``orchestration: fixed``: the lifecycle measured is the fixed
#: routing's (under the default pipelines a run's stages do an assignment's work, through Step
#: Functions, which this harness does not run).
FIXED_FILES: dict[str, github_fake.Content] = {
    **github_fake.FILES,
    ".squadron/config.yaml": github_fake.FILES[".squadron/config.yaml"] + "orchestration: fixed\n",
}


@dataclass
class CountingGitHub:
    """The tests' fake api.github.com, counting requests; tokens expire an hour from now.

    The fake's answers are fixed, GitHub's are not: a resource an event or the App's own write
    changed gets a new ETag on GitHub, so its next conditional GET is answered in full here too
    (``changed``: GET routes, generalised, until a 200 answered them). Only an unchanged resource
    is answered 304 — never better than GitHub would.
    """

    fake: FakeGitHub = field(default_factory=FakeGitHub)
    routes: Counter[str] = field(default_factory=Counter)
    not_modified: Counter[str] = field(default_factory=Counter)
    changed: set[str] = field(default_factory=set)
    #: Every GET route answered so far (what a write of unknown effect changes).
    seen: set[str] = field(default_factory=set)

    def handle(self, request: httpx.Request) -> httpx.Response:
        route = _route(request)
        self.routes[route] += 1
        if request.method != "GET":
            self.changed.update(WRITES_CHANGE.get(route, tuple(self.seen)))
        if route == "POST /app/installations/{n}/access_tokens":
            self.fake.requests.append(request)
            expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            return httpx.Response(201, json={"token": "ghs_bench", "expires_at": expires, "permissions": {}})
        if route in self.changed and "if-none-match" in request.headers:
            headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"if-none-match"]
            request = httpx.Request(request.method, request.url, headers=headers)
        answer = self.fake.handle(request)
        if request.method == "GET":
            self.seen.add(route)
            if answer.status_code == 200:
                self.changed.discard(route)
            elif answer.status_code == 304:
                self.not_modified[route] += 1
        return answer

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def _route(request: httpx.Request) -> str:
    """``METHOD /path`` with the repository and numbers generalised."""
    path = request.url.raw_path.decode().split("?")[0]
    path = re.sub(r"^/repos/[^/]+/[^/]+", "/repos/{owner}/{repo}", path)
    path = re.sub(r"/\d+(?=/|$)", "/{n}", path)
    path = re.sub(r"/collaborators/[^/]+", "/collaborators/{login}", path)
    path = re.sub(r"/contents/.+", "/contents/{path}", path)
    path = re.sub(r"/[0-9a-f]{10,40}(?=/|$)", "/{sha}", path)
    return f"{request.method} {path}"


@dataclass
class Harness:
    module: ModuleType
    queue_arn: str
    aws: AwsCalls
    github: CountingGitHub
    events: Events = field(default_factory=Events)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    #: Under the default pipelines: events.fifo, whose messages (the runs' tasks, the router's own
    #: sends) are routed after each event until every run waits on the router or an agent.
    queue_url: str | None = None
    sqs: Any = None
    sfn: Any = None

    def route(self, envelope: EventEnvelope) -> dict[str, Any]:
        """One record through the Lambda handler; the routing summary (raises if it failed)."""
        return self.deliver(
            envelope.to_message(), envelope.message_group_id, envelope.delivery_id, str(uuid.uuid4())
        )

    def deliver(self, body: str, group: str, deduplication: str, message_id: str) -> dict[str, Any]:
        """One events.fifo message (its body and attributes) through the Lambda handler."""
        message = {
            "MessageId": message_id,
            "ReceiptHandle": "bench",
            "Body": body,
            "MD5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
            "Attributes": {
                "ApproximateReceiveCount": "1",
                "MessageGroupId": group,
                "MessageDeduplicationId": deduplication,
                "SentTimestamp": "1795348800000",
            },
        }
        self.summaries.clear()
        self.failures.clear()
        response = self.module.handler(sqs_lambda_event([message], self.queue_arn), FakeLambdaContext())
        if response["batchItemFailures"] or self.failures:
            raise RuntimeError(f"routing {_kind(body)} failed") from (
                self.failures[0] if self.failures else None
            )
        return self.summaries[-1]

    def counted(self, envelope: EventEnvelope) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the calls routing ``envelope`` made, its routing summary)."""
        self.aws.reset()
        self.github.routes.clear()
        self.github.not_modified.clear()
        runs_before = self._runs()
        summary = self.route(envelope)
        followed = self._drain(runs_before)
        dynamodb = self.aws.operations("dynamodb")
        sqs = self.aws.operations("sqs")
        ecs = self.aws.operations("ecs")
        other = {
            f"{service}.{operation}": n
            for (service, operation), n in sorted(self.aws.calls.items())
            if service not in ("dynamodb", "sqs", "ecs")
        }
        counts: dict[str, Any] = {
            "dynamodb": dynamodb,
            "dynamodb_total": sum(dynamodb.values()),
            "github": sum(self.github.routes.values()),
            "github_not_modified": sum(self.github.not_modified.values()),
            "github_rate_limited": sum(self.github.routes.values()) - sum(self.github.not_modified.values()),
            "sqs_sent": sqs.get("SendMessage", 0) + sqs.get("SendMessageBatch", 0),
            "ecs": sum(ecs.values()),
            "ecs_by_operation": ecs,
            "github_by_route": dict(sorted(self.github.routes.items())),
            **{f"dynamodb_{key}": value for key, value in self.aws.dynamo.as_dict().items()},
            "other_aws": other,
        }
        if self.queue_url is not None:
            sfn = self.aws.operations("stepfunctions")
            runs = self._runs()
            counts["stepfunctions"] = sum(sfn.values())
            counts["stepfunctions_by_operation"] = sfn
            counts["sfn_transitions"] = runs.transitions - runs_before.transitions
            counts["runs_started"] = runs.executions - runs_before.executions
            counts["followed_by"] = dict(Counter(followed))
        return counts, summary

    # --- under the default pipelines ----------------------------------------------------------

    def _drain(self, before: Runs) -> list[str]:
        """Route what events.fifo holds until the runs are quiet: each run still going waits on a
        task the router holds (an agent's or a person's), and every answer the router sent has
        moved its run on. The kinds routed, in order."""
        if self.queue_url is None:
            return []
        routed: list[str] = []
        from tests.support.step_functions import wait_for  # noqa: PLC0415 (paired's old tree has none)

        for _ in range(100):
            message = wait_for("a message on events.fifo, or the runs quiet", lambda: self._next(before))
            if message == "quiet":
                return routed
            assert isinstance(message, dict)
            attributes = message["Attributes"]
            routed.append(_kind(message["Body"]))
            self.deliver(
                message["Body"],
                attributes["MessageGroupId"],
                attributes["MessageDeduplicationId"],
                message["MessageId"],
            )
        raise RuntimeError(f"events.fifo never went quiet: {routed}")

    def _next(self, before: Runs) -> dict[str, Any] | str | None:
        with self.aws.aside():
            # The runs first: a task is on the queue before its run's history says TaskSubmitted.
            runs = self._runs()
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=1, AttributeNames=["All"]
            ).get("Messages", [])
            if got:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=got[0]["ReceiptHandle"])
                message: dict[str, Any] = got[0]
                return message
        sent = sum(self.calls_of("stepfunctions", "SendTaskSuccess", "SendTaskFailure"))
        if runs.waiting and runs.answered - before.answered >= sent:
            return "quiet"
        return None

    def calls_of(self, service: str, *operations: str) -> list[int]:
        return [self.aws.calls[(service, operation)] for operation in operations]

    def _runs(self) -> Runs:
        """Every execution's history, summed (the harness's own reads, not counted)."""
        if self.sfn is None:
            return Runs()
        runs = Runs()
        with self.aws.aside():
            for machine in self.sfn.list_state_machines()["stateMachines"]:
                for execution in self.sfn.list_executions(stateMachineArn=machine["stateMachineArn"])[
                    "executions"
                ]:
                    history = self.sfn.get_execution_history(
                        executionArn=execution["executionArn"], maxResults=1000
                    )
                    kinds = [str(event["type"]) for event in history["events"]]
                    runs.executions += 1
                    runs.transitions += sum(kind.endswith("StateEntered") for kind in kinds)
                    runs.answered += sum(kind in ("TaskSucceeded", "TaskFailed") for kind in kinds)
                    if execution["status"] == "RUNNING" and kinds and kinds[-1] != "TaskSubmitted":
                        runs.waiting = False
        return runs


@dataclass
class Runs:
    """What the pipelines' executions have done so far (their histories, summed)."""

    executions: int = 0
    transitions: int = 0
    answered: int = 0
    #: Every execution still running waits on a task it sent (its last event TaskSubmitted).
    waiting: bool = True


def _kind(body: str) -> str:
    """What an events.fifo message is: a run's task (pipeline:stage:step) or an event's name."""
    value = json.loads(body)
    if value.get("kind") == "squadron.pipeline_task":
        return f"task {value['pipeline']}:{value['stage']}:{value['step']}"
    return ".".join(part for part in (value.get("event"), value.get("action")) if part)


def _provision() -> dict[str, str]:
    """The router's AWS resources on moto, as the CDK stack deploys them; its environment."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(TableName=TABLE, **TABLE_DEFINITION)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=QUEUE, Attributes={"FifoQueue": "true"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    key = boto3.client("secretsmanager").create_secret(Name="app-key", SecretString=app_private_key()[0])[
        "ARN"
    ]
    compute = agent_compute()
    return {
        "QUEUE_ARN": arn,
        "REGISTRY_TABLE_NAME": TABLE,
        "EVENTS_QUEUE_URL": url,
        "AGENT_CLUSTER": compute.cluster_arn,
        "AGENT_TASK_DEFINITION": compute.task_definition,
        "AGENT_CONTAINER_NAME": "agent",
        "AGENT_SUBNETS": compute.subnet,
        "AGENT_SECURITY_GROUPS": compute.security_group,
        "GITHUB_APP_ID": "424242",
        "GITHUB_APP_SLUG": "squadron",
        "GITHUB_PRIVATE_KEY_SECRET_ARN": key,
    }


#: The deployment's pipelines under the default orchestration (docs/pipelines.md).
PIPELINES_PREFIX = "sq"
PIPELINES_ROLE = "arn:aws:iam::123456789012:role/squadron-bench-pipelines"


@contextmanager
def router_harness(orchestration: str = "fixed") -> Iterator[Harness]:
    """The router Lambda on moto with a counting GitHub; everything undone on the way out.

    ``fixed``: the repository says ``orchestration: fixed``. ``pipelines`` (the default): its
    configuration as the fake has it, the deployment's pipelines on moto's Step Functions
    interpreter (executions really run), and every message the runs or the router put on
    events.fifo routed after each event (:meth:`Harness.counted`)."""
    aws = AwsCalls()
    pipelines = orchestration == "pipelines"
    files: dict[str, github_fake.Content] = dict(github_fake.FILES) if pipelines else FIXED_FILES
    github = CountingGitHub(fake=FakeGitHub(files=files))
    counting_http = functools.partial(GitHubHttp, transport=github.transport())
    moto_config: dict[str, Any] = {}
    if pipelines:
        from squadron.adapters import moto_step_functions  # noqa: PLC0415 (paired's old tree has none)

        moto_step_functions.patch()
        moto_config = {"stepfunctions": {"execute_state_machine": True}}
    with (
        scoped_env({**FAKE_AWS, **QUIET_LAMBDA}, unset=AWS_UNSET),
        aws.installed(),
        mock_aws(config=moto_config or None),  # type: ignore[arg-type]
    ):
        environment = _provision()
        queue_arn = environment.pop("QUEUE_ARN")
        if pipelines:
            environment |= {"PIPELINES_PREFIX": PIPELINES_PREFIX, "PIPELINES_ROLE_ARN": PIPELINES_ROLE}
        with (
            scoped_env(environment),
            mock.patch.object(wiring, "GitHubHttp", counting_http),
            fresh_handler("router") as module,
        ):
            harness = Harness(module, queue_arn, aws, github)
            if pipelines:
                harness.queue_url = environment["EVENTS_QUEUE_URL"]
                harness.sqs, harness.sfn = boto3.client("sqs"), boto3.client("stepfunctions")
            record_handler = module.record_handler

            def recording(record: Any) -> dict[str, Any]:
                try:
                    summary: dict[str, Any] = record_handler(record)
                except Exception as exc:
                    harness.failures.append(exc)
                    raise
                harness.summaries.append(summary)
                return summary

            with mock.patch.object(module, "record_handler", recording):
                try:
                    yield harness
                finally:
                    module.runtime.cache_clear()
                    if pipelines:
                        _stop_runs(harness.sfn)


def _stop_runs(sfn: Any) -> None:
    """Every run still going stopped (moto's interpreter threads wait for their tokens otherwise)."""
    for machine in sfn.list_state_machines()["stateMachines"]:
        for run in sfn.list_executions(stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING")[
            "executions"
        ]:
            with contextlib.suppress(Exception):  # a run that ended meanwhile has no worker
                sfn.stop_execution(executionArn=run["executionArn"])


def _note(description: str, summary: dict[str, Any]) -> str:
    effects = ", ".join(summary["effects"]) or "none"
    return f"{description}; effects: {effects}"


def _lifecycle(harness: Harness) -> dict[str, dict[str, Any]]:
    """``LIFECYCLE`` routed in order through ``harness``: each event's calls."""
    e = harness.events
    runtime = harness.module.runtime()
    events: dict[str, dict[str, Any]] = {}
    for name, description, make, changed in LIFECYCLE:
        # Collaborator permissions are cached for minutes; an issue's events are further apart.
        runtime.dispatcher.service.github._permissions.clear()
        harness.github.changed.update(changed)
        counts, summary = harness.counted(make(e))
        events[name] = {**counts, "note": _note(description, summary)}
    return events


def bench_router_calls(pipelines: bool = True) -> dict[str, Any]:
    """DynamoDB, GitHub, SQS and ECS calls per event type over one issue's lifecycle, under
    ``orchestration: fixed`` and (``pipelines``) under the default pipelines, side by side."""
    with router_harness() as harness:
        e = harness.events
        # A fresh container's first event pays the App's installation token and the repository's
        # configuration; a status on an unknown branch touches nothing else.
        cold, _ = harness.counted(e.status(("nobody",), "failure"))
        warm, _ = harness.counted(e.status(("nobody",), "failure"))
        runtime = harness.module.runtime()
        gate = runtime.dispatcher.service.merge_gate
        policies = gate.config_for.__self__  # the PolicyCache (bound method of the gate's config)
        policies._entries.clear()  # as when its TTL lapsed: the configuration is checked again
        recheck, _ = harness.counted(e.status(("nobody",), "failure"))
        events = _lifecycle(harness)
    under_pipelines = bench_pipelines(events) if pipelines else {}
    return {
        "method": (
            "the router Lambda handler (functions/router/handler.py) wired by build_router from its "
            "environment, on moto in-process (DynamoDB registry and delivery records, events.fifo, "
            "ECS, Secrets Manager), GitHub answered by tests/support/github_fake.py through the "
            "App's real client; one record per invocation, one issue's lifecycle in order. Calls "
            "counted with botocore before-parameter-build/after-call hooks on every session. "
            "Caches as in a warm container: the installation token (1 h) and the repository's "
            "configuration (60 s) cached by a first event; collaborator permissions (5 min) "
            "cleared before every event. DynamoDB item sizes from moto's backend (its size "
            "approximation); capacity is an on-demand estimate: a read 1 RRU per 4 KB strongly "
            "consistent (0.5 eventually consistent; a query rounds the sum of its items once), a "
            "write 1 WRU per 1 KB of the larger of the item before and after (x2 in a transaction; "
            "a ConditionCheck estimated as a transactional write), wru_index: the status index "
            "(GSI, projection ALL) rewritten for items carrying its key (x2 when the key moved). "
            "The merge gate reads the PR, its reviews, statuses and check runs (its changed files "
            "too when the approval flow into the PR's base protects paths: one more read per "
            "judgement, five over the lifecycle; the fake's repository has no approval flows, so "
            "the defaults, which protect none) (and the "
            "permission of each reviewer with a standing approval or change request, through the "
            "router's permission cache: none here, the fake's reviews name nobody) and posts "
            "its verdict as a commit status; the fake's fixed answers never make the PR ready, so "
            "it never merges here (a merge by the gate adds PUT merge, DELETE the branch and one "
            "SQS send: the App's own merge is announced on events.fifo, its webhook being dropped). "
            "GitHub calls: every request (github); those answered 304 Not Modified to a conditional "
            "GET from the transport's ETag cache (github_not_modified; free of the primary rate "
            "limit); the rest (github_rate_limited). The fake's answers are fixed, so each event names "
            "what it changed on GitHub (and the App's writes what they change: its commit status the "
            "combined status), and those resources are answered in full: a 304 only where GitHub "
            "would send one"
        ),
        "events": events,
        "lifecycle_total": _total(events),
        "lifecycle_events": len(events),
        "container_costs": {
            "note": (
                "a status event on an unknown branch (1 DynamoDB read): first in a fresh container "
                "(App token from Secrets Manager and GitHub, configuration read), again warm, and "
                "again once the configuration cache lapsed (re-checked every POLICY_TTL_SECONDS)"
            ),
            "cold_first_event": cold,
            "warm": warm,
            "config_recheck": recheck,
        },
        **under_pipelines,
    }


#: The figures compared per event, fixed against pipelines.
COMPARED = ("dynamodb_total", "github", "sqs_sent", "ecs", "stepfunctions")


def bench_pipelines(fixed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The same lifecycle under the default orchestration (``pipelines``), and the comparison."""
    # moto's interpreter logs the Fail a join-any branch ends with (caught by its Parallel) as an error
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    with router_harness("pipelines") as harness:
        harness.counted(harness.events.status(("nobody",), "failure"))  # the container warmed, as above
        events = _lifecycle(harness)
    # Structural facts of the default pipelines (docs/pipelines.md, "Default pipelines").
    assigned = events["issues.assigned"]
    assert assigned["runs_started"] == 2, "an assignment starts feature-development and bug-development"
    assert assigned["followed_by"] == {
        "task bug-development:fix:stage": 1,
        "task feature-development:implement:stage": 1,
    }, assigned["followed_by"]
    assert sum(e["runs_started"] for e in events.values()) == 2, (
        "no other event of the lifecycle starts a run"
    )
    total = _total(events)
    return {
        "pipelines": {
            "method": (
                "the same lifecycle, the same harness, under the default orchestration: the fake's "
                "repository configuration without orchestration: fixed, the router's environment "
                "naming the deployment's pipelines (PIPELINES_PREFIX, PIPELINES_ROLE_ARN), Step "
                "Functions on moto's interpreter (executions run, squadron.adapters.moto_step_functions "
                "applied). After each event, every message on events.fifo (a run's task, the "
                "router's own sends) is routed through the same handler, in order, until the runs are "
                "quiet (each running execution waits on a task the router holds, every answer sent "
                "has moved its run); those calls are the event's (followed_by: what was routed). "
                "stepfunctions: the router's calls to Step Functions; sfn_transitions: the states "
                "the runs entered meanwhile (what Standard workflows bill); the interpreter's own "
                "calls (its SQS sends) are not the router's and are not counted. The lifecycle "
                "sends no agent's task_ended, as under fixed: the feature-development run waits "
                "at its implement stage from the assignment on (its review, gate and merge stages "
                "are bench/pipeline_transitions.py's)"
            ),
            "events": events,
            "lifecycle_total": total,
            "lifecycle_events": len(events),
        },
        "comparison": {
            "note": "per event: fixed -> pipelines (the pipelines' follow-up tasks included)",
            "events": {
                name: {key: [fixed[name].get(key, 0), counts.get(key, 0)] for key in COMPARED}
                for name, counts in events.items()
            },
            "lifecycle_total": {key: [_total(fixed).get(key, 0), total.get(key, 0)] for key in COMPARED},
        },
    }


_BY_NAME = ("dynamodb", "ecs_by_operation", "github_by_route", "other_aws")


def _total(events: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The events' figures summed key by key (the same keys, a note of its own)."""
    total: dict[str, Any] = {}
    for counts in events.values():
        for key, value in counts.items():
            if isinstance(value, dict):
                summed: Counter[str] = total.setdefault(key, Counter())
                summed.update(value)
            elif isinstance(value, int | float):
                total[key] = total.get(key, 0) + value
    for key, value in total.items():
        if isinstance(value, Counter):
            names = sorted(value) if key in _BY_NAME else list(value)  # call names sorted, as above
            total[key] = {name: round(value[name], 1) for name in names}
    total["note"] = "summed over the events above: one issue from opened to its PR merged"
    return total


def summary(result: dict[str, Any]) -> str:
    total = result["lifecycle_total"]
    return (
        f"one issue's lifecycle ({result['lifecycle_events']} events): {total['dynamodb_total']} DynamoDB, "
        f"{total['github']} GitHub ({total['github_not_modified']} of them 304 Not Modified), "
        f"{total['sqs_sent']} SQS sends, {total['ecs']} ECS calls" + _pipelines_summary(result)
    )


def _pipelines_summary(result: dict[str, Any]) -> str:
    if "pipelines" not in result:
        return ""
    total = result["pipelines"]["lifecycle_total"]
    return (
        f"; under the default pipelines: {total['dynamodb_total']} DynamoDB, {total['github']} GitHub, "
        f"{total['sqs_sent']} SQS sends, {total['ecs']} ECS, {total['stepfunctions']} Step Functions calls, "
        f"{total['sfn_transitions']} transitions"
    )
