"""What routing one event costs in calls: DynamoDB, GitHub, SQS and ECS, per event type.

The real router Lambda handler (functions/router/handler.py) wired from its environment by
``squadron.shell.wiring.build_router`` (delivery records, the DynamoDB registry, events.fifo,
the ECS launcher, GitHub through the App) on moto, with GitHub answered by the recording fake
transport of the tests. One issue's lifecycle is sent one record per invocation, in order, and
every call each record causes is counted (see :mod:`bench.aws_calls`).
"""

from __future__ import annotations

import functools
import hashlib
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

    def route(self, envelope: EventEnvelope) -> dict[str, Any]:
        """One record through the Lambda handler; the routing summary (raises if it failed)."""
        body = envelope.to_message()
        message = {
            "MessageId": str(uuid.uuid4()),
            "ReceiptHandle": "bench",
            "Body": body,
            "MD5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
            "Attributes": {
                "ApproximateReceiveCount": "1",
                "MessageGroupId": envelope.message_group_id,
                "MessageDeduplicationId": envelope.delivery_id,
                "SentTimestamp": "1795348800000",
            },
        }
        self.summaries.clear()
        self.failures.clear()
        response = self.module.handler(sqs_lambda_event([message], self.queue_arn), FakeLambdaContext())
        if response["batchItemFailures"] or self.failures:
            raise RuntimeError(f"routing {envelope.event}.{envelope.action} failed") from (
                self.failures[0] if self.failures else None
            )
        return self.summaries[-1]

    def counted(self, envelope: EventEnvelope) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the calls routing ``envelope`` made, its routing summary)."""
        self.aws.reset()
        self.github.routes.clear()
        self.github.not_modified.clear()
        summary = self.route(envelope)
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
        return counts, summary


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


@contextmanager
def router_harness() -> Iterator[Harness]:
    """The router Lambda on moto with a counting GitHub; everything undone on the way out."""
    aws = AwsCalls()
    github = CountingGitHub(fake=FakeGitHub(files=FIXED_FILES))
    counting_http = functools.partial(GitHubHttp, transport=github.transport())
    with (
        scoped_env({**FAKE_AWS, **QUIET_LAMBDA}, unset=AWS_UNSET),
        aws.installed(),
        mock_aws(),
    ):
        environment = _provision()
        queue_arn = environment.pop("QUEUE_ARN")
        with (
            scoped_env(environment),
            mock.patch.object(wiring, "GitHubHttp", counting_http),
            fresh_handler("router") as module,
        ):
            harness = Harness(module, queue_arn, aws, github)
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


def _note(description: str, summary: dict[str, Any]) -> str:
    effects = ", ".join(summary["effects"]) or "none"
    return f"{description}; effects: {effects}"


def bench_router_calls() -> dict[str, Any]:
    """DynamoDB, GitHub, SQS and ECS calls per event type over one issue's lifecycle."""
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

        events: dict[str, dict[str, Any]] = {}
        for name, description, make, changed in LIFECYCLE:
            # Collaborator permissions are cached for minutes; an issue's events are further apart.
            runtime.dispatcher.service.github._permissions.clear()
            harness.github.changed.update(changed)
            counts, summary = harness.counted(make(e))
            events[name] = {**counts, "note": _note(description, summary)}
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
        f"{total['sqs_sent']} SQS sends, {total['ecs']} ECS calls"
    )
