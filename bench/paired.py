"""What exactly-once costs, paired: this checkout against the turn-2 commit, in one invocation.

Issue 28 item 7. Unpaired runs on a shared machine cannot tell a change from the machine's
load (the local stack's 34 ms and 234 ms p50 assigned->launch were two rounds apart), so both
sides run here, alternately, on the same machine in the same minutes:

- ``calls``: the router Lambda's DynamoDB and GitHub calls over one issue's lifecycle
  (:mod:`bench.router_calls`, deterministic: once per side);
- ``stack``: the local stack's assigned->launch and blocker closed->wake latency and a burst's
  events per second (:mod:`bench.local`'s scenarios), ``rounds`` times per side, the order
  alternating each round (old, new; new, old; ...) so a drift of the machine's load falls on
  both.

The old side is :data:`OLD`, turn 2's last commit (the end of the session that built the
commit point, keyed effects and the property test; the next commit, 3042f9f, starts issue 28's
work), exported with ``git archive`` into a temporary directory (no worktree, nothing of this
checkout touched) and run by this interpreter with that tree first on ``PYTHONPATH`` (the
local stack hands it on to its moto server and agent processes). Its ``bench/local.py`` and
``bench/router_calls.py`` are this checkout's, byte for byte, and its ``package.json`` too (the
same Copilot CLI): the old side's ``node_modules`` is a link to this checkout's, and so is its
``tests/.cache`` (GitHub's OpenAPI description, which the sandbox answers by).

Each side runs in its own process (one stack per process, as ``python -m bench`` does), which
writes its figures to a JSON file. ``PAIRED_SIZE=smallest`` runs one round of two assignments,
one wake and a burst of two repositories of two issues: it proves the pairing works, its
figures are indicative only (a full run: ``python -m bench paired`` on a quiet machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.machine import ROOT
from bench.stats import distribution, median

#: Turn 2's last commit (see the module's docstring).
OLD = "42b817d"

#: (rounds, assignments, wakes, burst repositories, issues per burst repository)
SIZES: dict[str, tuple[int, int, int, int, int]] = {
    "full": (3, 10, 5, 10, 10),
    "smallest": (1, 2, 1, 2, 2),
}

#: Run inside a side's process, its tree first on sys.path: only what both sides' modules have.
_SIDE = r"""
import contextlib, json, os, sys, tempfile, time, warnings
from pathlib import Path

from bench import local, router_calls
from bench.machine import ROOT
from bench.support import scoped_env
from squadron.local.stack import LocalOptions, LocalStack
from tests.e2e.test_local_resilience import DevScript

what, out, assigned, woken, repos, issues = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
import squadron
assert Path(squadron.__file__).resolve().is_relative_to(ROOT.resolve()), squadron.__file__
if what == "calls":
    result = router_calls.bench_router_calls(pipelines=False)
    figures = {
        "lifecycle": {k: v for k, v in result["lifecycle_total"].items() if not isinstance(v, dict)},
        "dynamodb_by_operation": result["lifecycle_total"]["dynamodb"],
        "events": {
            name: {"dynamodb": e["dynamodb_total"], "github": e["github"]}
            for name, e in result["events"].items()
        },
    }
else:
    local.ASSIGNED, local.WOKEN = assigned, woken
    local.BURST_REPOS = tuple(f"octo/burst-{n:02d}" for n in range(repos))
    local.BURST_ISSUES_PER_REPO = issues
    script = DevScript()
    state = tempfile.mkdtemp(prefix="squadron-paired-")  # kept when the run fails: its logs
    print("state:", state, flush=True)
    with scoped_env({}, unset=local.AWS_VARIABLES):
        os.chmod(state, 0o755)  # the agents' users reach their state through it
        stack = LocalStack(
            LocalOptions(
                root=ROOT,
                state_dir=Path(state) / "state",
                model_policy=script,
                repo=local.REPO,
                extra_repos=local.BURST_REPOS,
                reconcile_seconds=3600,
                pm_linger_seconds=1,
            )
        )
        phases = {}
        with open(os.devnull, "w", encoding="utf-8") as sink, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            try:
                with contextlib.redirect_stdout(sink):
                    started = time.monotonic()
                    stack.start()
                    phases["start"] = time.monotonic() - started
                    run = local.Run(stack, script)
                    assignments = local._phase(phases, "assignments", run.assignments)
                    wakes = local._phase(phases, "wakes", run.wakes)
                    burst = local._phase(phases, "burst", run.burst)
                    errors = list(stack.errors)
            finally:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    stack.stop()
    import shutil
    shutil.rmtree(state, ignore_errors=True)
    figures = {
        "assigned_to_launch_ms": assignments,
        "closed_to_wake_ms": wakes,
        "burst": burst,
        "phase_seconds": {k: round(v, 2) for k, v in phases.items()},
        "errors": errors,
    }
Path(out).write_text(json.dumps(figures), encoding="utf-8")
"""


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def old_tree(commit: str = OLD) -> Iterator[Path]:
    """``commit``'s files in a temporary directory, its node_modules this checkout's."""
    same = subprocess.run(
        ["git", "diff", "--quiet", commit, "HEAD", "--", "package.json", "package-lock.json"],
        check=False,
        cwd=ROOT,
    )
    if same.returncode != 0:  # another Copilot CLI: this checkout's node_modules would not do
        raise RuntimeError(f"{commit}'s package.json differs from this checkout's: run `npm ci` in its tree")
    with tempfile.TemporaryDirectory(prefix="squadron-turn2-") as where:
        tree = Path(where)
        tree.chmod(0o755)  # the agents' users reach the Copilot CLI through it
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        (tree / "node_modules").symlink_to(ROOT / "node_modules")
        # GitHub's OpenAPI description, which the sandbox answers by (fetched by make, not in git).
        (tree / "tests" / ".cache").symlink_to(ROOT / "tests" / ".cache")
        yield tree


def run_side(tree: Path, what: str, size: tuple[int, int, int, int, int]) -> dict[str, Any]:
    """One side's figures for ``what`` (``calls`` or ``stack``), in a process of its own; its
    output is kept in a log file named by the error when it fails."""
    _, assigned, woken, repos, issues = size
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = Path(out.name)
    log = path.with_suffix(".log")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tree / "layers" / "squadron"), str(tree)))}
    started = time.monotonic()
    try:
        with log.open("w", encoding="utf-8") as output:
            done = subprocess.run(
                [sys.executable, "-c", _SIDE, what, str(path), *map(str, (assigned, woken, repos, issues))],
                check=False,
                cwd=tree,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=3600,
            )
        if done.returncode != 0:
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"{what} at {tree} failed (its output: {log}): {tail}")
        figures: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        log.unlink()
    finally:
        path.unlink(missing_ok=True)
    figures["seconds"] = round(time.monotonic() - started, 1)
    return figures


def _difference(old: float | None, new: float | None) -> dict[str, float | None]:
    if old is None or new is None:
        return {"old": old, "new": new, "new_minus_old": None, "new_over_old": None}
    return {
        "old": old,
        "new": new,
        "new_minus_old": round(new - old, 1),
        "new_over_old": round(new / old, 2) if old else None,
    }


def bench_paired() -> dict[str, Any]:
    size_name = os.environ.get("PAIRED_SIZE", "full")
    size = SIZES[size_name]
    rounds = size[0]
    new_sha = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no") != ""
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    failures: dict[str, list[str]] = {"old": [], "new": []}
    paired: list[tuple[dict[str, Any], dict[str, Any]]] = []  # the rounds both sides ran
    with old_tree() as tree:
        sides = {"old": tree, "new": ROOT}
        calls = {side: run_side(where, "calls", size) for side, where in sides.items()}
        for n in range(rounds):
            order = ("old", "new") if n % 2 == 0 else ("new", "old")
            this_round: dict[str, dict[str, Any]] = {}
            for side in order:
                try:
                    this_round[side] = run_side(sides[side], "stack", size)
                except RuntimeError as exc:  # reported: what can be compared still is
                    failures[side].append(str(exc)[-1500:])
                else:
                    runs[side].append(this_round[side])
            if len(this_round) == 2:
                paired.append((this_round["old"], this_round["new"]))
    latency: dict[str, Any] = {}
    for key in ("assigned_to_launch_ms", "closed_to_wake_ms"):
        pooled = {side: [v for r in runs[side] for v in r[key]] for side in runs}
        latency[key] = {
            **{side: distribution(values, quantiles=(50, 90)) for side, values in pooled.items()},
            "p50": _difference(median(pooled["old"]), median(pooled["new"])),
            "per_round_p50": [_difference(median(o[key]), median(n[key])) for o, n in paired],
        }
    throughput = {side: [r["burst"]["events_per_second"] for r in runs[side]] for side in runs}
    per_event = {
        name: {
            "dynamodb": _difference(
                figures["dynamodb"], calls["new"]["events"].get(name, {}).get("dynamodb")
            ),
            "github": _difference(figures["github"], calls["new"]["events"].get(name, {}).get("github")),
        }
        for name, figures in calls["old"]["events"].items()
    }
    return {
        "method": (
            "paired: this checkout (new) and the turn-2 commit (old) on the same machine in one "
            "invocation, each side in its own process with its own tree first on PYTHONPATH (bench/"
            "paired.py says how the old tree is made). calls: bench/router_calls.py's lifecycle "
            "(the router Lambda on moto, GitHub faked), once per side (deterministic). stack: "
            "bench/local.py's scenarios (assignments one at a time, wakes one at a time, a burst "
            "routed from a backlog), rounds alternating which side goes first"
        ),
        "size": size_name,
        "indicative_only": size_name != "full",
        "sides": {
            "old": {"commit": OLD, "what": "turn 2's last commit"},
            "new": {"commit": new_sha, "dirty": dirty},
        },
        "rounds": rounds,
        "scenario": dict(
            zip(
                ("assignments", "wakes", "burst_repositories", "burst_issues_per_repo"), size[1:], strict=True
            )
        ),
        "calls_per_lifecycle": {
            "dynamodb": _difference(
                calls["old"]["lifecycle"]["dynamodb_total"], calls["new"]["lifecycle"]["dynamodb_total"]
            ),
            "github": _difference(calls["old"]["lifecycle"]["github"], calls["new"]["lifecycle"]["github"]),
            "github_rate_limited": _difference(
                calls["old"]["lifecycle"]["github_rate_limited"],
                calls["new"]["lifecycle"]["github_rate_limited"],
            ),
            "dynamodb_by_operation": {side: calls[side]["dynamodb_by_operation"] for side in calls},
            "per_event": per_event,
        },
        "latency_ms": latency,
        "burst_events_per_second": {
            **throughput,
            "median": _difference(median(throughput["old"]), median(throughput["new"])),
        },
        "phase_seconds": {side: [r["phase_seconds"] for r in runs[side]] for side in runs},
        "side_seconds": {side: [r["seconds"] for r in runs[side]] for side in runs},
        "stack_errors": {side: [e for r in runs[side] for e in r["errors"]] for side in runs},
        "stack_runs_failed": failures,
    }


def summary(result: dict[str, Any]) -> str:
    calls = result["calls_per_lifecycle"]
    latency = result["latency_ms"]
    return (
        f"({result['size']}) lifecycle DynamoDB {calls['dynamodb']['old']} -> {calls['dynamodb']['new']}, "
        f"GitHub {calls['github']['old']} -> {calls['github']['new']}; assigned->launch p50 "
        f"{latency['assigned_to_launch_ms']['p50']['old']} -> {latency['assigned_to_launch_ms']['p50']['new']} ms, "
        f"closed->wake p50 {latency['closed_to_wake_ms']['p50']['old']} -> "
        f"{latency['closed_to_wake_ms']['p50']['new']} ms; burst "
        f"{result['burst_events_per_second']['median']['old']} -> "
        f"{result['burst_events_per_second']['median']['new']} events/s"
    )
