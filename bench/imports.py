"""Cold import of each Lambda handler module: ``python -X importtime`` in a fresh interpreter.

A cold start pays for the interpreter and the handler's imports before the first event; the
handler itself must not call AWS at import, so no AWS (and no moto) is needed here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.machine import ROOT
from bench.stats import median

FUNCTIONS = ("ingress", "router", "reconciler", "gateway")
RUNS = 5
HEAVIEST = 8
_LINE = re.compile(r"^import time:\s*(\d+)\s*\|\s*(\d+)\s*\|( *)(\S.*)$")


@dataclass(frozen=True)
class ImportRecord:
    name: str
    self_us: int
    cumulative_us: int
    depth: int  # 0: imported by the script itself; 1: by a depth-0 module's import; ...


def parse_importtime(stderr: str) -> list[ImportRecord]:
    """The records of ``-X importtime`` output, in the order printed (a module after its imports).

    Format: ``import time: self [us] | cumulative | imported package``, the package indented two
    spaces per level of nesting (after the one space that follows the bar).
    """
    records = []
    for line in stderr.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue  # the header, or anything else the interpreter printed
        own, cumulative, indent, name = match.groups()
        records.append(ImportRecord(name.strip(), int(own), int(cumulative), (len(indent) - 1) // 2))
    return records


def block_of(records: list[ImportRecord], name: str) -> list[ImportRecord]:
    """The depth-0 import ``name`` and everything imported while it was being imported."""
    start = 0
    for index, record in enumerate(records):
        if record.depth == 0:
            if record.name == name:
                return records[start : index + 1]
            start = index + 1
    raise LookupError(f"{name} is not a top-level import of this output")


def direct_imports(block: list[ImportRecord]) -> list[ImportRecord]:
    """The imports the module at the end of ``block`` triggered itself (one level down)."""
    top = block[-1].depth
    return [record for record in block if record.depth == top + 1]


def package_self_times(block: list[ImportRecord]) -> dict[str, int]:
    """Self time (us) summed per top-level package, over a whole block."""
    totals: dict[str, int] = defaultdict(int)
    for record in block:
        totals[record.name.split(".")[0]] += record.self_us
    return dict(totals)


def _env() -> dict[str, str]:
    """A fresh interpreter's environment: the layer on the path, no AWS, no bytecode switch."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),  # noqa: S108 (only when HOME is unset)
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT / "layers" / "squadron"),
    }


def _run(code: str, cwd: Path, *options: str) -> tuple[float, str]:
    """(wall seconds, stderr) of one fresh interpreter running ``code``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *options, "-c", code],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{code!r} in {cwd} failed: {done.stderr[-2000:]}")
    return elapsed, done.stderr


def _function(name: str) -> dict[str, Any]:
    cwd = ROOT / "functions" / name
    _run("import handler", cwd)  # unrecorded: leaves the layer's bytecode cached, as a package has
    cumulative: list[int] = []
    runs: list[list[ImportRecord]] = []
    for _ in range(RUNS):
        _, stderr = _run("import handler", cwd, "-X", "importtime")
        block = block_of(parse_importtime(stderr), "handler")
        cumulative.append(block[-1].cumulative_us)
        runs.append(block)
    # A Lambda never exits its interpreter between events: start + import, left with os._exit.
    walls = [_run("import handler, os; os._exit(0)", cwd)[0] for _ in range(RUNS)]
    exits = [_run("import handler", cwd)[0] for _ in range(RUNS)]
    # The heaviest imports of the median run (by the handler's cumulative time).
    typical = sorted(runs, key=lambda block: block[-1].cumulative_us)[len(runs) // 2]
    heaviest = sorted(direct_imports(typical), key=lambda r: r.cumulative_us, reverse=True)[:HEAVIEST]
    packages = sorted(package_self_times(typical).items(), key=lambda item: item[1], reverse=True)
    return {
        "handler_cumulative_us": {"median": median(cumulative, 0), "min": min(cumulative)},
        "wall_ms": {"median": median([w * 1000 for w in walls]), "min": round(min(walls) * 1000, 1)},
        "wall_ms_with_shutdown": {
            "median": median([w * 1000 for w in exits]),
            "min": round(min(exits) * 1000, 1),
        },
        "modules_imported": len(typical),
        "heaviest_direct_imports": [
            {"module": r.name, "cumulative_us": r.cumulative_us, "self_us": r.self_us} for r in heaviest
        ],
        "heaviest_packages_self_us": dict(packages[:HEAVIEST]),
    }


def bench_cold_imports() -> dict[str, Any]:
    """For each Lambda handler: its import's cumulative time and the interpreter's whole run."""
    baseline = [_run("pass", ROOT)[0] for _ in range(RUNS)]
    functions = {name: _function(name) for name in FUNCTIONS}
    return {
        "method": (
            f"{RUNS} fresh interpreters per handler (cwd functions/<name>, PYTHONPATH=layers/squadron, "
            "no AWS variables) running `import handler` with -X importtime, after one unrecorded run "
            "(bytecode cached, as in a deployed package); wall_ms: the interpreter's start and the "
            "import, without -X importtime, leaving with os._exit (a Lambda never shuts its "
            "interpreter down between events); wall_ms_with_shutdown: the same run to a normal "
            "exit; heaviest_direct_imports: what handler.py's own execution "
            "imported (cumulative, of the median run); heaviest_packages_self_us: self time per "
            "top-level package over the whole import"
        ),
        "runs": RUNS,
        "interpreter_only_wall_ms": {
            "median": median([w * 1000 for w in baseline]),
            "min": round(min(baseline) * 1000, 1),
        },
        "functions": functions,
    }


def summary(result: dict[str, Any]) -> str:
    parts = [
        f"{name} {info['handler_cumulative_us']['median'] / 1000:.0f} ms"
        for name, info in result["functions"].items()
    ]
    return "handler import (median): " + ", ".join(parts)
