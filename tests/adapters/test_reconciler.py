"""The reconciler over DynamoDB (moto) and events.fifo: dropped webhooks are healed through the router."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.github.client import GitHubAppClient
from squadron.adapters.github.errors import NotFoundError, RateLimitedError
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.scheduler import ScheduleUnavailableError
from squadron.adapters.sqs import SqsEventQueue, SqsRefreshQueue
from squadron.adapters.step_functions import Pipelines
from squadron.domain.agents import AgentStatus
from squadron.domain.dashboard_refresh import RefreshRequest, request_from_message
from squadron.domain.domain_events import Repository
from squadron.domain.effects import has_marker
from squadron.domain.events import EventEnvelope
from squadron.domain.permissions import Caller
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.reconcile import UNFINISHED_AFTER
from squadron.domain.repo_config.models import RetrospectiveConfig
from squadron.domain.routing import RoutingPolicy
from squadron.shell.pipeline_runs import PipelineRuns
from squadron.shell.reconciler import ReconcilerService
from squadron.shell.router import RouterService
from tests.support.aws import drain, registry_and_queue
from tests.support.events import BOT, T0, Events, recover
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.github_openapi import validate
from tests.support.lambdas import FakeLambdaContext, load_handler
from tests.support.router_stack import router_over

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

A38 = "1-38-feat-dev"
NOW = T0 + timedelta(hours=2)


@dataclass
class GitHubState:
    """What GitHub says now, per number (GitHub-shaped JSON), and the App's deliveries."""

    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    redelivered: list[int] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)
    rate_limited_after: int | None = None

    def reader(self, installation_id: int | None, repo: str) -> GitHubState:
        assert (installation_id, repo) == (77, "octo/repo")
        return self

    def get_repository(self) -> dict[str, Any]:
        return {"id": 1, "full_name": "octo/repo", "default_branch": "main"}

    def _read(self, table: dict[int, dict[str, Any]], number: int) -> dict[str, Any]:
        self.reads.append(number)
        if self.rate_limited_after is not None and len(self.reads) > self.rate_limited_after:
            raise RateLimitedError(403, "API rate limit exceeded")
        if number not in table:
            raise NotFoundError(404, "Not Found")
        return table[number]

    def get_issue(self, number: int) -> dict[str, Any]:
        return self._read(self.issues, number)

    def get_pull(self, number: int) -> dict[str, Any]:
        return self._read(self.pulls, number)

    written: list[tuple[str, int, Any]] = field(default_factory=list)

    def add_labels(self, number: int, labels: Iterable[str]) -> list[dict[str, Any]]:
        self.written.append(("label", number, list(labels)))
        return []

    def comment(self, number: int, body: str) -> dict[str, Any]:
        self.written.append(("comment", number, body))
        return {}

    def find_comment(
        self, number: int, key: str, login: str | None, since: datetime
    ) -> dict[str, Any] | None:
        bodies = [body for kind, n, body in self.written if (kind, n) == ("comment", number)]
        return next(({"body": body} for body in bodies if has_marker(body, key)), None)

    def add_assignees(self, number: int, logins: Iterable[str]) -> dict[str, Any]:
        self.written.append(("assign", number, list(logins)))
        return {}

    def list_deliveries(self, *, limit: int = 500) -> list[dict[str, Any]]:
        return self.deliveries

    def redeliver(self, delivery_id: int) -> None:
        self.redelivered.append(delivery_id)


def issue(number: int, state: str = "open", assignees: tuple[str, ...] = (BOT,)) -> dict[str, Any]:
    return {
        "number": number,
        "title": f"Issue {number}",
        "state": state,
        "labels": [],
        "assignees": [{"login": a, "id": 1, "type": "User"} for a in assignees],
        "updated_at": "2026-11-23T13:00:00Z",
        "closed_at": "2026-11-23T13:00:00Z" if state == "closed" else None,
        "closed_by": {"login": "octo-human", "id": 3, "type": "User"} if state == "closed" else None,
    }


@dataclass
class Stack:
    registry: DynamoRegistry
    sqs: SQSClient
    queue_url: str
    router: RouterService
    launcher: FakeLauncher
    github: GitHubState
    events: Events
    processed: set[str]
    #: The task ARNs ECS still runs (the stack answers the reconciler's TaskStatus port).
    alive: set[str] = field(default_factory=set)
    now: datetime = NOW
    bot_login: str = BOT

    def reconciler(self) -> ReconcilerService:
        return ReconcilerService(
            registry=self.registry,
            queue=SqsEventQueue(self.queue_url, client=self.sqs),
            reader=self.github.reader,
            deliveries=self.github,
            completed=lambda guid: guid in self.processed,
            bot_login=self.bot_login,
            tasks=self,
            clock=lambda: self.now,
        )

    def running(self, task_arns: Sequence[str]) -> frozenset[str]:
        return frozenset(task_arns) & frozenset(self.alive)

    def route_queued(self) -> list[EventEnvelope]:
        return drain(self.sqs, self.queue_url, self.router.process)


@contextmanager
def deployed(bot_login: str = BOT) -> Iterator[Stack]:
    """The router and the reconciler of a stack whose App's login is ``bot_login``."""
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        launcher = FakeLauncher()
        router = router_over(  # alice assigns the App
            registry, launcher, policy=RoutingPolicy(bot_login=bot_login), clock=lambda: NOW
        )
        events = Events(full_name="octo/repo")
        yield Stack(registry, sqs, url, router, launcher, GitHubState(), events, set(), bot_login=bot_login)


@pytest.fixture
def stack() -> Iterator[Stack]:
    with deployed() as stack:
        yield stack


def test_a_dropped_blocker_closure_is_healed_and_the_sleeper_wakes(stack: Stack) -> None:
    e = stack.events
    stack.router.process(e.assigned(38))
    stack.router.process(e.register_blocker(38, 42, agent_id=A38, sleep=True))
    assert stack.registry.get_agent(A38).status is AgentStatus.SLEEPING  # type: ignore[union-attr]
    stack.github.issues.update({38: issue(38), 42: issue(42, "closed")})  # GitHub's webhook never arrived

    report = stack.reconciler().run()
    assert report.replayed == ["reconcile-1-42-closed-2026-11-23T13:00:00Z"]
    (replay,) = stack.route_queued()
    assert (replay.event, replay.action, replay.origin, replay.sender.login) == (
        "issues",
        "closed",
        "reconciler",
        "octo-human",
    )
    agent = stack.registry.get_agent(A38)
    assert agent is not None and agent.status is AgentStatus.ACTIVE
    assert agent.wake_reason is not None and "blocker #42 was closed" in agent.wake_reason
    assert len(stack.launcher.tasks_for(A38)) == 2

    # The next run finds nothing left to repair: the registry now agrees with GitHub.
    assert stack.reconciler().run().replayed == []


def test_an_issue_taken_back_by_a_human_cancels_its_agent(stack: Stack) -> None:
    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38, assignees=("octo-human",))
    assert stack.reconciler().run().replayed == ["reconcile-1-38-unassigned-2026-11-23T13:00:00Z"]
    stack.route_queued()
    agent = stack.registry.get_agent(A38)
    assert agent is not None and agent.status is AgentStatus.CANCELLED


def test_an_app_with_another_slug_keeps_its_assigned_agents_and_replays_as_itself() -> None:
    """With the App acme-bot, an issue assigned to acme-bot[bot] is the agent's (no replay); one a
    human took back is replayed as unassigned from acme-bot[bot], which the router understands."""
    with deployed("acme-bot[bot]") as stack:
        stack.router.process(stack.events.assigned(38, to="acme-bot[bot]"))
        stack.router.process(stack.events.assigned(39, to="acme-bot[bot]"))
        stack.github.issues.update({38: issue(38, assignees=("acme-bot[bot]",)), 39: issue(39, assignees=())})
        launched = [stack.registry.get_agent(f"1-{n}-feat-dev") for n in (38, 39)]
        stack.alive.update(a.task_arn for a in launched if a is not None and a.task_arn)
        report = stack.reconciler().run()
        assert report.replayed == ["reconcile-1-39-unassigned-2026-11-23T13:00:00Z"]
        (replay,) = stack.route_queued()
        assert replay.assignee is not None and replay.assignee.login == "acme-bot[bot]"
        agents = [stack.registry.get_agent(f"1-{n}-feat-dev") for n in (38, 39)]
        assert {a.issue_number: a.status for a in agents if a is not None} == {
            38: AgentStatus.CREATED,  # launched, untouched
            39: AgentStatus.CANCELLED,
        }


def test_github_errors_are_reported_and_a_rate_limit_ends_the_reading(stack: Stack) -> None:
    e = stack.events
    stack.router.process(e.assigned(38))
    stack.router.process(e.register_blocker(38, 42, agent_id=A38, sleep=True))
    stack.router.process(e.register_blocker(38, 43))
    stack.github.issues.update({38: issue(38)})  # 42 was deleted
    stack.github.rate_limited_after = 2
    report = stack.reconciler().run()
    assert report.replayed == []
    assert report.problems[0].startswith("octo/repo#42 not read: ")
    assert report.problems[1].startswith("rate limited reading octo/repo#43")


def test_failed_deliveries_are_redelivered_once_unless_processed(stack: Stack) -> None:
    at = (NOW - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    stack.github.deliveries = [
        {"id": 11, "guid": "g-failed", "status_code": 502, "delivered_at": at},
        {"id": 12, "guid": "g-timeout-but-done", "status_code": 0, "delivered_at": at},
        {"id": 13, "guid": "g-ok", "status_code": 202, "delivered_at": at},
    ]
    stack.processed.add("g-timeout-but-done")
    report = stack.reconciler().run()
    assert report.redelivered == stack.github.redelivered == [11]


SCHEDULED = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "123456789012",
    "time": "2026-11-23T14:00:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:events:us-east-1:123456789012:rule/squadron-reconcile"],
    "detail": {},
}


def test_the_lambda_runs_one_reconciliation_per_tick(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    handler_module = load_handler("reconciler")
    monkeypatch.setattr(handler_module, "service", stack.reconciler)
    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38, "closed")
    summary = handler_module.handler(SCHEDULED, FakeLambdaContext())
    assert summary["replayed"] == ["reconcile-1-38-closed-2026-11-23T13:00:00Z"]
    assert (summary["agents"], summary["reads"], summary["problems"]) == (1, 1, [])
    stack.route_queued()
    agent = stack.registry.get_agent(A38)
    assert agent is not None and agent.status is AgentStatus.COMPLETED


def test_before_the_app_is_configured_a_tick_is_a_counted_no_op(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deployed with github_app_id 0: no GitHub call, no failure every five minutes, and the run
    is counted, so the 'reconciler not running' alarm stays quiet until the App exists."""
    handler_module = load_handler("reconciler")
    monkeypatch.setenv("GITHUB_APP_ID", "0")
    handler_module.service.cache_clear()
    summary = handler_module.handler(SCHEDULED, FakeLambdaContext())
    assert summary["skipped"].startswith("reconciler: the stack does not know its GitHub App yet")
    (line,) = [json.loads(raw) for raw in capsys.readouterr().out.splitlines() if '"_aws"' in raw]
    assert line["ReconcilerRuns"] == [1.0]
    assert "ReconcilerProblems" not in line and "SilentAgents" not in line  # zeros are not published


def test_a_dead_task_is_relaunched_once_then_its_agent_escalated(stack: Stack) -> None:
    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38)
    first = stack.registry.get_agent(A38)
    assert first is not None and first.task_arn is not None
    stack.alive.add(first.task_arn)
    assert stack.reconciler().run().rescued == []  # ECS runs it: nothing to do

    stack.alive.clear()  # the task died (OOM, host failure) without a word
    report = stack.reconciler().run()
    assert report.rescued == [f"recover-{A38}-v{first.version}-relaunch"]
    assert report.relaunched == report.rescued  # a silent agent: what the no-heartbeat alarm counts
    assert report.repairs()["relaunch"] == 1 and report.repairs()["sleep_overdue"] == 0
    assert report.by_status == {"CREATED": 1, "ACTIVE": 0, "SLEEPING": 0, "ESCALATED": 0}
    stack.route_queued()
    second = stack.registry.get_agent(A38)
    assert second is not None and second.counters.recoveries == 1
    assert second.wake_reason is not None and "its ECS task" in second.wake_reason
    assert len(stack.launcher.tasks_for(A38)) == 2
    assert [arn for arn, _ in stack.launcher.stopped] == [first.task_arn]

    assert stack.reconciler().run().rescued == [f"recover-{A38}-v{second.version}-relaunch"]  # dies again
    stack.route_queued()
    third = stack.registry.get_agent(A38)
    assert third is not None and third.status is AgentStatus.ESCALATED
    assert "relaunched 1 time(s) already" in (third.escalation_reason or "")
    assert len(stack.launcher.tasks_for(A38)) == 2  # no third task
    assert stack.reconciler().run().by_status == {"CREATED": 0, "ACTIVE": 0, "SLEEPING": 0, "ESCALATED": 1}
    assert stack.router.github.created[0]["title"] == "needs-human: #38 (feat-dev-38)"  # type: ignore[attr-defined]


def test_a_sleeper_past_its_limit_is_escalated(stack: Stack) -> None:
    stack.router.process(stack.events.assigned(38))
    stack.router.process(stack.events.register_blocker(38, 42, agent_id=A38, sleep=True))
    stack.github.issues.update({38: issue(38), 42: issue(42)})
    assert stack.reconciler().run().rescued == []
    stack.now = NOW + timedelta(hours=25)  # default max_sleep_duration: 24 h
    report = stack.reconciler().run()
    assert len(report.rescued) == 1
    assert (report.relaunched, report.repairs()["sleep_overdue"]) == ([], 1)  # overdue, not silent
    assert report.by_status["SLEEPING"] == 1
    stack.route_queued()
    agent = stack.registry.get_agent(A38)
    assert agent is not None and agent.status is AgentStatus.ESCALATED
    assert "waiting for #42" in (agent.escalation_reason or "")


def pull(number: int, *, created: str, labels: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "number": number,
        "state": "open",
        "merged": False,
        "created_at": created,
        "updated_at": created,
        "labels": [{"name": name} for name in labels],
        "head": {"ref": "feat/issue-38", "sha": "c" * 40},
        "base": {"ref": "main", "sha": "d" * 40},
    }


def test_a_pr_waiting_past_its_flows_timeout_is_handed_to_humans_once(stack: Stack) -> None:
    stack.router.process(stack.events.assigned(38))
    stack.router.process(stack.events.pr(101, "feat/issue-38", "Closes #38"))
    stack.github.issues[38] = issue(38)
    stack.github.pulls[101] = pull(101, created="2026-11-22T10:00:00Z")  # 4 h before NOW; default 48 h
    assert stack.reconciler().run().timed_out == []

    stack.now = NOW + timedelta(days=2)
    report = stack.reconciler().run()
    assert report.timed_out == ["octo/repo#101"]
    (label, comment) = stack.github.written
    assert label == ("label", 101, ["needs-human"])
    assert comment[1] == 101 and "over the approval flow's on_timeout of 48 h" in comment[2]

    stack.github.pulls[101] = pull(101, created="2026-11-22T10:00:00Z", labels=("needs-human",))
    assert stack.reconciler().run().timed_out == []  # labelled: told already


def test_redelivery_through_the_app_api_as_github_describes_it(stack: Stack) -> None:
    at = (NOW - timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    listed = [
        {
            "id": 21,
            "guid": "g-a",
            "delivered_at": at,
            "redelivery": False,
            "duration": 10.0,
            "status": "502",
            "status_code": 502,
            "event": "issues",
            "action": "closed",
            "installation_id": 77,
            "repository_id": 1,
        },
        {
            "id": 22,
            "guid": "g-b",
            "delivered_at": at,
            "redelivery": False,
            "duration": 0.1,
            "status": "OK",
            "status_code": 202,
            "event": "issues",
            "action": "opened",
            "installation_id": 77,
            "repository_id": 1,
        },
    ]
    calls: list[str] = []

    def github(request: httpx.Request) -> httpx.Response:
        operation = validate(request)  # GitHub's OpenAPI description
        calls.append(operation.operation_id)
        assert request.headers["authorization"] == "Bearer app-jwt"  # the App itself, not an installation
        if operation.operation_id == "apps/list-webhook-deliveries":
            return httpx.Response(200, json=listed)
        return httpx.Response(202, json={})

    app = GitHubAppClient(
        http=GitHubHttp(transport=httpx.MockTransport(github), sleep=lambda s: None),
        jwt=lambda: "app-jwt",
        app_id=123456,
        caller=Caller.framework(),
    )
    service = stack.reconciler()
    service.deliveries = app
    assert service.run().redelivered == [21]
    assert calls == ["apps/list-webhook-deliveries", "apps/redeliver-webhook-delivery"]


class DownGitHub(FakeRouterGitHub):
    """GitHub refuses to create anything while ``down`` (an outage, a revoked installation)."""

    down = True

    def create_issue(self, *args: Any, **kwargs: Any) -> int:
        if self.down:
            raise RuntimeError("GitHub is down")
        return super().create_issue(*args, **kwargs)


def test_a_decision_its_delivery_could_not_finish_is_finished_by_the_sweep_once(stack: Stack) -> None:
    """A dead-lettered escalation still reaches humans: its committed outbox is carried out."""
    github = DownGitHub({"alice": "write"})
    stack.router.github = github
    stack.router.process(stack.events.assigned(38))
    stack.router.process(stack.events.register_blocker(38, 42, agent_id=A38, sleep=True))
    agent = stack.registry.get_agent(A38)
    assert agent is not None
    escalate = recover(stack.events, agent, "escalate")  # it slept past its limit
    for _ in range(3):  # the delivery's retries, all failing, until the DLQ keeps it
        with pytest.raises(RuntimeError, match="down"):
            stack.router.process(escalate)
    assert stack.registry.get_agent(A38).status is AgentStatus.ESCALATED  # type: ignore[union-attr]
    assert github.created == [] and len(github.comments) == 1  # commented, then the issue failed

    assert stack.reconciler().run().finished == []  # too recent: its own retries may still come
    stack.now = NOW + UNFINISHED_AFTER + timedelta(minutes=1)  # untouched since its last retry
    github.down = False
    report = stack.reconciler().run()
    assert len(report.finished) == 1 and report.repairs()["unfinished_decision"] == 1
    (command,) = stack.route_queued()
    assert command.origin == "reconciler" and command.action == "finish_decision"
    assert [issue["title"] for issue in github.created] == ["needs-human: #38 (feat-dev-38)"]
    assert len(github.comments) == 1  # found by its key, not posted again
    assert github.labelled == [("octo/repo", 38, ("needs-human",))] * len(github.labelled)
    assert stack.reconciler().run().finished == []  # done: nothing left to sweep


def test_each_run_asks_the_dashboards_queue_for_each_repository_with_agents(stack: Stack) -> None:
    """The sweep: level-triggered, so a dashboard shows what no domain event reported (the
    dashboards Lambda renders it, at most once a minute, and edits only what changed)."""
    stack.router.process(stack.events.assigned(38))
    stack.router.process(stack.events.assigned(39))
    stack.github.issues.update({38: issue(38), 39: issue(39)})
    assert stack.reconciler().run().dashboards == []  # no dashboards queue wired: none asked
    url = stack.sqs.create_queue(QueueName="dashboards")["QueueUrl"]
    reconciler = stack.reconciler()
    reconciler.dashboards = SqsRefreshQueue(url, client=stack.sqs)
    assert reconciler.run().dashboards == ["octo/repo"]
    messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [request_from_message(m["Body"]) for m in messages] == [
        RefreshRequest(repository=Repository(id=1, full_name="octo/repo"), installation=77, cause="sweep")
    ]


def test_a_dashboards_queue_that_refuses_is_a_problem_of_the_run_not_its_end(stack: Stack) -> None:
    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38)
    reconciler = stack.reconciler()
    reconciler.dashboards = SqsRefreshQueue(
        "https://sqs.us-east-1.amazonaws.com/123456789012/gone", client=stack.sqs
    )
    report = reconciler.run()
    assert report.dashboards == [] and report.agents == 1
    assert [p for p in report.problems if p.startswith("dashboards not asked for: SendMessageBatch")]


SCHEDULING = [
    # (id, the repository's retrospective settings, what the schedule is kept as)
    ("weekly by default", RetrospectiveConfig(), ("cron(0 9 ? * MON *)", True)),
    ("its own expression", RetrospectiveConfig(schedule="rate(14 days)"), ("rate(14 days)", True)),
    ("turned off", RetrospectiveConfig(enabled=False), ("cron(0 9 ? * MON *)", False)),
]


@pytest.mark.parametrize(("settings", "kept"), [s[1:] for s in SCHEDULING], ids=[s[0] for s in SCHEDULING])
def test_each_repositorys_retrospective_schedule_is_kept_as_its_configuration_says(
    stack: Stack, settings: RetrospectiveConfig, kept: tuple[str, bool]
) -> None:
    asked: list[tuple[int, str, int | None, str, bool]] = []

    class Schedules:
        def ensure(
            self, repo_id: int, full_name: str, installation_id: int | None, *, expression: str, enabled: bool
        ) -> str:
            asked.append((repo_id, full_name, installation_id, expression, enabled))
            return "created" if enabled else "deleted"

    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38)
    reconciler = stack.reconciler()
    reconciler.schedules = Schedules()
    reconciler.policy_for = lambda repo: RoutingPolicy(retrospective=settings)
    report = reconciler.run()
    assert asked == [(1, "octo/repo", 77, *kept)]
    assert report.schedules == [f"octo/repo: retrospective schedule {'created' if kept[1] else 'deleted'}"]


def test_a_scheduler_failure_is_a_problem_of_its_repository_not_of_the_sweep(stack: Stack) -> None:
    class Broken:
        def ensure(self, *args: object, **kwargs: object) -> str:
            raise ScheduleUnavailableError("Scheduler GetSchedule failed: throttled")

    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38)
    reconciler = stack.reconciler()
    reconciler.schedules = Broken()
    reconciler.dashboards = SqsRefreshQueue(
        stack.sqs.create_queue(QueueName="dashboards")["QueueUrl"], client=stack.sqs
    )
    report = reconciler.run()
    assert any("retrospective schedule not kept: Scheduler GetSchedule failed" in p for p in report.problems)
    assert report.dashboards == ["octo/repo"]  # the rest of the sweep went on


def test_each_repositorys_pipelines_are_published_in_step_and_a_bad_one_is_a_problem(stack: Stack) -> None:
    """The reconciler publishes each swept repository's pipelines (moto's Step Functions, the real
    adapter): created once, nothing when unchanged, a pipeline that cannot compile reported with its
    repository and name while the others are published, a removed one's state machine left."""
    sfn = boto3.client("stepfunctions", region_name=stack.sqs.meta.region_name)
    runs = PipelineRuns(
        Pipelines(prefix="sq", role_arn="arn:aws:iam::123456789012:role/sq-pipelines", client=sfn),
        queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/sq-events.fifo",
    )
    work = Pipeline.model_validate(
        {
            "trigger": {"event": "issues.labeled"},
            "stages": [{"id": "w", "type": "agent", "agent": "feat-dev"}],
        }
    )
    huge = work.model_copy(update={"context": {f"k{i}": "x" * 1000 for i in range(300)}})
    configured: dict[str, Pipeline] = {"work": work, "huge": huge}
    stack.router.process(stack.events.assigned(38))
    stack.github.issues[38] = issue(38)
    reconciler = stack.reconciler()
    reconciler.pipelines = runs
    reconciler.policy_for = lambda repo: RoutingPolicy(pipelines=dict(configured))
    report = reconciler.run()
    assert [line.split(" (")[0] for line in report.pipelines] == ["octo/repo: pipeline 'work' created"]
    assert [p.split(":")[0:2] for p in report.problems if "pipeline" in p] == [
        ["octo/repo", " pipeline 'huge' not published"]
    ]
    assert reconciler.run().pipelines == []  # unchanged: nothing published
    del configured["work"]
    left = reconciler.run().pipelines
    assert left == [
        "octo/repo: state machine sq_1-work left for its runs (its pipeline is no longer configured; no run starts)"
    ]
