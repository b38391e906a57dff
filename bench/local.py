"""The whole local stack: throughput, webhook-to-agent latency, and the agent host's footprint.

One stack run (``squadron.local.stack``, as the end-to-end tests start it: the sandbox GitHub,
the ingress and router handlers, events.fifo on a moto server, agents as local processes with
the real Copilot CLI talking to the scripted model) serves two result files:

- ``local_stack``: events routed per second through a burst, and the time from the ingress
  accepting a webhook to the agent's process starting (an assignment launching a dev agent; a
  blocker's closure waking the agent that slept on it);
- ``agent_host``: how long each agent task took to create or resume its Copilot session and its
  peak RSS, from the line each task logs when it ends.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.machine import ROOT
from bench.stats import distribution, median
from bench.support import scoped_env
from squadron.domain.agents import AgentStatus
from squadron.local.sandbox import Delivery
from squadron.local.stack import LocalStack
from squadron.local.wiring import LocalOptions
from tests.e2e.conftest import Human, agent
from tests.e2e.test_local_resilience import DevScript

REPO = "octo/bench"
BURST_REPOS = tuple(f"octo/burst-{n:02d}" for n in range(10))
BURST_ISSUES_PER_REPO = 10
ASSIGNED = 10  # dev agents launched one at a time
WOKEN = 5  # dev agents woken one at a time
BURST_PM_LINGER_SECONDS = 30  # LocalOptions' default, as deployed
TIMEOUT = 120.0
#: What the fixture of the end-to-end tests unsets: the stack sets its own.
AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def _wait(check: Callable[[], Any], what: str, timeout: float = TIMEOUT, every: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out waiting for {what}")


def _dev(number: int) -> str:
    return f"1-{number}-feat-dev"


class Run:
    """One local stack, driven through the scenarios; its figures."""

    def __init__(self, stack: LocalStack, script: DevScript) -> None:
        self.stack = stack
        self.script = script
        assert stack.sandbox is not None and stack.launcher is not None
        self.sandbox = stack.sandbox
        self.launcher = stack.launcher
        self.human = Human(stack, repo=REPO)

    def quiet(self, timeout: float = TIMEOUT) -> None:
        """Until every webhook so far was sent and routed, and no agent process runs (for 0.5 s)."""
        self.sandbox.wait_for_deliveries(timeout=timeout)

        def settled() -> bool:
            routed = {r["delivery"] for r in list(self.stack.routed) if not r["failed"]}
            return set(self.stack.accepted_at) <= routed and not self.launcher.running()

        deadline = time.monotonic() + timeout
        while True:
            _wait(settled, "the stack to settle", max(deadline - time.monotonic(), 0.1), every=0.1)
            time.sleep(0.5)
            if settled():
                return

    def delivery(self, action: str, number: int, repo: str = REPO) -> Delivery:
        def find() -> Delivery | None:
            for item in reversed(self.sandbox.deliveries):
                payload = item.payload
                if (
                    item.event == "issues"
                    and item.action == action
                    and payload.get("issue", {}).get("number") == number
                    and payload.get("repository", {}).get("full_name") == repo
                ):
                    return item
            return None

        found: Delivery = _wait(find, f"the issues.{action} webhook of #{number}")
        return found

    def asleep(self, agent_id: str) -> bool:
        record = agent(self.stack, agent_id)
        return record is not None and record.status is AgentStatus.SLEEPING

    def launched_at(self, agent_id: str, purpose: str) -> float:
        def find() -> float | None:
            for who, why, at in list(self.launcher.launch_times):
                if (who, why) == (agent_id, purpose):
                    return at
            return None

        found: float = _wait(find, f"{agent_id} to be launched ({purpose})")
        return found

    def latency(self, action: str, number: int, agent_id: str, purpose: str) -> float:
        """Milliseconds from the ingress accepting issue ``number``'s webhook to the launch."""
        delivery = self.delivery(action, number)
        accepted: float = _wait(
            lambda: self.stack.accepted_at.get(delivery.guid), f"the ingress to accept {delivery.guid}"
        )
        return (self.launched_at(agent_id, purpose) - accepted) * 1000

    def assignments(self) -> list[float]:
        """Each issue assigned alone, the stack quiet in between: assignment -> dev agent started."""
        numbers = [self.human.open_issue(f"Latency {n}") for n in range(ASSIGNED)]
        self.quiet()  # the PM's batch of openings is done
        latencies = []
        for number in numbers:
            self.human.assign(number)
            latencies.append(self.latency("assigned", number, _dev(number), "start"))
            self.quiet()
        return latencies

    def wakes(self) -> list[float]:
        """Dev agents asleep on a human's issue each; each blocker closed alone -> agent woken."""
        sleepers = [self.human.open_issue(f"Sleeper {n}") for n in range(WOKEN)]
        blockers = [self.human.open_issue(f"Blocker {n}") for n in range(WOKEN)]
        self.script.blocked_by.update(dict(zip(sleepers, blockers, strict=True)))
        self.quiet()
        for number in sleepers:
            self.human.assign(number)
        for number in sleepers:
            _wait(functools.partial(self.asleep, _dev(number)), f"#{number}'s agent to sleep", every=0.2)
        self.quiet()
        latencies = []
        for sleeper, blocker in zip(sleepers, blockers, strict=True):
            self.human.close(blocker)
            latencies.append(self.latency("closed", blocker, _dev(sleeper), "wake"))
            self.quiet()
        return latencies

    def burst(self) -> dict[str, Any]:
        """Opened, commented and closed on every issue of ten repositories, routed from a backlog."""
        people = {name: Human(self.stack, repo=name) for name in BURST_REPOS}
        # The PMs linger as deployed (the scenarios above shortened it to wait less for quiet):
        # each repository's stays up while its part of the burst comes in, as in the burst test.
        self.launcher.env["SQUADRON_PM_LINGER_SECONDS"] = str(BURST_PM_LINGER_SECONDS)
        launches_before = len(self.launcher.launch_times)
        self.stack.pause_routing()
        for _ in range(BURST_ISSUES_PER_REPO):
            for name in BURST_REPOS:
                people[name].open_issue("Burst", body="One of a hundred.")
        for number in range(1, BURST_ISSUES_PER_REPO + 1):
            for name in BURST_REPOS:
                people[name].comment(number, f"A note on #{number}.")
        for number in range(1, BURST_ISSUES_PER_REPO + 1):
            for name in BURST_REPOS:
                people[name].close(number)
        self.sandbox.wait_for_deliveries(timeout=300)
        wanted = {
            d.guid
            for d in self.sandbox.deliveries
            if d.payload.get("repository", {}).get("full_name") in BURST_REPOS
            and d.payload.get("sender", {}).get("login") == "octo-human"
        }
        accepted = sum(guid in self.stack.accepted_at for guid in wanted)
        routed_before = len(self.stack.routed)
        start = time.monotonic()
        self.stack.resume_routing()

        def done() -> bool:
            seen = {r["delivery"] for r in self.stack.routed[routed_before:] if not r["failed"]}
            return wanted <= seen

        _wait(done, "the burst to be routed", timeout=600, every=0.05)
        elapsed = time.monotonic() - start
        batches = self.stack.routed[routed_before:]
        return {
            "repositories": len(BURST_REPOS),
            "issues": len(BURST_REPOS) * BURST_ISSUES_PER_REPO,
            "events": len(wanted),
            "accepted_by_ingress": accepted,
            "records_routed": len(batches),
            "records_failed": sum(r["failed"] for r in batches),
            "seconds": round(elapsed, 2),
            "events_per_second": round(len(wanted) / elapsed, 1),
            "pm_launches_during_burst": len(self.launcher.launch_times) - launches_before,
        }


def _task_endings(log_dir: Path) -> list[dict[str, Any]]:
    """The end line of every agent task (JSON lines in logs/<agent id>.log), in file order."""
    endings = []
    for path in sorted(log_dir.glob("*.log")):
        if path.name in ("moto.log", "lambdas.log"):
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if str(entry.get("message", "")).startswith("the agent task ended"):
                endings.append(entry)
    return endings


def _phase(phases: dict[str, float], name: str, run: Callable[[], Any]) -> Any:
    started = time.monotonic()
    try:
        return run()
    finally:
        phases[name] = time.monotonic() - started


@functools.cache
def _session() -> dict[str, Any]:
    """Run the stack once for both result files (``python -m bench`` may ask for either)."""
    script = DevScript()
    with tempfile.TemporaryDirectory(prefix="squadron-bench-") as state, scoped_env({}, unset=AWS_VARIABLES):
        stack = LocalStack(
            LocalOptions(
                root=ROOT,
                state_dir=Path(state) / "state",
                model_policy=script,
                repo=REPO,
                extra_repos=BURST_REPOS,
                reconcile_seconds=3600,  # nothing to repair: the reconciler stays out of the timings
                pm_linger_seconds=1,
            )
        )
        phases: dict[str, float] = {}
        started = time.monotonic()
        # The in-process Lambdas print metrics now and then (Powertools publishes every 100 values
        # even when disabled) and warn about empty ones: kept off the benchmark's output.
        with open(os.devnull, "w", encoding="utf-8") as sink, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            try:
                with contextlib.redirect_stdout(sink):
                    stack.start()
                    phases["start"] = time.monotonic() - started
                    run = Run(stack, script)
                    assignments = _phase(phases, "assignments", run.assignments)
                    wakes = _phase(phases, "wakes", run.wakes)
                    burst = _phase(phases, "burst", run.burst)
                    errors = list(stack.errors)
            finally:
                # Lingering PM agents are stopped mid-turn: the scripted model's server reports
                # each broken connection on stderr.
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    stack.stop()
                leftover = stack.launcher.running() if stack.launcher is not None else []
        if leftover:
            raise RuntimeError(f"agent processes left running: {leftover}")
        endings = _task_endings(Path(state) / "state" / "logs")
    return {
        "phase_seconds": {name: round(seconds, 1) for name, seconds in phases.items()},
        "assignments": assignments,
        "wakes": wakes,
        "burst": burst,
        "errors": errors,
        "endings": endings,
    }


def bench_local_stack() -> dict[str, Any]:
    session = _session()
    return {
        "method": (
            "squadron.local.stack as the end-to-end tests start it (sandbox GitHub, the ingress and "
            "router handlers in-process, events.fifo and DynamoDB on a moto server, agents as local "
            "processes with the real Copilot CLI and the scripted model; reconciler idle). "
            "throughput: routing paused, 100 issues over 10 repositories opened, commented on and "
            "closed (300 webhooks, accepted into events.fifo), then routing resumed: events per "
            "second from the resume until the last one was routed; the repositories' PM agents "
            f"(lingering {BURST_PM_LINGER_SECONDS} s, as deployed) start meanwhile on the same "
            "machine, so their Copilot CLIs compete with the router for the CPU. latency: from the ingress accepting the webhook "
            "(its answer, after SendMessage) to the agent's process being started by the local "
            f"launcher; {ASSIGNED} issues assigned to squadron[bot] one at a time (dev agent "
            f"launched) and {WOKEN} blockers closed one at a time (the dev agent asleep on each "
            "woken), the stack quiet between them"
        ),
        "phase_seconds": session["phase_seconds"],
        "throughput": session["burst"],
        "latency_ms": {
            "assigned_to_launch": distribution(session["assignments"], quantiles=(50, 90)),
            "blocker_closed_to_wake": distribution(session["wakes"], quantiles=(50, 90)),
        },
        "stack_errors": session["errors"],
    }


def bench_agent_host() -> dict[str, Any]:
    endings = _session()["endings"]
    starts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rss: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    details: Counter[str] = Counter()
    for entry in endings:
        role = str(entry.get("role"))
        result = entry.get("result") or {}
        outcomes[role][str(result.get("outcome"))] += 1
        if result.get("outcome") not in ("idle", "sleeping"):
            details[f"{role} {result.get('outcome')}: {str(result.get('detail'))[:160]}"] += 1
        session = entry.get("session_start") or {}
        if session.get("mode") is not None and session.get("seconds") is not None:
            for group in ("all", role):
                starts[group][str(session["mode"])].append(float(session["seconds"]))
        peak = entry.get("peak_rss_mb") or {}
        if peak:
            for group in ("all", role):
                rss[group]["host"].append(float(peak["host"]))
                rss[group]["cli"].append(float(peak["cli"]))
                rss[group]["total"].append(float(peak["host"]) + float(peak["cli"]))
    return {
        "method": (
            "taken during the local_stack run (its duration is that one's): the line each agent task "
            "logs when it ends (squadron.agent's entry point). session_start_seconds: "
            "CopilotRuntime.session_start, seconds from starting the Copilot CLI until the task's last "
            "session was created or resumed (dev agents one at a time on a quiet stack; PM agents "
            "partly during the burst, sharing the CPU); peak_rss_mb, one sample per task: host = "
            "the Python agent host's VmHWM, cli = its largest reaped child's ru_maxrss (the Copilot "
            "CLI, reaped when its client stopped), total = their sum; grouped over all tasks and "
            "per role"
        ),
        "shares_run_with": "local_stack",
        "tasks": len(endings),
        "outcomes": {role: dict(sorted(counts.items())) for role, counts in sorted(outcomes.items())},
        "other_outcomes": dict(sorted(details.items())),
        "session_start_seconds": {
            group: {
                mode: distribution(values, digits=3, quantiles=(50,))
                for mode, values in sorted(modes.items())
            }
            for group, modes in sorted(starts.items())
        },
        "peak_rss_mb": {
            group: {
                part: {"median": median(values), "max": round(max(values), 1)}
                for part, values in parts.items()
            }
            for group, parts in sorted(rss.items())
        },
    }


def stack_summary(result: dict[str, Any]) -> str:
    latency = result["latency_ms"]
    return (
        f"{result['throughput']['events_per_second']} events/s routed; assigned->launch p50 "
        f"{latency['assigned_to_launch'].get('p50')} ms, closed->wake p50 "
        f"{latency['blocker_closed_to_wake'].get('p50')} ms"
    )


def agent_summary(result: dict[str, Any]) -> str:
    starts = result["session_start_seconds"]
    parts = [
        f"{role} {mode} p50 {figures['p50']} s (n={figures['count']})"
        for role, modes in starts.items()
        if role != "all"
        for mode, figures in modes.items()
    ]
    total = result["peak_rss_mb"].get("all", {}).get("total", {})
    return f"session {', '.join(parts) or 'none'}; RSS per agent median {total.get('median')} MiB"
