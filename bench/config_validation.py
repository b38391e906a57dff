"""Validating the largest .squadron/ the limits allow, and refusing the worst one they stop.

The largest valid configuration: MAX_FILES files summing to just under MAX_TOTAL_BYTES —
a config.yaml and an approval-flows.yaml of just under MAX_FILE_BYTES each (thousands of
labels and status checks, MAX_PATH_GLOBS protected globs), and agent definitions sharing
the rest — read the way ``squadron validate`` reads a directory, and the way the router
reads a default branch (gather, decode, parse, validate, cross-check). The worst refused
one: a "billion laughs" config.yaml, stopped at MAX_YAML_NODES.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from squadron.config import ConfigError, ConfigLoader, load_directory
from squadron.domain.repo_config.limits import MAX_FILE_BYTES, MAX_FILES, MAX_PATH_GLOBS, MAX_TOTAL_BYTES
from tests.support.repo_files import FakeRepositoryFiles

REPEATS = 5


def _fill(head: str, line: Callable[[int], str], limit: int) -> str:
    """``head`` and then as many ``line(i)`` as fit in ``limit`` UTF-8 bytes."""
    parts, size, i = [head], len(head.encode()), 0
    while True:
        text = line(i)
        if size + len(text.encode()) > limit:
            return "".join(parts)
        parts.append(text)
        size += len(text.encode())
        i += 1


def largest_config() -> dict[str, str]:
    """{path relative to .squadron: text} at the limits, and valid."""
    margin = 64  # bytes under each limit, so the files stay within it
    config = _fill(
        "version: 1\nmax_issue_depth: 4\nlabels:\n",
        lambda i: f"  label-{i:05}: {{description: 'what label {i} means', color: a2eeef}}\n",
        MAX_FILE_BYTES - margin,
    )
    globs = "".join(
        f"    - {{paths: ['dir-{i}/**/*.py'], require_human: true, description: 'area {i}'}}\n"
        for i in range(MAX_PATH_GLOBS)
    )
    flows = _fill(
        f"version: 1\ndefault:\n  protected_paths:\n{globs}  required_status_checks:\n",
        lambda i: f"    - ci/job-{i:05}\n",
        MAX_FILE_BYTES - margin,
    )
    agents = MAX_FILES - 2
    left = MAX_TOTAL_BYTES - len(config.encode()) - len(flows.encode()) - margin
    each = left // agents
    files = {"config.yaml": config, "workflows/approval-flows.yaml": flows}
    for i in range(agents):
        name = f"agent-{i:02}"
        files[f"agents/{name}.md"] = _fill(
            f"---\nname: {name}\ndescription: An agent of the benchmark.\ntools: [read_issue, comment]\n---\n",
            lambda n: f"Line {n} of the prompt of {{repo_full_name}}, issue {{issue_number}}.\n",
            each,
        )
    return files


def _billion_laughs() -> dict[str, str]:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return {"config.yaml": "\n".join(lines) + "\n"}


def _median_ms(run: Callable[[], object]) -> tuple[float, float]:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1), round(max(times), 1)


def _from_default_branch(files: dict[str, str]) -> Callable[[], object]:
    def run() -> object:
        repository = FakeRepositoryFiles()
        repository.commit("octo/app", "sha1", files)
        try:
            return ConfigLoader(repository).load("octo/app")
        except ConfigError as exc:
            return exc

    return run


def bench_config_validation() -> dict[str, Any]:
    files = largest_config()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / ".squadron"
        for rel, text in files.items():
            path = directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        config = load_directory(directory, root=".squadron")
        validate_ms, validate_max_ms = _median_ms(lambda: load_directory(directory, root=".squadron"))
    branch_ms, branch_max_ms = _median_ms(_from_default_branch(files))
    refused_ms, refused_max_ms = _median_ms(_from_default_branch(_billion_laughs()))
    return {
        "largest": {
            "files": len(files),
            "bytes": sum(len(text.encode()) for text in files.values()),
            "labels": len(config.config.labels),
            "agents": len(config.agents),
            "protected_globs": sum(len(p.paths) for p in config.approval_flows.default.protected_paths),
        },
        "repeats": REPEATS,
        "validate_directory_ms_median": validate_ms,
        "validate_directory_ms_max": validate_max_ms,
        "default_branch_ms_median": branch_ms,
        "default_branch_ms_max": branch_max_ms,
        "billion_laughs_refused_ms_median": refused_ms,
        "billion_laughs_refused_ms_max": refused_max_ms,
    }


def summary(result: dict[str, Any]) -> str:
    largest = result["largest"]
    return (
        f"the largest config the limits allow ({largest['bytes'] // 1024} KiB in {largest['files']} files) "
        f"validated in {result['validate_directory_ms_median']} ms (squadron validate) and "
        f"{result['default_branch_ms_median']} ms (default branch); a billion laughs refused in "
        f"{result['billion_laughs_refused_ms_median']} ms"
    )
