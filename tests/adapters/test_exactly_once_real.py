"""Exactly-once effects, on the real parts: the replay property test of tests/unit/test_exactly_once.py
run against the real GitHub adapter and HTTP client over the stateful sandbox, the DynamoDB
registry and its decision outbox on moto, events.fifo on moto SQS and the ECS launcher on moto.

For each scenario (an event sequence that makes the router comment, label, close, open
needs-human issues, file blocker issues, start and stop tasks) a reference run without faults
records what the world ended with. Then, for a point k of the run — each HTTP request to the
sandbox, each DynamoDB, ECS (RunTask, StopTask) and SQS call the router makes — and each kind of
fault, the run is repeated with that one fault:

- ``crash-before``: the executor (a Lambda) dies before the call leaves: not sent, and nothing
  more of that executor runs;
- ``crash-after``: the call was applied and the executor died before it saw the answer;
- ``502``: GitHub applied the request, then answered 502 (its front end timed out);
- ``timeout``: GitHub applied it and the answer never came (the client's read timeout);
- ``drop``: GitHub applied it and the connection was dropped without an answer;
- ``beside``: a second executor runs the whole delivery again right then (its redelivery to
  another Lambda while the first still runs), together with the reconciler's FinishDecision for
  whatever is committed and unfinished; then the first goes on.

HTTP faults are injected at the transport (an httpx transport around the real one), AWS ones
through botocore's ``before-call``/``after-call`` events of the router's clients: neither the
adapters nor the router are patched. A delivery that failed is retried as SQS would (a lease
later); after a fault at an even point the reconciler's finish sweep carries out the unfinished
decisions first, so both ways of resuming are played. The sandbox must end with exactly the
reference's comments, issues, labels, pull requests and reviews (none twice, none lost), the
registry with the same agents in the same states, the same domain events (each once, under the
same id), every decision done, and ECS with exactly as many tasks started as in the reference: a
launch retried after RunTask started its task and before the registry confirmed it adopts that
task (:mod:`squadron.shell.launching`), and a second executor beside it leaves it to the first.

Sampling, deterministic (about a minute on this shared machine; ``SQUADRON_EXACTLY_ONCE_FULL=1``
plays every pair, some 750 runs, five minutes): all (point, kind) pairs of a scenario are listed
in order of point, each point's kinds in :data:`KINDS` order, and every :attr:`Scenario.stride`-th
pair is played. The first scenario has stride 2: every point meets at least one kind (three kinds
apply to an AWS call, six to an HTTP request, so the kinds rotate over the points); the others
have strides 17 and 23 (prime, so the kinds rotate too). The decision over 100 items (20 agents
woken at once, set up through the router without faults) is played with a crash right after each
of its commit's transactions, where a commit in chunks can lose what a re-decision no longer sees.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import boto3
import httpx
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.ecs import EcsTaskLauncher
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import ETagCache, GitHubHttp, Throttle
from squadron.adapters.sqs import SqsEventQueue
from squadron.domain.agents import AgentStatus
from squadron.domain.approval import GateResult
from squadron.domain.commands import ReportConflict
from squadron.domain.effects import AgentWrite, Decision
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.launches import SECRET_ENV, secret_digest
from squadron.domain.outbox import EXECUTION_LEASE
from squadron.domain.reconcile import UNFINISHED_AFTER, finish_commands
from squadron.domain.routing import RoutingPolicy
from squadron.local.examples import first_examples
from squadron.local.sandbox import GitHubSandbox
from squadron.shell.merge_gate import GateOutcome
from squadron.shell.router import RouterService
from tests.support.aws import AgentCompute, agent_compute
from tests.support.events import T0, Events, recover
from tests.support.github_fake import app_private_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_sqs import SQSClient

REPO = "octo/repo"
BOT = "squadron[bot]"
#: The sandbox's numbers: the feature issue an agent works on, another issue, the agent's PR.
ISSUE, OTHER, PR = 1, 2, 3
AGENT = f"1-{ISSUE}-feat-dev"
BRANCH = f"feat/issue-{ISSUE}"

Kind = Literal["crash-before", "crash-after", "502", "timeout", "drop", "beside"]
KINDS: tuple[Kind, ...] = ("crash-before", "crash-after", "502", "timeout", "drop", "beside")
#: What a DynamoDB, ECS or SQS call can meet here (botocore retries its own 5xx and timeouts).
AWS_KINDS: tuple[Kind, ...] = ("crash-before", "crash-after", "beside")
FULL = os.environ.get("SQUADRON_EXACTLY_ONCE_FULL") == "1"


class WaitingGate:
    """The merge gate: every judgement says "waiting" (its verdict event is reported once per PR;
    the gate itself, merges included, is played on the sandbox in test_github_once.py)."""

    def evaluate(
        self, installation_id: int | None, repo: str, pr_number: int, *args: object, **kw: object
    ) -> GateOutcome:
        result = GateResult("waiting", ("a review",), merge=False, method="squash", delete_branch=False)
        return GateOutcome(pr_number, result)


class Crash(Exception):
    """The executor died here (its Lambda timed out or crashed): nothing more of it runs."""


@dataclass
class Faults:
    """Counts the calls that leave the router (in order) and meets call ``at`` with ``kind``."""

    at: int | None = None
    kind: Kind = "crash-before"
    calls: int = 0
    log: list[str] = field(default_factory=list)
    #: The executor met a crash: every later call of it fails before it leaves.
    dead: bool = False
    #: Above 0 while a second executor runs inside a call: its calls are not counted or faulted.
    quiet: int = 0
    #: The second executor (``beside``), set by the run.
    beside: Callable[[], None] | None = None
    #: RunTask calls that started a task (whoever made them).
    tasks_started: int = 0
    #: Whether the fault was met (a run whose point lies past its end has nothing to show).
    met: bool = False

    def before(self, what: str, kinds: tuple[Kind, ...]) -> bool:
        """Called as ``what`` leaves; True when the fault is to be met after it was applied."""
        if self.quiet:
            return False
        if self.dead:
            raise Crash(f"dead executor: {what}")
        self.calls += 1
        self.log.append(what)
        if self.calls != self.at or self.kind not in kinds:
            return False
        self.met = True
        if self.kind == "crash-before":
            self.dead = True
            raise Crash(what)
        if self.kind == "beside":
            assert self.beside is not None
            self.quiet += 1
            try:
                self.beside()
            finally:
                self.quiet -= 1
            return False
        return True

    def after(self, what: str, hit: bool) -> None:
        if hit and self.kind == "crash-after":
            self.dead = True
            raise Crash(what)


def _route(path: str) -> str:
    """A request's path with its numbers and names left out (for the log)."""
    return "/".join("{n}" if part.isdigit() else part for part in path.split("/"))


class FaultyTransport(httpx.BaseTransport):
    """The HTTP transport to the sandbox, meeting the run's fault at its point."""

    def __init__(self, inner: httpx.BaseTransport, faults: Callable[[], Faults]) -> None:
        self.inner = inner
        self.faults = faults

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        faults = self.faults()
        what = f"{request.method} {_route(request.url.path)}"
        hit = faults.before(what, KINDS)
        response = self.inner.handle_request(request)
        if not hit:
            return response
        response.read()
        response.close()
        faults.after(what, hit)
        if faults.kind == "502":
            return httpx.Response(502, json={"message": "Server Error"}, request=request)
        if faults.kind == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)


def _hooked(client: Any, faults: Callable[[], Faults]) -> None:
    """Meet the run's fault at each call of an AWS client (and count the tasks RunTask started)."""
    service = client.meta.service_model.service_name
    hits: list[bool] = []

    def before(model: Any, **_: Any) -> None:
        hits.append(faults().before(f"{service} {model.name}", AWS_KINDS))

    def after(model: Any, parsed: Any, **_: Any) -> None:
        hit = hits.pop()
        if model.name == "RunTask" and parsed.get("tasks"):
            faults().tasks_started += 1
        faults().after(f"{service} {model.name}", hit)

    client.meta.events.register("before-call", before)
    client.meta.events.register("after-call", after)


@dataclass
class Base:
    """What a run starts from: the sandbox repository's state and the registry's items."""

    repo: dict[str, Any]
    items: list[dict[str, Any]]
    #: The number of the first delivery the run makes (after those of the setup).
    events_from: int = 1


@dataclass
class World:
    """One sandbox, one moto: the clients every run's executors share, and the current faults."""

    sandbox: GitHubSandbox
    http: GitHubHttp
    private: str
    #: The router's clients (every call is a point of the run).
    dynamodb: DynamoDBClient
    ecs: ECSClient
    sqs: SQSClient
    #: The harness's own clients (setting up, draining the queue, reading what happened).
    plain_dynamodb: DynamoDBClient
    plain_sqs: SQSClient
    compute: AgentCompute
    holder: list[Faults]
    #: The sandbox repository's state every scenario starts from.
    base_repo: dict[str, Any] = field(default_factory=dict)
    names: Iterator[int] = field(default_factory=itertools.count)
    bases: dict[str, Base] = field(default_factory=dict)

    @property
    def faults(self) -> Faults:
        return self.holder[0]

    def repo_state(self) -> dict[str, Any]:
        repo = self.sandbox.repos[REPO]
        with self.sandbox._lock:
            return copy.deepcopy({name: getattr(repo, name) for name in self.sandbox._SAVED})

    def restore(self, state: dict[str, Any]) -> None:
        repo = self.sandbox.repos[REPO]
        with self.sandbox._lock:
            for name, value in copy.deepcopy(state).items():
                setattr(repo, name, value)
            self.sandbox.deliveries.clear()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    sandbox = GitHubSandbox(
        tmp_path_factory.mktemp("sandbox"), app_id=424242, webhook_secret="s", examples=first_examples()
    )  # no webhook URL: deliveries are recorded, not sent
    sandbox.add_repository(
        REPO,
        {"README.md": "# octo/repo\n", "app.py": "print('v1')\n"},
        permissions={"alice": "write", "bob": "admin"},
    )
    url = sandbox.start()
    holder = [Faults()]
    http = GitHubHttp(
        base_url=url,
        transport=FaultyTransport(httpx.HTTPTransport(), lambda: holder[0]),
        sleep=lambda _s: None,
        throttle=Throttle(sleep=lambda _s: None),
    )
    private, _ = app_private_key()
    try:
        _base_repository(sandbox)
        with mock_aws():
            dynamodb, ecs, sqs = boto3.client("dynamodb"), boto3.client("ecs"), boto3.client("sqs")
            for client in (dynamodb, ecs, sqs):
                _hooked(client, lambda: holder[0])
            world = World(
                sandbox,
                http,
                private,
                dynamodb,
                ecs,
                sqs,
                boto3.client("dynamodb"),
                boto3.client("sqs"),
                agent_compute(),
                holder,
            )
            world.base_repo = world.repo_state()
            yield world
    finally:
        http.close()
        sandbox.stop()


def _base_repository(sandbox: GitHubSandbox) -> None:
    """The feature issue, another issue, and the App's pull request closing the first."""
    git = sandbox.repos[REPO].store.git
    blob = git("hash-object", "-w", "--stdin", stdin="print('v2')\n")
    tree = git("mktree", stdin=f"100644 blob {blob}\tapp.py\n")
    git("update-ref", f"refs/heads/{BRANCH}", git("commit-tree", tree, "-p", "main", "-m", "work"))
    for number, title in ((ISSUE, "Export API"), (OTHER, "Parser")):
        _sandbox_call(sandbox, "alice", "POST", "/issues", {"title": title, "body": "please"}, number=number)
    body = {"title": "Export", "head": BRANCH, "base": "main", "body": f"Closes #{ISSUE}"}
    _sandbox_call(sandbox, BOT, "POST", "/pulls", body, number=PR)


def _sandbox_call(
    sandbox: GitHubSandbox, login: str, method: str, path: str, body: Any, *, number: int
) -> None:
    """A person's (or the App's) request made straight to the sandbox, before any run."""
    status, answer = sandbox.handle(
        method, f"/repos/{REPO}{path}", json.dumps(body).encode(), {"authorization": f"token human:{login}"}
    )
    assert status == 201 and isinstance(answer, dict) and answer["number"] == number, answer


Step = Callable[["Run"], EventEnvelope]


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    #: Played once without faults before the run's own steps (what the run starts from).
    setup: tuple[Step, ...] = ()
    #: Every how many (point, kind) pairs one is played (1: every one).
    stride: int = 1
    #: Issues a person opens on the sandbox before the setup (numbered from 4 on).
    issues: int = 0
    #: Calls met with every kind of fault in ``kinds``, whatever the stride.
    always: tuple[str, ...] = ()
    #: The kinds of fault played (where each applies).
    kinds: tuple[Kind, ...] = KINDS


class Run:
    """One play of a scenario, from its base, with (at most) one fault."""

    def __init__(self, world: World, faults: Faults, base: Base) -> None:
        self.world = world
        self.faults = faults
        world.holder[0] = faults
        faults.beside = self._beside
        world.restore(base.repo)
        world.http.etags = ETagCache()  # a fresh Lambda's cache
        n = next(world.names)
        self.table = f"registry-{n}"
        world.plain_dynamodb.create_table(TableName=self.table, **TABLE_DEFINITION)
        for start in range(0, len(base.items), 25):
            chunk = base.items[start : start + 25]
            world.plain_dynamodb.batch_write_item(
                RequestItems={self.table: [{"PutRequest": {"Item": item}} for item in chunk]}
            )
        self.queue_url = world.plain_sqs.create_queue(
            QueueName=f"events-{n}.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
        )["QueueUrl"]
        #: Each run's own cluster: a retry looks up a launch's task by its token, which every run
        #: of a scenario shares, so another run's task must not be there to be found.
        self.cluster = boto3.client("ecs").create_cluster(clusterName=f"agents-{n}")["cluster"]["clusterArn"]
        self.registry = DynamoRegistry(self.table, client=world.dynamodb)
        self.app = GitHubApp(app_id=424242, http=world.http, private_key=lambda: world.private)
        self.github = AppGitHub(self.app, bot_login=BOT)
        self.events = Events(full_name=REPO, _ids=itertools.count(base.events_from))
        self.now = T0
        self.current: EventEnvelope | None = None
        #: Records a second executor failed on: handed over again once the first is done.
        self.redeliver: list[EventEnvelope] = []

    def router(self) -> RouterService:
        """One executor (a Lambda invocation) over the shared table, GitHub and ECS."""
        compute = self.world.compute
        launcher = EcsTaskLauncher(
            cluster=self.cluster,
            task_definition=compute.task_definition,
            container_name="agent",
            subnets=[compute.subnet],
            security_groups=[compute.security_group],
            client=self.world.ecs,
        )
        return RouterService(
            registry=self.registry,
            launcher=launcher,
            github=self.github,
            policies=lambda _event: RoutingPolicy(),
            clock=self._clock,
            queue=SqsEventQueue(self.queue_url, client=self.world.sqs),
            merge_gate=WaitingGate(),
        )

    def _clock(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def _unfinished(self) -> list[EventEnvelope]:
        """The reconciler's FinishDecision commands for every unfinished decision (any age)."""
        return finish_commands(self._unfinished_decisions(), self.now)

    def _beside(self) -> None:
        """A second executor now: the current record again, and the sweep's FinishDecisions."""
        assert self.current is not None
        for envelope in [self.current, *self._unfinished()]:
            try:
                self.router().process(envelope, first_receive=False)
            except Exception:
                self.redeliver.append(envelope)

    def deliver(self, envelope: EventEnvelope) -> None:
        """Process ``envelope`` as the queue would: retried after a failure until it succeeds."""
        for attempt in range(6):
            self.current = envelope
            try:
                self.router().process(envelope, first_receive=attempt == 0)
                break
            except Exception as exc:
                self.faults.dead = False
                # A visibility timeout later (longer than a claim); at an even point the
                # reconciler's sweep finishes what is committed before the record comes back.
                self.now += max(EXECUTION_LEASE, UNFINISHED_AFTER + timedelta(minutes=1))
                if self.faults.at is not None and self.faults.at % 2 == 0:
                    for finish in self._unfinished():
                        self.deliver(finish)
                last = exc
        else:
            raise AssertionError(f"{envelope.delivery_id} never succeeded: {last!r}")
        while self.redeliver:
            self.deliver(self.redeliver.pop(0))
        self.drain()

    def drain(self) -> None:
        """Route what the router put on events.fifo (the commands its effects lead to)."""
        sqs = self.world.plain_sqs
        while True:
            messages = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=1).get("Messages", [])
            if not messages:
                return
            sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
            self.deliver(EventEnvelope.from_message(messages[0]["Body"]))

    def play(self, steps: tuple[Step, ...]) -> Run:
        for step in steps:
            self.deliver(step(self))
        return self

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """The harness's own calls through the router's clients: neither counted nor faulted."""
        self.faults.quiet += 1
        try:
            yield
        finally:
            self.faults.quiet -= 1

    def agent(self, agent_id: str) -> Any:
        with self.quiet():
            return self.registry.get_agent(agent_id)

    def items(self) -> list[dict[str, Any]]:
        client = self.world.plain_dynamodb
        found: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            page = client.scan(**request)
            found += page["Items"]
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _unfinished_decisions(self) -> list[Decision]:
        with self.quiet():
            return self.registry.unfinished_decisions(self.now + timedelta(days=1), 100)

    def outcome(self) -> dict[str, object]:
        """What the world ended with: GitHub's state, the registry's agents and events, ECS's tasks."""
        repo = self.world.sandbox.repos[REPO]
        items = self.items()
        return {
            "comments": Counter(
                (number, c["user"]["login"], c["body"])
                for number, thread in repo.comments.items()
                for c in thread
            ),
            "issues": {
                number: (
                    i["title"],
                    i["body"],
                    i["state"],
                    i.get("state_reason"),
                    tuple(sorted(label["name"] for label in i["labels"])),
                    tuple(sorted(a["login"] for a in i["assignees"])),
                    i["user"]["login"],
                )
                for number, i in repo.issues.items()
            },
            "pulls": {number: (p["state"], p.get("merged")) for number, p in repo.pulls.items()},
            "reviews": Counter(
                (number, r["user"]["login"], r["state"], r["body"])
                for number, rs in repo.reviews.items()
                for r in rs
            ),
            "agents": sorted(
                (i["agent_id"]["S"], i["status"]["S"])
                for i in items
                if i.get("entity", {}).get("S") == "agent"
            ),
            "events": sorted(
                (i["event_id"]["S"], i["detail_type"]["S"])
                for i in items
                if i.get("entity", {}).get("S") == "event"
            ),
            "unfinished decisions": [d.key for d in self._unfinished_decisions()],
            "tasks started": self.faults.tasks_started,
        }


def _conflict(n: int) -> Step:
    def make(run: Run) -> EventEnvelope:
        command = ReportConflict(issue_number=ISSUE, pr_number=PR, head_sha="c" * 40, base="main")
        return command_envelope(
            command,
            repository={"id": 1, "full_name": REPO},
            installation_id=77,
            delivery_id=f"conflict-{n}",
            now=run.now,
        )

    return make


def _after_idle(step: Step) -> Step:
    """The dev agent's task ended its turn (outside the router: the test plays the task), then ``step``."""

    def make(run: Run) -> EventEnvelope:
        with run.quiet():
            record = run.registry.get_agent(AGENT)
            assert record is not None
            idle = record
            if idle.status is AgentStatus.CREATED:
                idle = idle.transition(AgentStatus.ACTIVE, now=idle.updated_at)
            idle = idle.updated(now=idle.updated_at, task_arn=None)
            run.registry.put_agent(AgentWrite(idle, expected_version=record.version))
        return step(run)

    return make


def _recover(action: Literal["relaunch", "escalate"]) -> Step:
    return lambda r: recover(r.events, r.agent(AGENT), action)


def _failing_check(n: int) -> Step:
    return lambda r: r.events.check(BRANCH, "failure", prs=(PR,), sha=f"s{n}")


def _register_blocker(issue: int, blocker: int) -> Step:
    return lambda r: r.events.register_blocker(issue, blocker)


def _assigned(issue: int) -> Step:
    return lambda r: r.events.assigned(issue)


#: Agents the decision over 100 items wakes (about five items each).
AGENTS = 20


def wake_all(agents: int, *, stride: int) -> Scenario:
    """``agents`` agents asleep on one blocker (set up through the router), then the blocker is
    closed: one decision wakes them all (per agent its write, both edges' removal, an inbox item
    and its event; more than 100 DynamoDB items from about 20 agents) and starts their tasks."""
    first, blocker = PR + 1, PR + 1 + agents
    issues = range(first, first + agents)
    setup = [_register_blocker(i, blocker) for i in issues] + [_assigned(i) for i in issues]
    return Scenario(
        f"closing a blocker wakes {agents} agents in one decision",
        (lambda r: r.events.closed(blocker),),
        setup=tuple(setup),
        stride=stride,
        issues=agents + 1,
        always=("dynamodb TransactWriteItems",),
        kinds=("crash-after",),
    )


SCENARIOS: list[Scenario] = [
    Scenario(
        "two deaths escalate: label, comment, needs-human issue, task stopped",
        (lambda r: r.events.assigned(ISSUE), _recover("relaunch"), _recover("relaunch")),
        stride=2,
    ),
    Scenario(
        "a sleeper past its limit is escalated",
        (
            lambda r: r.events.assigned(ISSUE),
            lambda r: r.events.register_blocker(ISSUE, OTHER, agent_id=AGENT, sleep=True),
            _recover("escalate"),
        ),
        stride=17,
    ),
    Scenario(
        "a merge conflict the agent could not resolve files a blocker issue for humans",
        (
            lambda r: r.events.assigned(ISSUE),
            lambda r: r.events.pr(PR, BRANCH, f"Closes #{ISSUE}"),
            _conflict(1),
            _after_idle(_conflict(2)),
        ),
        stride=17,
    ),
    Scenario(
        "a merged pull request completes the agent and closes its issue",
        (
            lambda r: r.events.assigned(ISSUE),
            lambda r: r.events.pr(PR, BRANCH, f"Closes #{ISSUE}"),
            lambda r: r.events.pr_closed(PR, BRANCH, merged=True, body=f"Closes #{ISSUE}"),
        ),
        stride=17,
    ),
    Scenario(
        "a cycle is refused in a comment, then four failing checks hand the issue to humans",
        (
            lambda r: r.events.assigned(ISSUE),
            lambda r: r.events.register_blocker(OTHER, ISSUE),
            lambda r: r.events.register_blocker(ISSUE, OTHER),
            lambda r: r.events.pr(PR, BRANCH, f"Closes #{ISSUE}"),
            *[_failing_check(n) for n in range(4)],
        ),
        stride=23,
    ),
]


@dataclass(frozen=True)
class Reference:
    base: Base
    outcome: dict[str, object]
    #: The calls of the run without faults, in order (point k is ``log[k - 1]``).
    log: list[str]


_REFERENCES: dict[str, Reference] = {}


def _reference(world: World, scenario: Scenario) -> Reference:
    if scenario.name not in _REFERENCES:
        base = Base(world.base_repo, [])
        if scenario.setup or scenario.issues:
            prepared = Run(world, Faults(), base)
            for number in range(PR + 1, PR + 1 + scenario.issues):
                _sandbox_call(
                    world.sandbox, "alice", "POST", "/issues", {"title": f"Part {number}"}, number=number
                )
            prepared.play(scenario.setup)
            base = Base(world.repo_state(), prepared.items(), next(prepared.events._ids))
        run = Run(world, Faults(), base).play(scenario.steps)
        _REFERENCES[scenario.name] = Reference(base, run.outcome(), list(run.faults.log))
    return _REFERENCES[scenario.name]


HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _faults(scenario: Scenario, log: list[str]) -> list[tuple[int, Kind]]:
    """The (point, kind) pairs a scenario is played with: every ``stride``-th of all of them, in
    order of point (each point's kinds in :data:`KINDS` order), so kinds rotate over the points."""
    every = [
        (k, kind)
        for k, what in enumerate(log, start=1)
        for kind in (KINDS if what.split(" ", 1)[0] in HTTP_METHODS else AWS_KINDS)
        if kind in scenario.kinds
    ]
    stride = 1 if FULL else scenario.stride
    return [
        (k, kind) for n, (k, kind) in enumerate(every) if n % stride == 0 or log[k - 1] in scenario.always
    ]


def _differences(reference: dict[str, object], got: dict[str, object]) -> str:
    return "; ".join(
        f"{name}: expected {reference[name]!r}, got {got[name]!r}"
        for name in reference
        if reference[name] != got[name]
    )


def test_the_scenarios_reach_every_kind_of_outside_call(world: World) -> None:
    """The table is worth its name: GitHub creations, labels, closing, tasks started and stopped,
    commands on the queue, the decision's commit, claim and settling."""
    seen = {what for scenario in SCENARIOS for what in _reference(world, scenario).log}
    assert seen >= {
        "POST /repos/octo/repo/issues/{n}/comments",
        "POST /repos/octo/repo/issues",
        "POST /repos/octo/repo/issues/{n}/labels",
        "PATCH /repos/octo/repo/issues/{n}",
        "ecs RunTask",
        "ecs StopTask",
        "sqs SendMessage",
        "dynamodb TransactWriteItems",
        "dynamodb UpdateItem",
    }, sorted(seen)


def _play_faults(
    scenario: Scenario, reference: Reference, faults: list[tuple[int, Kind]], world: World
) -> str:
    """Each (point, kind) played once; what differed from the reference, one line each."""
    failures: list[str] = []
    for k, kind in faults:
        faulty = Run(world, Faults(at=k, kind=kind), reference.base).play(scenario.steps)
        if not faulty.faults.met:
            failures.append(f"{kind} at {k}: the point was never reached")
            continue
        got = faulty.outcome()
        if got != reference.outcome:
            failures.append(f"{kind} at {k} ({reference.log[k - 1]}): {_differences(reference.outcome, got)}")
    return "\n".join(failures)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_one_fault_then_a_retry_repeats_nothing_and_loses_nothing(world: World, scenario: Scenario) -> None:
    reference = _reference(world, scenario)
    failures = _play_faults(scenario, reference, _faults(scenario, reference.log), world)
    assert not failures, failures


def test_a_launch_whose_answer_was_lost_starts_no_second_task(world: World) -> None:
    """Every fault around the first RunTask (whatever the sampling): the retry adopts the task
    that runs, a second executor leaves the launch to the first, and the task that runs holds the
    arming that stands (a new secret would leave it refused: the agent would never begin)."""
    scenario = SCENARIOS[0]
    reference = _reference(world, scenario)
    run_task = reference.log.index("ecs RunTask") + 1
    points: list[tuple[int, Kind]] = [
        (run_task, "crash-after"),
        (run_task, "beside"),
        (run_task + 1, "crash-before"),
    ]
    for k, kind in points:
        faulty = Run(world, Faults(at=k, kind=kind), reference.base).play(scenario.steps)
        assert faulty.outcome()["tasks started"] == reference.outcome["tasks started"], (k, kind)
        # The first step alone (its calls are the reference's first): the one task runs armed.
        first = Run(world, Faults(at=k, kind=kind), reference.base).play(scenario.steps[:1])
        agent = first.agent(AGENT)
        assert agent.pending_launch is None and agent.task_arn is not None, (k, kind)
        ecs = boto3.client("ecs")
        running = ecs.list_tasks(cluster=first.cluster, desiredStatus="RUNNING")["taskArns"]
        assert running == [agent.task_arn], (k, kind)
        (task,) = ecs.describe_tasks(cluster=first.cluster, tasks=running)["tasks"]
        env = {e["name"]: e["value"] for e in task["overrides"]["containerOverrides"][0]["environment"]}
        assert secret_digest(env[SECRET_ENV]) == agent.launch_secret_hash, (k, kind)


#: Its launches are played by the scenarios above: here only the commit's transactions (and the first call).
BIG = wake_all(AGENTS, stride=10**6)


def test_a_decision_over_100_items_is_played_whole(world: World) -> None:
    """The scenario is what it says: its decision is committed in more than one transaction."""
    reference = _reference(world, BIG)
    commits = [what for what in reference.log if what == "dynamodb TransactWriteItems"]
    assert len(commits) >= 2, reference.log
    assert reference.outcome["tasks started"] == AGENTS
    assert [status for _, status in reference.outcome["agents"]] == ["ACTIVE"] * AGENTS  # type: ignore[attr-defined]


def test_a_fault_in_a_decision_over_100_items_repeats_nothing_and_loses_nothing(world: World) -> None:
    reference = _reference(world, BIG)
    failures = _play_faults(BIG, reference, _faults(BIG, reference.log), world)
    assert not failures, failures
