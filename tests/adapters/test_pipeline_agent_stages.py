"""A pipeline's agent stages, end to end on moto's Step Functions (issue 30): the router puts the
stage's role to work on the run's pull request (the registry's agent, its launch, its inbox item),
keeps the task token with the agent, and answers it once when the agent's task ends — done with
its outputs, or failed so the stage's ``on_error`` applies.

Runs go on moto's interpreter (tests/support/step_functions.py); the router is the dispatcher
over :class:`~squadron.shell.pipelines.PipelineTasks` and the routing service, with the fake
registry and launcher (tests/support/world.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from squadron.config import parse_files
from squadron.domain.agents import AgentStatus
from squadron.domain.commands import SQUADRON_EVENT, TaskEnded, TaskUsage
from squadron.domain.effects import AgentWrite
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import (
    STAGE_FAILED,
    StageFailed,
    StageSucceeded,
    execution_name,
    parse_task,
    run_input,
)
from squadron.domain.pipelines.agent_stage import STAGE_ITEM
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.domain.pipelines.work import Where
from squadron.domain.routing import RoutingPolicy
from squadron.shell.dispatch import Dispatcher
from tests.adapters.test_pipeline_stage_work import started
from tests.adapters.test_pipelines_compiled import publish
from tests.support.events import Events
from tests.support.pipeline_tasks import agent_stages, outbox_over, pipeline_tasks
from tests.support.step_functions import Stack, step_functions, wait_for
from tests.support.world import World
from tests.unit.pipelines.test_pipeline_config import files_with

REPO = "octo/app"
REVIEWER = "42-7-pr-review"


class Router:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        # the router's clock where moto's is (a stage's deadline counts from the time it entered)
        self.world = World(events=Events(repo_id=42, full_name=REPO), now=datetime.now(UTC))
        world = self.world
        self.tasks = pipeline_tasks(
            stack,
            world,
            outbox=outbox_over(world),
            facts=None,
            where=lambda repository_id: Where(REPO, 77) if repository_id == 42 else None,
            agents=agent_stages(stack, world, policy=lambda: self.policy),
            runs=stack.pipelines,
        )
        # no gate in these pipelines: the router reads nothing from GitHub
        self.tasks.facts = _NoFacts()
        self.dispatch = Dispatcher(world.router, pipeline_tasks=self.tasks)
        self.policy = world.policy

    def task(self) -> tuple[str, dict[str, Any]]:
        """The next task the run put on the queue, handed to the router (and its raw body)."""
        message = wait_for("a task", self._receive)
        return message["Body"], self.dispatch.handle(message["Body"], message["MessageId"])

    def _receive(self) -> dict[str, Any] | None:
        got = self.stack.sqs.receive_message(QueueUrl=self.stack.queue_url, MaxNumberOfMessages=1).get(
            "Messages", []
        )
        if not got:
            return None
        self.stack.sqs.delete_message(QueueUrl=self.stack.queue_url, ReceiptHandle=got[0]["ReceiptHandle"])
        message: dict[str, Any] = got[0]
        return message

    def begun(self, agent_id: str = REVIEWER) -> None:
        """The agent's task began (ACTIVE), as the gateway records it."""
        agent = self.world.agent(agent_id)
        if agent.status is AgentStatus.CREATED:
            self.world.registry.put_agent(
                AgentWrite(agent.transition(AgentStatus.ACTIVE, now=self.world.now), agent.version)
            )

    def ended(self, agent_id: str = REVIEWER, **fields: Any) -> tuple[EventEnvelope, dict[str, Any]]:
        """The agent's task reports its end (what the gateway puts on events.fifo), routed."""
        envelope = self.end_of(agent_id, usage=TaskUsage(turns=1), **fields)
        return envelope, self.dispatch.handle(envelope.to_message())

    def end_of(
        self, agent_id: str = REVIEWER, *, source_agent: str | None = None, **fields: Any
    ) -> EventEnvelope:
        """The end the agent's task reports, as the gateway puts it on events.fifo (not routed);
        sent by ``source_agent`` (the agent itself unless named)."""
        agent = self.world.agent(agent_id)
        command = TaskEnded(
            agent_id=agent_id,
            launch_token=fields.pop("launch_token", agent.launch_token),
            issue_number=agent.issue_number,
            **fields,
        )
        return self.world.events._base(
            SQUADRON_EVENT,
            "task_ended",
            sender="squadron[bot]",
            origin="agent",
            source_agent=source_agent or agent_id,
            command=command.model_dump(),
        )


class _NoFacts:
    def facts(
        self, where: Any, number: int, others: tuple[int, ...] = (), paths: tuple[str, ...] = ()
    ) -> Any:
        raise AssertionError("these pipelines judge nothing")


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


REVIEW_THEN_COMMENT = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: review
        type: agent
        agent: pr-review
        action: "Review PR #{{ trigger.n }} for injection flaws"
        expected_outputs: [verdict]
        on_error: {then: tell}
      - id: say
        type: action
        action: comment
        config: {message: "Verdict: {{ stages.review.outputs.verdict }}"}
        on_success: __complete__
      - id: tell
        type: action
        action: comment
        config: {message: "The review failed"}
"""


def test_an_agent_stage_launches_its_role_and_its_completion_moves_the_run_on(stack: Stack) -> None:
    r = Router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)

    body, summary = r.task()
    assert (summary["pipeline_task"], summary["answered"], summary["waiting"]) == ("review", False, REVIEWER)
    # the role is put to work on the run's pull request: one agent, one launch, the instruction
    agent = r.world.agent(REVIEWER)
    assert (agent.role, agent.issue_number, agent.pr_number, agent.status) == (
        "pr-review",
        7,
        7,
        AgentStatus.CREATED,
    )
    assert [(a, purpose) for a, purpose, _ in r.world.launcher.launched.values()] == [(REVIEWER, "start")]
    (item,) = r.world.registry.pending_inbox(REVIEWER)
    assert (item.kind, item.body, item.unvetted_author) == (
        "pipeline_stage",
        "Review PR #7 for injection flaws",
        None,
    )
    assert "report_complete" in item.summary and "verdict" in item.summary
    wait = r.world.registry.stage_wait(REVIEWER)
    assert wait is not None and wait.stage == "review" and wait.answer is None
    # the stage waits: the run is still running, nothing else on the queue
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"

    # the same task delivered again: nothing launched twice, nothing answered
    again = r.dispatch.handle(body)
    assert again["answered"] is False and again["once"] == "waiting already"
    assert len(r.world.launcher.launched) == 1

    r.begun()
    _, routed = r.ended(outcome="idle", outputs={"verdict": "no injection found"})
    assert routed["pipeline_stage"]["answered"] is True and routed["pipeline_stage"]["outcome"] == "passed"

    _, say = r.task()
    assert (say["pipeline_task"], say["answered"]) == ("say", True)
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held
    assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments] == [
        "Verdict: no injection found"
    ]
    output = json.loads(held["output"])
    assert output["data"]["stages"]["review"] == {
        "agent": REVIEWER,
        "outputs": {"verdict": "no injection found"},
    }


def test_a_redelivered_completion_answers_nothing_twice(stack: Stack) -> None:
    r = Router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    r.task()
    r.begun()
    envelope, first = r.ended(outcome="idle", outputs={"verdict": "ok"})
    assert first["pipeline_stage"]["answered"] is True
    # the same end delivered again (the delivery records are not wired: it is routed again)
    again = r.dispatch.handle(envelope.to_message())
    assert "pipeline_stage" not in again
    r.task()
    assert stack.finished(arn)["status"] == "SUCCEEDED"


FAILURES = [
    (
        "escalated",
        {"outcome": "escalated", "reason": "it cannot decide"},
        "the agent was handed to humans: it cannot decide",
    ),
    ("blocked", {"outcome": "sleeping", "reason": "blocked by #9"}, "the agent is blocked: blocked by #9"),
    (
        "a missing expected output",
        {"outcome": "idle", "outputs": {"summary": "fine"}},
        "without the expected output(s) verdict",
    ),
]


@pytest.mark.parametrize(("name", "fields", "cause"), FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failed_agent_takes_the_stages_on_error_path(
    stack: Stack, name: str, fields: dict[str, Any], cause: str
) -> None:
    r = Router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    r.task()
    r.begun()
    _, routed = r.ended(**fields)
    assert routed["pipeline_stage"]["outcome"] == "Squadron.StageFailed"
    _, tell = r.task()
    assert tell["pipeline_task"] == "tell"
    assert stack.finished(arn)["status"] == "SUCCEEDED"  # on_error went to `tell`, which completes
    assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments][-1] == "The review failed"
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    failed = [e["taskFailedEventDetails"] for e in history if e["type"] == "TaskFailed"]
    assert failed and cause in failed[0]["cause"], failed


def test_a_role_gone_from_the_configuration_fails_the_stage_with_the_reason(stack: Stack) -> None:
    r = Router(stack)
    r.policy = RoutingPolicy(role_kinds={"pm": r.world.policy.kind_of("pm")})  # pr-review removed
    arn = started(stack, REVIEW_THEN_COMMENT)
    _, summary = r.task()
    assert summary["answered"] is True and summary["outcome"] == "Squadron.StageFailed"
    assert r.world.launcher.launched == {} and r.world.registry.get_agent(REVIEWER) is None
    r.task()  # tell
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    (failed,) = [e["taskFailedEventDetails"] for e in history if e["type"] == "TaskFailed"]
    assert "role 'pr-review' is not in the repository's configuration now" in failed["cause"]


TIMED = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: review
        type: agent
        agent: pr-review
        action: "Review"
        timeout: 1s
"""


def test_a_stage_that_timed_out_stops_its_agent_and_the_agents_later_completion_moves_nothing(
    stack: Stack,
) -> None:
    r = Router(stack)
    reported: list[Any] = []

    def report(event: Any) -> bool:
        reported.append(event)
        return True

    r.tasks.events = report
    arn = started(stack, TIMED)
    r.task()
    r.begun()
    launched = r.world.agent(REVIEWER).task_arn
    assert launched is not None

    # its timeout ran out while the agent worked: the run asks the router to stop the agent
    body, stop = r.task()
    assert (stop["pipeline_task"], stop["answered"]) == ("review.stop", True)
    assert stack.finished(arn)["status"] == "FAILED"
    agent = r.world.agent(REVIEWER)
    assert agent.status is AgentStatus.CANCELLED
    assert [arn for arn, _ in r.world.launcher.stopped] == [launched]
    wait = r.world.registry.stage_wait(REVIEWER)
    assert wait is not None and wait.sent  # settled: the agent's end sends nothing
    # one transition reported: the stage's stop step, answered
    assert [(e.detail_type, e.data["stage"], e.data["step"]) for e in reported] == [
        ("pipeline.stage_changed.v1", "review.stop", "stop")
    ]

    # the same stop delivered again stops nothing twice
    r.dispatch.handle(body)
    assert len(r.world.launcher.stopped) == 1

    # the agent's late end (it was working when stopped) moves no run and answers nothing
    _, routed = r.ended(outcome="idle", launch_token=agent.launch_token)
    assert not (routed.get("pipeline_stage") or {}).get("answered")
    assert stack.finished(arn)["status"] == "FAILED"


def test_an_agent_stage_stops_its_agent_only_when_its_timeout_runs_out_for_good() -> None:
    """An extension enters the stage again (the agent keeps working on it); only the timeout past
    the last extension goes through the stage's stop task, before its notification and escalation."""
    text = TIMED.replace(
        "timeout: 1s",
        "timeout: 1h\n        on_timeout: {extend: 1h, max_extensions: 1, then: escalate, notify: {message: late}}",
    )
    pipelines = parse_files(files_with(text)).config.pipelines
    states = compile_pipeline("p", pipelines, queue_url="q", repository_id=42, children={}).definition[
        "States"
    ]
    assert states["review.timeout"]["Default"] == "review.stop"
    assert states["review.stop"]["Next"] == "review.notify-end"
    assert json.loads(states["review.stop"]["Parameters"]["MessageBody"]["config"])["agent"] == "pr-review"
    assert states["review.extended"]["Next"] == "review.notify-ext"  # an extension stops nothing


def test_an_earlier_task_of_the_agent_ending_does_not_answer_the_stage(stack: Stack) -> None:
    r = Router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    r.task()
    r.begun()
    stale = r.world.agent(REVIEWER).launch_token.replace("-l1", "-l0")
    _, routed = r.ended(outcome="idle", outputs={"verdict": "forged"}, launch_token=stale)
    assert "pipeline_stage" not in routed
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    wait = r.world.registry.stage_wait(REVIEWER)
    assert wait is not None and wait.answer is None


def test_another_agents_task_cannot_complete_the_stage(stack: Stack) -> None:
    # The attacker: a task of another agent of the repository (say, a prompt-injected dev agent)
    # sends an end that names the reviewer, with outputs it chose.
    r = Router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    r.task()
    r.begun()
    # the reviewer's own launch token, sent by the dev agent's task
    envelope = r.end_of(
        REVIEWER, source_agent="42-7-feat-dev", outcome="idle", outputs={"verdict": "approve everything"}
    )
    routed = r.dispatch.handle(envelope.to_message())
    assert "pipeline_stage" not in routed
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    wait = r.world.registry.stage_wait(REVIEWER)
    assert wait is not None and wait.answer is None  # what the attacker got: nothing


def test_a_task_whose_attempt_stopped_before_its_commit_launches_once_when_delivered_again(
    stack: Stack,
) -> None:
    r = Router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    message = wait_for("a task", r._receive)
    commit = r.world.registry.commit

    def lost(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the router stopped here")

    r.world.registry.commit = lost  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        r.dispatch.handle(message["Body"])
    assert r.world.registry.stage_wait(REVIEWER) is not None and r.world.launcher.launched == {}
    r.world.registry.commit = commit  # type: ignore[method-assign]
    summary = r.dispatch.handle(message["Body"])
    assert summary["waiting"] == REVIEWER
    assert len(r.world.launcher.launched) == 1
    r.dispatch.handle(message["Body"])  # and once more: nothing
    assert len(r.world.launcher.launched) == 1
    r.begun()
    r.ended(outcome="idle", outputs={"verdict": "ok"})
    r.task()
    assert stack.finished(arn)["status"] == "SUCCEEDED"


TWO_RUNS = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - {id: review, type: agent, agent: pr-review, action: "Review", timeout: 1h}
"""


def test_a_second_run_waits_its_turn_until_the_first_runs_task_is_over(stack: Stack) -> None:
    r = Router(stack)
    first = started(stack, TWO_RUNS)
    r.task()
    pipelines = parse_files(files_with(TWO_RUNS)).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, "p", compiled.definition).version_arn
    second = stack.pipelines.start(
        version, execution_name("d-2", "p"), run_input(42, 7, {"n": 7})
    ).execution_arn
    _, busy = r.task()
    # the reviewer works the first run's stage: the second's fails saying so (its on_error applies)
    assert busy["outcome"] == "Squadron.StageFailed"
    assert stack.finished(second)["status"] == "FAILED"
    history = stack.sfn.get_execution_history(executionArn=second)["events"]
    (failed,) = [e["taskFailedEventDetails"] for e in history if e["type"] == "TaskFailed"]
    assert "is working on stage 'review'" in failed["cause"] and first in failed["cause"]
    # an hour on, the first run's task is over (its timeout): a third run takes the reviewer over
    r.world.now += timedelta(hours=1, seconds=1)
    third = stack.pipelines.start(
        version, execution_name("d-3", "p"), run_input(42, 7, {"n": 7})
    ).execution_arn
    _, taken = r.task()
    assert taken["waiting"] == REVIEWER
    wait = r.world.registry.stage_wait(REVIEWER)
    assert wait is not None and wait.execution_arn == third
    r.begun()
    r.ended(outcome="idle")
    assert stack.finished(third)["status"] == "SUCCEEDED"


PARALLEL = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: reviews
        type: parallel
        branches:
          - {id: sec, agent: security-review, action: "Look for injection"}
          - {id: code, agent: pr-review, action: "Review the code"}
"""


def test_agent_branches_of_a_parallel_stage_each_put_their_role_to_work(stack: Stack) -> None:
    r = Router(stack)
    arn = started(stack, PARALLEL)
    handled = sorted((r.task()[1]["waiting"], r.task()[1]["waiting"]))
    assert handled == ["42-7-pr-review", "42-7-security-review"]
    assert sorted(a for a, _, _ in r.world.launcher.launched.values()) == handled
    for agent_id in handled:
        r.begun(agent_id)
        _, routed = r.ended(agent_id, outcome="idle")
        assert routed["pipeline_stage"]["outcome"] == "passed"
    assert stack.finished(arn)["status"] == "SUCCEEDED"


PARALLEL_TIMED = PARALLEL.replace(
    '{id: sec, agent: security-review, action: "Look for injection"}',
    '{id: sec, agent: security-review, action: "Look for injection", timeout: 1s}',
)
SECURITY = "42-7-security-review"


def test_an_agent_branch_that_timed_out_stops_its_agent_as_an_agent_stage_does(stack: Stack) -> None:
    r = Router(stack)
    arn = started(stack, PARALLEL_TIMED)
    handled = sorted((r.task()[1]["waiting"], r.task()[1]["waiting"]))
    assert handled == [REVIEWER, SECURITY]
    for agent_id in handled:
        r.begun(agent_id)
    launched = r.world.agent(SECURITY).task_arn
    assert launched is not None

    # the branch's timeout ran out while its agent worked: the branch asks the router to stop it
    _, stop = r.task()
    assert (stop["pipeline_task"], stop["answered"]) == ("sec.stop", True)
    assert r.world.agent(SECURITY).status is AgentStatus.CANCELLED
    assert [arn for arn, _ in r.world.launcher.stopped] == [launched]
    # the timeout goes on to the parallel stage: on its way out it stops its other branch's agent
    # (its own stopped agent is left as it is), and with no on_timeout there the run fails
    reviewer = r.world.agent(REVIEWER).task_arn
    _, own = r.task()
    assert (own["pipeline_task"], own["answered"]) == ("sec.ended-2", True)  # the 2nd catch: States.ALL
    _, other = r.task()
    assert (other["pipeline_task"], other["answered"]) == ("code.ended-2", True)
    assert r.world.agent(REVIEWER).status is AgentStatus.CANCELLED
    assert [arn for arn, _ in r.world.launcher.stopped] == [launched, reviewer]
    ended = stack.finished(arn)
    assert ended["status"] == "FAILED"
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    failed = [e["executionFailedEventDetails"] for e in history if e["type"] == "ExecutionFailed"]
    assert [f["error"] for f in failed] == ["Squadron.Failed"]

    # the stopped agent's late end answers nothing
    agent = r.world.agent(SECURITY)
    _, routed = r.ended(SECURITY, outcome="idle", launch_token=agent.launch_token)
    assert not (routed.get("pipeline_stage") or {}).get("answered")


JOIN_ANY = PARALLEL.replace("type: parallel", "type: parallel\n        join: any")


@pytest.mark.parametrize(
    ("join", "first_end", "status"),
    [
        ("any", {"outcome": "idle"}, "SUCCEEDED"),
        ("all", {"outcome": "escalated", "reason": "stuck"}, "FAILED"),
    ],
    ids=["join any: the first branch done", "a branch failed"],
)
def test_a_parallel_stage_that_ended_early_stops_its_other_branches_agents_once(
    stack: Stack, join: str, first_end: dict[str, str], status: str
) -> None:
    r = Router(stack)
    arn = started(stack, JOIN_ANY if join == "any" else PARALLEL)
    handled = sorted((r.task()[1]["waiting"], r.task()[1]["waiting"]))
    assert handled == [REVIEWER, SECURITY]
    for agent_id in handled:
        r.begun(agent_id)
    reviewer = r.world.agent(REVIEWER).task_arn
    assert reviewer is not None

    # the security branch ends first (done, or failed): the stage is over for the reviewer too
    r.ended(SECURITY, **first_end)
    # join any: the 1st catch (Squadron.JoinAny); a failure: the 2nd of join all (States.ALL)
    ended = "sec.ended" if join == "any" else "sec.ended-2"
    _, own = r.task()
    assert (own["pipeline_task"], own["answered"]) == (ended, True)
    assert r.world.agent(SECURITY).status is not AgentStatus.CANCELLED  # it ended its branch itself
    body, other = r.task()
    assert (other["pipeline_task"], other["answered"]) == (ended.replace("sec", "code"), True)
    assert r.world.agent(REVIEWER).status is AgentStatus.CANCELLED
    assert [arn for arn, _ in r.world.launcher.stopped] == [reviewer]
    assert stack.finished(arn)["status"] == status

    # the same stop delivered again stops nothing more; the stopped agent's late end moves nothing
    r.dispatch.handle(body, "again")
    assert [arn for arn, _ in r.world.launcher.stopped] == [reviewer]
    agent = r.world.agent(REVIEWER)
    _, routed = r.ended(REVIEWER, outcome="idle", launch_token=agent.launch_token)
    assert not (routed.get("pipeline_stage") or {}).get("answered")


#: (why, the parallel stage's join, its first branch, each catch's first state on the way out)
STAGE_ENDS = [
    (
        "join any: the first branch done, then a failure, each stops the agent branches first",
        "any",
        "{id: sec, agent: security-review}",
        {"Squadron.JoinAny": "sec.ended", "Squadron.Cancelled": "sec.ended-2", "States.ALL": "sec.ended-3"},
    ),
    (
        "join all: a failure stops them; an action branch has no agent to stop",
        "all",
        "{id: sec, type: action, action: comment, config: {message: hi}}",
        {"Squadron.Cancelled": "code.ended", "States.ALL": "code.ended-2"},
    ),
]


@pytest.mark.parametrize(
    ("join", "branch", "ends"), [c[1:] for c in STAGE_ENDS], ids=[c[0] for c in STAGE_ENDS]
)
def test_a_parallel_stage_stops_its_agent_branches_on_every_way_out_but_its_end(
    join: str, branch: str, ends: dict[str, str]
) -> None:
    text = (
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        f"      - id: reviews\n        type: parallel\n        join: {join}\n        branches:\n"
        f"          - {branch}\n          - {{id: code, agent: pr-review}}\n"
    )
    pipelines = parse_files(files_with(text)).config.pipelines
    states = compile_pipeline("p", pipelines, queue_url="q", repository_id=42, children={}).definition[
        "States"
    ]
    parallel = states["reviews"]
    assert {c["ErrorEquals"][0]: c["Next"] for c in parallel["Catch"]} == ends
    assert parallel["Next"] not in ends.values()  # a join all that ends with every branch stops nothing
    for number, (error, first) in enumerate(ends.items(), start=1):
        chain, after = [], first
        while after.endswith(".ended") or ".ended-" in after:
            chain.append(after)
            stop = states[after]
            body = stop["Parameters"]["MessageBody"]
            assert (body["stage_type"], body["step"]) == ("agent", "stop")
            assert stop["Catch"][0]["Next"] == stop["Next"]  # answered whatever happens
            after = stop["Next"]
        agents = ["sec", "code"] if "agent:" in branch else ["code"]
        assert chain == [a + (".ended" if number == 1 else f".ended-{number}") for a in agents]
        ending = {"Squadron.JoinAny": parallel["Next"], "Squadron.Cancelled": "__cancel__"}
        assert after == ending.get(error, "__fail__")


#: (why, the parallel stage's join, its first branch, the states that branch has)
BRANCH_TIMEOUTS = [
    (
        "an agent branch with a timeout stops its agent, then ends as timed out",
        "all",
        "{id: sec, agent: security-review, timeout: 1h}",
        {"sec", "sec.stop", "sec.timed-out"},
    ),
    (
        "an agent branch without a timeout has the stage's, and nothing to stop of its own",
        "all",
        "{id: sec, agent: security-review}",
        {"sec", "sec.timed-out"},
    ),
    (
        "an agent branch of join any with a timeout",
        "any",
        "{id: sec, agent: security-review, timeout: 1h}",
        {"sec", "sec.first", "sec.stop", "sec.timed-out"},
    ),
    (
        "an action branch with a timeout has no agent to stop: it ends as timed out",
        "all",
        "{id: sec, type: action, action: comment, config: {message: hi}, timeout: 1h}",
        {"sec", "sec.timed-out"},
    ),
]


@pytest.mark.parametrize(
    ("join", "branch", "states"), [c[1:] for c in BRANCH_TIMEOUTS], ids=[c[0] for c in BRANCH_TIMEOUTS]
)
def test_an_agent_branch_compiles_a_stop_only_with_a_timeout(
    join: str, branch: str, states: set[str]
) -> None:
    text = (
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        f"      - id: reviews\n        type: parallel\n        join: {join}\n"
        "        timeout: 2h\n        on_timeout: {then: escalate}\n        branches:\n"
        f"          - {branch}\n          - {{id: code, agent: pr-review}}\n"
    )
    pipelines = parse_files(files_with(text)).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url="q", repository_id=42, children={}).definition
    parallel = compiled["States"]["reviews"]
    (sec, code) = parallel["Branches"]
    assert set(sec["States"]) == states
    # no timeout of its own: the stage's, ended by name, its agent stopped by the stage
    assert set(code["States"]) - {"code.first"} == {"code", "code.timed-out"}
    # the parallel stage's on_timeout takes a branch's timeout, raised again after its stop
    (timeouts,) = [c for c in parallel["Catch"] if "States.Timeout" in c["ErrorEquals"]]
    assert "Squadron.BranchTimedOut" in timeouts["ErrorEquals"]
    if "sec.stop" in states:
        task, stop = sec["States"]["sec"], sec["States"]["sec.stop"]
        assert task["TimeoutSeconds"] == 3600
        assert task["Catch"] == [
            {
                "ErrorEquals": ["States.Timeout", "States.HeartbeatTimeout"],
                "ResultPath": "$.error",
                "Next": "sec.stop",
            }
        ]
        body = stop["Parameters"]["MessageBody"]
        assert (body["stage_type"], body["step"]) == ("agent", "stop")
        assert json.loads(body["config"])["agent"] == "security-review"
        assert stop["Next"] == "sec.timed-out" and stop["Catch"][0]["Next"] == "sec.timed-out"
        assert sec["States"]["sec.timed-out"]["Error"] == "Squadron.BranchTimedOut"


STAGE_TIMED = PARALLEL.replace(
    "type: parallel", "type: parallel\n        timeout: 1s\n        on_timeout: {then: escalate}"
)


def test_a_parallel_stage_whose_timeout_ran_out_stops_its_agents_and_escalates(stack: Stack) -> None:
    """The stage's own timeout bounds its branches (a ``Parallel`` has none of its own): when it
    runs out the stage's ``on_timeout`` applies, its branches' agents stopped first."""
    r = Router(stack)
    arn = started(stack, STAGE_TIMED)
    handled = sorted((r.task()[1]["waiting"], r.task()[1]["waiting"]))
    assert handled == [REVIEWER, SECURITY]
    for agent_id in handled:
        r.begun(agent_id)
    launched = [r.world.agent(agent_id).task_arn for agent_id in (SECURITY, REVIEWER)]

    # the stage's timeout ran out while both agents worked: each branch's agent is stopped
    for stop in ("sec.expired", "code.expired"):
        _, stopped = r.task()
        assert (stopped["pipeline_task"], stopped["answered"]) == (stop, True)
    assert [r.world.agent(agent_id).status for agent_id in handled] == [AgentStatus.CANCELLED] * 2
    assert [arn for arn, _ in r.world.launcher.stopped] == launched
    # then its on_timeout: the run escalates
    _, escalated = r.task()
    assert escalated["pipeline_task"] == "__escalate__"
    assert stack.finished(arn)["status"] == "FAILED"
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    failed = [e["executionFailedEventDetails"] for e in history if e["type"] == "ExecutionFailed"]
    assert [f["error"] for f in failed] == ["Squadron.Escalated"]

    # a stopped agent's late end answers nothing
    agent = r.world.agent(REVIEWER)
    _, routed = r.ended(REVIEWER, outcome="idle", launch_token=agent.launch_token)
    assert not (routed.get("pipeline_stage") or {}).get("answered")


def test_a_parallel_stage_extended_waits_for_the_same_agents_again(stack: Stack) -> None:
    """An extension enters the stage again with the extension as its timeout: nothing is stopped,
    the branches wait for the agents already at work, whose ends complete the stage."""
    r = Router(stack)
    arn = started(
        stack,
        STAGE_TIMED.replace("{then: escalate}", "{extend: 1h, max_extensions: 1, then: escalate}"),
    )
    handled = sorted((r.task()[1]["waiting"], r.task()[1]["waiting"]))
    assert handled == [REVIEWER, SECURITY]
    for agent_id in handled:
        r.begun(agent_id)

    # the first timeout ran out: the branches are entered again, each waiting on its agent
    again = sorted((r.task()[1]["waiting"], r.task()[1]["waiting"]))
    assert again == handled
    assert r.world.launcher.stopped == []
    assert len(r.world.launcher.launched) == 2  # no second launch either
    assert [len(instructions(r, agent_id)) for agent_id in handled] == [1, 1]  # nor a second word
    for agent_id in handled:
        _, routed = r.ended(agent_id, outcome="idle")
        assert routed["pipeline_stage"]["outcome"] == "passed"
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert r.world.launcher.stopped == []


def started_once(r: Router) -> list[str]:
    """The agents started (a launch's first task), in order of id; each once when none twice."""
    return sorted(agent for agent, purpose, _ in r.world.launcher.launched.values() if purpose == "start")


def instructions(r: Router, agent_id: str) -> list[str]:
    """The stage instructions the agent was given (inbox items of the stage's kind, read or not)."""
    return [
        item.summary for item in r.world.registry.inbox.get(agent_id, {}).values() if item.kind == STAGE_ITEM
    ]


#: A parallel stage (join all) whose timeout may be extended: an agent branch and a comment
#: that finish in time, a slow agent branch; the next stage reads the finished branch's outputs.
EXTENDED_PART_DONE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: reviews
        type: parallel
        timeout: 2s
        on_timeout: {extend: 1h, max_extensions: 1, then: escalate}
        branches:
          - {id: sec, agent: security-review, action: "Look for injection"}
          - {id: code, agent: pr-review, action: "Review the code"}
          - {id: say, type: action, action: comment, config: {message: "Reviews begun"}}
      - id: told
        type: action
        action: comment
        config: {message: "Security: {{ stages.reviews.sec.outputs.verdict }}"}
"""


def test_a_parallel_stage_extended_waits_only_for_its_branches_still_at_work(stack: Stack) -> None:
    """A branch done before the stage's timeout ran out keeps its result through the extension:
    its agent is not put to work again, its comment is not posted again; the stage completes when
    the slow branch does, with the finished branch's outputs for the stages after it."""
    r = Router(stack)
    arn = started(stack, EXTENDED_PART_DONE)
    # within the stage's first timeout: both agents at work, the comment posted, one agent done
    first = {summary["pipeline_task"]: summary for summary in (r.task()[1] for _ in range(3))}
    assert (first["sec"]["waiting"], first["code"]["waiting"]) == (SECURITY, REVIEWER)
    assert first["say"]["answered"] is True
    for agent_id in (SECURITY, REVIEWER):
        r.begun(agent_id)
    _, routed = r.ended(SECURITY, outcome="idle", outputs={"verdict": "no injection"})
    assert routed["pipeline_stage"]["outcome"] == "passed"

    # the timeout ran out with the reviewer still at work: the stage is extended, and only its
    # branch waits again, on the same agent
    _, again = r.task()
    assert (again["pipeline_task"], again["waiting"]) == ("code", REVIEWER)
    r.ended(REVIEWER, outcome="idle")
    _, told = r.task()
    assert (told["pipeline_task"], told["answered"]) == ("told", True)
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held

    # what the world got: each finished branch's effect once
    assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments] == [
        "Reviews begun",
        "Security: no injection",
    ]
    # each agent started once and told its stage once (the extension told the reviewer nothing)
    assert started_once(r) == [REVIEWER, SECURITY]
    assert [len(instructions(r, agent_id)) for agent_id in (SECURITY, REVIEWER)] == [1, 1]
    assert r.world.agent(SECURITY).status is not AgentStatus.CANCELLED
    assert r.world.launcher.stopped == []
    stages = json.loads(held["output"])["data"]["stages"]
    assert stages["reviews"]["sec"]["outputs"] == {"verdict": "no injection"}


#: A parallel stage with a sub-pipeline branch (a child run, waiting on its one task) beside an
#: action branch; the parallel stage's join and timeout filled in per case.
SUB_BRANCH = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: both
        type: parallel
        join: JOIN
        TIMEOUT
        branches:
          - {id: sub, type: pipeline, pipeline: child}
          - {id: say, type: action, action: comment, config: {message: hi}}
  child:
    stages:
      - {id: hold, type: action, action: comment, config: {message: wait}}
"""

#: (why, the join, the stage's timeout, how the action branch ends, the run's status)
SUB_ENDS = [
    ("join any: the other branch done first", "any", "", "done", "SUCCEEDED"),
    ("join all: the other branch failed", "all", "", "failed", "FAILED"),
    ("the stage's timeout ran out", "all", "timeout: 1s\n        on_timeout: {then: fail}", None, "FAILED"),
]


@pytest.mark.parametrize(
    ("join", "timeout", "other", "status"), [c[1:] for c in SUB_ENDS], ids=[c[0] for c in SUB_ENDS]
)
def test_a_parallel_stage_that_ended_early_stops_its_sub_pipeline_branchs_child_run(
    stack: Stack, join: str, timeout: str, other: str | None, status: str
) -> None:
    """Step Functions abandons the branch's ``startExecution.sync`` task, not the child run it
    started: the stage stops it on its way out, as it stops its agents."""
    r = Router(stack)
    versions = publish(stack, SUB_BRANCH.replace("JOIN", join).replace("TIMEOUT", timeout), "p")
    arn = stack.pipelines.start(
        versions["p"], execution_name("d-1", "p"), run_input(42, 7, {"n": 7})
    ).execution_arn
    # the child run's task and the action branch's, read as the router reads them (not carried out)
    tasks = {}
    for _ in range(2):
        task = parse_task(wait_for("a task", r._receive)["Body"])
        assert task is not None
        tasks[task.stage] = task
    child = tasks["hold"].execution_arn
    assert child != arn and tasks["say"].execution_arn == arn
    if other == "done":
        assert stack.pipelines.answer(tasks["say"].task_token, StageSucceeded(output={})).delivered
    elif other == "failed":
        assert stack.pipelines.answer(
            tasks["say"].task_token, StageFailed(error=STAGE_FAILED, cause="it broke")
        ).delivered

    def over() -> str | None:
        got = r._receive()  # the stage's way out: what it asks the router, the router carries out
        if got is not None:
            r.dispatch.handle(got["Body"], got["MessageId"])
        held = stack.sfn.describe_execution(executionArn=arn)["status"]
        return None if held == "RUNNING" else str(held)

    assert wait_for("the run to end", over) == status
    assert stack.sfn.describe_execution(executionArn=child)["status"] == "ABORTED"


class LosesTheFirstAnswer:
    """Step Functions, and a router that stops right before its first answer is sent."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.lost = 0

    def answer(self, token: str, answer: Any) -> Any:
        if not self.lost:
            self.lost += 1
            raise RuntimeError("the router stopped before the answer was sent")
        return self.stack.pipelines.answer(token, answer)

    def describe(self, execution_arn: str) -> Any:
        return self.stack.pipelines.describe(execution_arn)


def test_an_end_delivered_again_sends_the_answer_kept_when_the_first_attempt_stopped(stack: Stack) -> None:
    r = Router(stack)
    assert r.tasks.agents is not None
    r.tasks.agents.answers = LosesTheFirstAnswer(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    r.task()
    r.begun()
    envelope = r.end_of(REVIEWER, outcome="idle", outputs={"verdict": "kept"})
    with pytest.raises(RuntimeError):
        r.dispatch.handle(envelope.to_message())
    wait = r.world.registry.stage_wait(REVIEWER)
    assert wait is not None and wait.answer is not None and not wait.sent  # kept, not sent
    # the queue delivers the same end again: the router resumes what it routed (nothing twice
    # there) and the kept answer is sent
    again = r.dispatch.handle(envelope.to_message())
    assert again["pipeline_stage"]["answered"] is True
    _, say = r.task()
    assert say["pipeline_task"] == "say"
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments] == ["Verdict: kept"]


DEV = "42-7-feat-dev"
IMPLEMENT = """pipelines:
  p:
    trigger: {event: issues.labeled}
    stages:
      - {id: implement, type: agent, agent: feat-dev, action: "Implement #{{ trigger.n }}", continue_session: true}
"""


def _end_of_the_first_task(r: Router, first: str) -> dict[str, Any]:
    _, routed = r.ended(DEV, outcome="sleeping", reason="blocked by #9", launch_token=first)
    return routed


def _blocker_closed(r: Router, first: str) -> dict[str, Any]:
    return r.dispatch.handle(r.world.events.closed(9).to_message())


#: Issue 30: the dev agent files its blocker and its first task winds down (its "sleeping" end on
#: its way) while a person closes the blocker — in either order, the stage waits for the task the
#: close wakes.
ORDERS = [
    ("its end, then the close", (_end_of_the_first_task, _blocker_closed)),
    ("the close while its task still ends", (_blocker_closed, _end_of_the_first_task)),
]
#: What the woken task does, and how the run ends.
WOKEN = [
    ("completes", {"outcome": "idle"}, "SUCCEEDED"),
    ("escalates", {"outcome": "escalated", "reason": "it cannot decide"}, "FAILED"),
]


SLEEPS = [
    pytest.param(steps, fields, status, id=f"{order}; the woken task {woken}")
    for order, steps in ORDERS
    for woken, fields, status in WOKEN
]


@pytest.mark.parametrize(("steps", "fields", "status"), SLEEPS)
def test_a_stage_whose_agent_sleeps_on_a_blocker_is_answered_by_the_task_its_close_wakes(
    stack: Stack, steps: Any, fields: dict[str, Any], status: str
) -> None:
    r = Router(stack)
    arn = started(stack, IMPLEMENT)
    _, summary = r.task()
    assert summary["waiting"] == DEV
    r.begun(DEV)
    first = r.world.agent(DEV).launch_token
    asleep = r.world.events.register_blocker(7, 9, agent_id=DEV, token=first, sleep=True)
    r.dispatch.handle(asleep.to_message())
    assert r.world.agent(DEV).status is AgentStatus.SLEEPING

    for step in steps:
        routed = step(r, first)
        assert "pipeline_stage" not in routed, routed  # neither settles the stage
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert r.world.agent(DEV).launch_token != first  # woken: its next task is launched

    r.begun(DEV)
    _, routed = r.ended(DEV, **fields)
    assert routed["pipeline_stage"]["answered"] is True
    assert stack.finished(arn)["status"] == status


#: A sub-pipeline whose timeout may be extended, as a stage and as a parallel stage's branch
#: (beside an action branch done at once): its child run waits on one task (not answered in time).
SUB_EXTENDED = {
    "a sub-pipeline stage": """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: sub
        type: pipeline
        pipeline: child
        timeout: 1s
        on_timeout: {extend: 1h, max_extensions: 1, then: fail}
  child:
    stages:
      - {id: hold, type: action, action: comment, config: {message: wait}}
""",
    "a sub-pipeline branch": SUB_BRANCH.replace("JOIN", "all").replace(
        "TIMEOUT", "timeout: 1s\n        on_timeout: {extend: 1h, max_extensions: 1, then: fail}"
    ),
}


@pytest.mark.parametrize("yaml", list(SUB_EXTENDED.values()), ids=list(SUB_EXTENDED))
def test_a_sub_pipeline_extended_waits_for_the_same_child_run(stack: Stack, yaml: str) -> None:
    """An extension gives the child run at work more time: the stage waits on it again (no second
    child run is started beside it), and its end completes the stage."""
    r = Router(stack)
    versions = publish(stack, yaml, "p")
    arn = stack.pipelines.start(
        versions["p"], execution_name("d-1", "p"), run_input(42, 7, {"n": 7})
    ).execution_arn
    wanted = {"hold", "say"} if "id: say" in yaml else {"hold"}
    tasks: dict[str, Any] = {}
    while set(tasks) != wanted:
        task = parse_task(wait_for("a task", r._receive)["Body"])
        assert task is not None
        tasks[task.stage] = task
    if "say" in tasks:  # the action branch is done at once
        assert stack.pipelines.answer(tasks["say"].task_token, StageSucceeded(output={})).delivered
    child = tasks["hold"].execution_arn

    def extended() -> bool:
        history = stack.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        names = [str(e.get("stateEnteredEventDetails", {}).get("name")) for e in history]
        return any(name.endswith(".extended") for name in names)

    wait_for("the stage's first timeout to run out", extended)
    # the child run keeps working, and finishes: its end is the stage's
    assert stack.pipelines.answer(tasks["hold"].task_token, StageSucceeded(output={"said": "wait"})).delivered
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held
    machine = versions["child"].rsplit(":", 1)[0]  # the version's state machine
    children = [e["executionArn"] for e in stack.sfn.list_executions(stateMachineArn=machine)["executions"]]
    assert children == [child]
    assert r._receive() is None  # nor was anything of the child asked again


#: A sub-pipeline stage whose extension is announced (a task the router answers) before the child's
#: task is started again: the child's end can come first, deterministically.
SUB_ANNOUNCED = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: sub
        type: pipeline
        pipeline: child
        timeout: 1s
        on_timeout: {extend: 1h, max_extensions: 1, then: fail, notify: {message: late}}
      - id: said
        type: action
        action: comment
        config: {message: "{{ stages.sub.output.data.stages.hold.said }}"}
  child:
    stages:
      - {id: hold, type: action, action: comment, config: {message: wait}}
"""


def test_a_child_run_that_ended_before_its_extension_started_it_again_is_the_stages_result(
    stack: Stack,
) -> None:
    """The child run ends between its stage's timeout and the extension's start of it again (its
    name is taken by a run that is over): the stage takes the child's result, and its work is not
    done twice by a new child."""
    r = Router(stack)
    versions = publish(stack, SUB_ANNOUNCED, "p")
    arn = stack.pipelines.start(
        versions["p"], execution_name("d-1", "p"), run_input(42, 7, {"n": 7})
    ).execution_arn
    hold = parse_task(wait_for("the child's task", r._receive)["Body"])
    assert hold is not None and hold.stage == "hold"
    announced = parse_task(wait_for("the extension's notice", r._receive)["Body"])
    assert announced is not None and announced.stage == "sub.notify-ext"
    # the child ends while its stage announces the extension, before it is started again
    assert stack.pipelines.answer(hold.task_token, StageSucceeded(output={"said": "done in time"})).delivered
    machine = versions["child"].rsplit(":", 1)[0]
    wait_for(
        "the child's end",
        lambda: (
            stack.sfn.list_executions(stateMachineArn=machine, statusFilter="SUCCEEDED")["executions"] or None
        ),
    )
    assert stack.pipelines.answer(announced.task_token, StageSucceeded(output={"notified": True})).delivered

    _, said = r.task()  # the next stage reads the child's output
    assert said["pipeline_task"] == "said"
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held
    assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments] == ["done in time"]
    assert len(stack.sfn.list_executions(stateMachineArn=machine)["executions"]) == 1
    # the stage's result is the child's, as its task's wait would have given it; what was read of
    # the child is not the run's data
    output = json.loads(held["output"])
    assert output["data"]["stages"]["sub"]["output"]["data"]["stages"]["hold"] == {"said": "done in time"}
    assert output["children"] == {"sub": {}}
