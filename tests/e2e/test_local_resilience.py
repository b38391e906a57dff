"""The local stack under the faults a deployment meets: blockers closed out of order, webhooks
duplicated or lost, a router that dies mid-batch, an agent task killed mid-turn.

Each test drives the whole system (sandbox GitHub, ingress, events.fifo on moto, router,
reconciler, agents as local processes through the real Copilot CLI) and checks what a user
would: who woke, how often, and that nothing was lost or done twice.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from squadron.adapters.confinement import AgentDirs
from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.local.model import Json, Turn, calls_since_prompt
from squadron.local.sandbox import Delivery, Fault
from squadron.local.stack import LocalStack
from tests.e2e.conftest import Human, StackFactory, agent, eventually, issue_of, launches, prompts

pytestmark = pytest.mark.e2e

TERMINAL = (AgentStatus.COMPLETED, AgentStatus.CANCELLED)


class DevScript:
    """The dev agents' model: per issue, what to do on start and what to do once woken."""

    def __init__(self, blocked_by: dict[int, int] | None = None) -> None:
        self.blocked_by = blocked_by or {}
        self.requests: list[Json] = []
        self._lock = threading.Lock()

    def __call__(self, request: Json) -> Turn | None:
        number = issue_of(request)
        if number is None:
            return None  # the PM: the quiet default
        with self._lock:
            self.requests.append(request)
        done = calls_since_prompt(request)
        woken = len(prompts(request)) > 1
        plan: list[Turn]
        if not woken and number in self.blocked_by:
            blocker = self.blocked_by[number]
            plan = [
                ("check_for_events", {}),
                ("report_blocked", {"blocker_issue": blocker, "reason": f"#{number} builds on #{blocker}"}),
                f"Blocked on #{blocker}; sleeping.",
            ]
        else:
            plan = [
                ("check_for_events", {}),
                ("report_complete", {"summary": f"#{number} needs no code change."}),
                "Done.",
            ]
        return self.step(request, plan, done)

    def step(self, request: Json, plan: list[Turn], done: list[str]) -> Turn:
        return plan[len(done)] if len(done) < len(plan) else "Done."

    def of(self, number: int) -> list[Json]:
        with self._lock:
            return [r for r in self.requests if issue_of(r) == number]


def idle(stack: LocalStack, agent_id: str) -> AgentRecord | None:
    """The agent once it is ACTIVE with no task (between events) and its process has exited."""
    record = agent(stack, agent_id)
    assert stack.launcher is not None
    if record is None or record.status is not AgentStatus.ACTIVE:
        return None
    if record.task_arn is not None or record.pending_launch is not None:
        return None  # running, or about to be
    return record if agent_id not in stack.launcher.running_agents() else None


def status(stack: LocalStack, agent_id: str) -> AgentStatus | None:
    record = agent(stack, agent_id)
    return record.status if record is not None else None


def pm_heard(stack: LocalStack, number: int) -> int:
    """How many times the PM's check_for_events answered with issue ``number`` being opened."""
    seen = 0
    for request in stack.model.requests:
        if issue_of(request) is not None:
            continue
        results = [str(m.get("content")) for m in request.get("messages", []) if m.get("role") == "tool"]
        seen = max(seen, sum(len(re.findall(rf"#{number} opened by", r)) for r in results))
    return seen


def test_a_blocker_chain_of_three_closed_out_of_order(local_stack: StackFactory) -> None:
    # #1 builds on #2, which builds on #3. The middle one is closed first.
    script = DevScript(blocked_by={1: 2, 2: 3})
    stack = local_stack(script)
    human = Human(stack)
    for title in ("Reports", "Report storage", "Storage schema"):
        human.open_issue(title, assign=True)
    eventually(lambda: status(stack, "1-1-feat-dev") is AgentStatus.SLEEPING, "#1's agent to sleep on #2")
    eventually(lambda: status(stack, "1-2-feat-dev") is AgentStatus.SLEEPING, "#2's agent to sleep on #3")
    eventually(lambda: idle(stack, "1-3-feat-dev"), "#3's agent to finish and go idle")
    first = agent(stack, "1-1-feat-dev")
    second = agent(stack, "1-2-feat-dev")
    assert first is not None and second is not None
    assert (first.blocked_by, second.blocked_by) == (frozenset({2}), frozenset({3}))

    human.close(2)  # out of order: #3, which #2 waits for, is still open
    eventually(lambda: idle(stack, "1-1-feat-dev"), "#1's agent to wake and finish")
    assert launches(stack, "1-1-feat-dev") == ["start", "wake"]
    woken = script.of(1)[-1]
    assert "Resolved blockers: #2" in prompts(woken)[-1]
    assert any("report_blocked" in str(m.get("tool_calls")) for m in woken["messages"])  # its conversation
    eventually(lambda: status(stack, "1-2-feat-dev") in TERMINAL, "#2's agent to end with its issue")

    human.close(3)
    eventually(lambda: status(stack, "1-3-feat-dev") in TERMINAL, "#3's agent to end with its issue")
    human.close(1)
    eventually(lambda: status(stack, "1-1-feat-dev") in TERMINAL, "#1's agent to end with its issue")
    stack.reconcile()  # the reconciler finds nothing to repair
    assert launches(stack, "1-2-feat-dev") == ["start"]  # #2's agent never woke: its issue closed first
    assert launches(stack, "1-3-feat-dev") == ["start"]
    assert launches(stack, "1-1-feat-dev") == ["start", "wake"]
    assert stack.errors == []


def test_duplicated_deliveries_are_processed_once(local_stack: StackFactory) -> None:
    script = DevScript()
    stack = local_stack(script)
    assert stack.sandbox is not None
    stack.sandbox.fault = lambda delivery: "duplicate"
    human = Human(stack)
    human.open_issue("Export API", assign=True)
    # The comment follows the assignment at once: under the default pipelines the run's stage
    # starts the dev agent a little later, and a writer's comment routed before that is kept for
    # the agent the stage starts (docs/pipelines.md); either way it reaches the agent once.
    human.comment(1, "Also JSON, please.")
    eventually(lambda: idle(stack, "1-1-feat-dev"), "#1's agent to finish")
    eventually(lambda: idle(stack, "1-pm"), "the PM to finish")
    stack.sandbox.wait_for_deliveries()
    assert all(
        d.attempts == 2 for d in stack.sandbox.deliveries if d.payload["sender"]["login"] == "octo-human"
    )
    assert launches(stack, "1-1-feat-dev") == ["start"]
    assert pm_heard(stack, 1) == 1
    last = script.of(1)[-1]  # each request carries the whole conversation: the last one tells all
    told = " ".join(str(m.get("content")) for m in last["messages"] if m.get("role") == "tool")
    assert told.count("Also JSON, please.") == 1  # the comment reached the dev agent once
    assert stack.errors == []


@pytest.mark.parametrize("fault", ["lose", "fail"])
def test_a_dropped_closure_is_healed_by_the_reconciler(local_stack: StackFactory, fault: Fault) -> None:
    script = DevScript(blocked_by={2: 1})
    stack = local_stack(script)
    assert stack.sandbox is not None
    human = Human(stack)
    human.open_issue("Storage schema")  # #1: a human's
    human.open_issue("Report storage", assign=True)  # #2: blocked by #1
    eventually(lambda: status(stack, "1-2-feat-dev") is AgentStatus.SLEEPING, "#2's agent to sleep on #1")

    def drop_the_closure(delivery: Delivery) -> Fault | None:
        closing = delivery.event == "issues" and delivery.action == "closed" and not delivery.redelivery
        return fault if closing else None

    stack.sandbox.fault = drop_the_closure
    human.close(1)
    stack.sandbox.wait_for_deliveries()
    closure = next(d for d in stack.sandbox.deliveries if d.action == "closed")
    assert closure.attempts == 0 and (closure.lost, closure.status_code) == (
        fault == "lose",
        0 if fault == "lose" else 502,
    )
    assert status(stack, "1-2-feat-dev") is AgentStatus.SLEEPING  # the webhook never came

    summary = stack.reconcile()
    assert summary["problems"] == []
    if fault == "fail":
        assert len(summary["redelivered"]) == 1  # GitHub recorded the failure: it is asked again
    else:
        assert summary["redelivered"] == []  # nothing to redeliver: the state on GitHub tells
    assert summary["replayed"], summary  # the closed blocker is replayed from GitHub's state
    eventually(lambda: idle(stack, "1-2-feat-dev"), "#2's agent to wake and finish")
    again = stack.reconcile()
    assert (again["replayed"], again["redelivered"], again["rescued"]) == ([], [], [])
    assert launches(stack, "1-2-feat-dev") == ["start", "wake"]  # woken once, whatever healed it
    assert stack.errors == []


def test_a_router_crash_mid_batch_redelivers_the_batch_and_each_event_counts_once(
    local_stack: StackFactory,
) -> None:
    stack = local_stack(DevScript(), visibility_timeout=2)
    assert stack.sandbox is not None
    human = Human(stack)
    stack.pause_routing()  # events pile up so that the router gets them as one batch
    for title in ("Export API", "Import API", "Audit log"):
        human.open_issue(title)
    stack.sandbox.wait_for_deliveries()
    stack.router_crashes.append(1)  # the next batch: one record processed, then the runtime dies
    stack.resume_routing()
    eventually(lambda: stack.crashed, "the router to crash")
    assert len(stack.crashed[0]) == 3
    crashed = set(stack.crashed[0])
    eventually(
        lambda: crashed <= {r["id"] for r in stack.routed if not r["failed"]},
        "the crashed batch to come back and be routed",
    )
    eventually(lambda: idle(stack, "1-pm"), "the PM to finish")
    eventually(lambda: all(pm_heard(stack, n) for n in (1, 2, 3)), "the PM to hear of every issue")
    assert [pm_heard(stack, n) for n in (1, 2, 3)] == [1, 1, 1]  # none lost, none twice
    assert stack.errors == []


@pytest.mark.parametrize("saved", [True, False], ids=["conversation-saved", "killed-before-saving"])
def test_an_agent_killed_mid_turn_is_relaunched_by_the_reconciler_and_resumes(
    local_stack: StackFactory, tmp_path: Path, saved: bool
) -> None:
    holding, release = threading.Event(), threading.Event()

    class Killable(DevScript):
        def step(self, request: Json, plan: list[Turn], done: list[str]) -> Turn:
            if len(prompts(request)) == 1 and done == ["check_for_events"]:
                holding.set()  # mid-turn: the model is thinking when the task dies
                release.wait(60)
                return "(never heard)"
            return super().step(request, plan, done)

    script = Killable()
    stack = local_stack(script)
    assert stack.launcher is not None
    Human(stack).open_issue("Export API", assign=True)
    eventually(holding.is_set, "the dev agent's second model call")
    copilot_home = AgentDirs(stack.repo_root(1), "1-1-feat-dev").copilot_home
    events = copilot_home / "session-state" / "1-1-feat-dev-g1" / "events.jsonl"
    if saved:  # the CLI writes the conversation a little after it happens
        # Saved means the tool call *and its result*: a call whose result was not written yet is
        # dropped from the resumed conversation (a call without its answer is no valid history).
        eventually(
            lambda: events.exists() and "tool.execution_complete" in events.read_text(), "the session saved"
        )
    stack.launcher.kill("1-1-feat-dev")
    if not saved:  # as when the task dies before the CLI's first write (it writes a little late)
        events.unlink(missing_ok=True)
    release.set()
    eventually(lambda: stack.launcher is not None and stack.launcher.exits, "the ECS task to stop")
    summary = stack.reconcile()
    (rescued,) = summary["rescued"]
    assert re.fullmatch(r"recover-1-1-feat-dev-v\d+-relaunch", rescued), summary
    eventually(lambda: idle(stack, "1-1-feat-dev"), "the relaunched agent to finish")
    assert launches(stack, "1-1-feat-dev") == ["start", "wake"]
    resumed = script.of(1)[-1]
    said = prompts(resumed)
    assert "relaunched by the reconciler" in said[-1]
    if saved:  # the session survived the task: the model sees the conversation from before the kill
        users = [i for i, m in enumerate(resumed["messages"]) if m.get("role") == "user"]
        before = resumed["messages"][users[0] : users[1]]
        assert len(said) == 2 and "Start on issue #1" in said[0]
        assert any("check_for_events" in str(m.get("tool_calls")) for m in before)
        assert "conversation on this assignment was lost" not in said[-1]
    else:  # nothing was saved: a fresh session under the same id, told so, from the issue
        assert len(said) == 1
        assert "conversation on this assignment was lost" in said[0] and "Start on issue #1" in said[0]
    record = agent(stack, "1-1-feat-dev")
    # The relaunched task ran to its end: a later death is a first one again, not a second in a row.
    assert record is not None and record.counters.recoveries == 0
    assert stack.errors == []


def test_a_restart_resumes_where_the_stack_stopped(local_stack: StackFactory, tmp_path: Path) -> None:
    holding, release = threading.Event(), threading.Event()

    class Script(DevScript):
        def step(self, request: Json, plan: list[Turn], done: list[str]) -> Turn:
            if issue_of(request) == 3 and done == ["check_for_events"] and not holding.is_set():
                holding.set()  # #3's agent is mid-turn when the stack stops
                release.wait(60)
                return "(never heard)"
            return super().step(request, plan, done)

    script = Script(blocked_by={2: 1})
    first = local_stack(script)
    human = Human(first)
    human.open_issue("Storage schema")  # #1: a human's
    human.open_issue("Report storage", assign=True)  # #2: its agent sleeps on #1
    eventually(lambda: status(first, "1-2-feat-dev") is AgentStatus.SLEEPING, "#2's agent to sleep on #1")
    human.open_issue("Search", assign=True)  # #3: its agent works when the stack stops
    eventually(holding.is_set, "#3's agent to be mid-turn")
    eventually(lambda: idle(first, "1-pm"), "the PM to finish")
    first.pause_routing()
    human.open_issue("Audit log")  # #4: still queued in events.fifo when the stack stops
    assert first.sandbox is not None
    first.sandbox.wait_for_deliveries()
    first.stop()  # Ctrl-C: #3's agent process is stopped with the rest
    release.set()

    second = local_stack(script)  # the same state directory
    assert second.restored is not None and second.restored["events"] >= 1, second.restored
    assert second.sandbox is not None
    assert [i["title"] for i in second.sandbox.repos["octo/demo"].issues.values()] == [
        "Storage schema",
        "Report storage",
        "Search",
        "Audit log",
    ]
    sleeper = agent(second, "1-2-feat-dev")
    assert sleeper is not None and (sleeper.status, sleeper.blocked_by) == (
        AgentStatus.SLEEPING,
        frozenset({1}),
    )
    # The reconciler's first run relaunches the agent whose process the stop ended; it resumes.
    eventually(lambda: idle(second, "1-3-feat-dev"), "#3's agent to be relaunched and finish")
    assert launches(second, "1-3-feat-dev") == ["wake"]
    assert "relaunched by the reconciler" in prompts(script.of(3)[-1])[-1]
    eventually(lambda: pm_heard(second, 4) == 1, "the event queued before the stop to reach the PM")
    Human(second).close(1)
    eventually(lambda: idle(second, "1-2-feat-dev"), "#2's agent to wake after the restart and finish")
    woken = script.of(2)[-1]
    assert any("report_blocked" in str(m.get("tool_calls")) for m in woken["messages"])  # its session
    assert "Resolved blockers: #1" in prompts(woken)[-1]
    assert second.errors == []


def test_a_maintainer_wakes_a_sleeping_agent_from_the_dashboard_issue(local_stack: StackFactory) -> None:
    """The dashboard issue end to end: opened by the reconciler's sweep in the sandbox, a box ticked
    by a maintainer comes back as the issue's edited webhook, the router wakes the agent, and the
    wake's domain events (the local bus's rule -> the dashboards queue -> its handler) render it
    again, with no reconciler run: the box is cleared and the agent shown at work."""
    stack = local_stack(DevScript(blocked_by={1: 2}), dashboard_refresh_seconds=2)
    assert stack.sandbox is not None
    human = Human(stack)
    reports = human.open_issue("Reports")
    human.open_issue("Data model")  # the blocker exists and is open (a missing one is refused)
    human.assign(reports)
    eventually(lambda: status(stack, "1-1-feat-dev") is AgentStatus.SLEEPING, "#1's agent to sleep on #2")
    stack.reconcile()
    issues = stack.sandbox.repos[stack.options.repo].issues

    def board() -> dict[str, Any] | None:
        return next(
            (
                i
                for i in issues.values()
                if any(label["name"] == "squadron-dashboard" for label in i["labels"])
            ),
            None,
        )

    found = eventually(board, "the dashboard issue")
    assert "- [ ] Wake `feat-dev-1`" in found["body"] and "```mermaid" in found["body"]
    ticked = found["body"].replace("- [ ] Wake `feat-dev-1`", "- [x] Wake `feat-dev-1`")
    Human(stack, login="octo-maintainer").call("PATCH", f"/issues/{found['number']}", body=ticked)
    eventually(lambda: launches(stack, "1-1-feat-dev") == ["start", "wake"], "the agent to wake")
    eventually(lambda: idle(stack, "1-1-feat-dev"), "the woken agent to finish its turn")

    def rendered_from_the_events() -> bool:
        body = str((board() or {}).get("body") or "")
        return "- [x]" not in body and "Wake `feat-dev-1`" not in body and "| ACTIVE | `feat-dev-1`" in body

    eventually(rendered_from_the_events, "the dashboard rendered again from the wake's events")
    assert stack.errors == []
