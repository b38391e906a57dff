"""The machine and the versions a figure was taken on: every result file carries them."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("aws-lambda-powertools", "boto3", "moto", "github-copilot-sdk")
COPILOT_CLI_PACKAGE = ROOT / "node_modules" / "@github" / "copilot" / "package.json"


def cpuinfo(text: str) -> tuple[str | None, int]:
    """(CPU model, logical processors) from the text of /proc/cpuinfo."""
    model = None
    processors = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            processors += 1
        elif key == "model name" and model is None:
            model = value.strip()
    return model, processors


def _memory_mb(text: str) -> int | None:
    """MemTotal in MiB from the text of /proc/meminfo."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _copilot_cli_version() -> str | None:
    try:
        version = json.loads(COPILOT_CLI_PACKAGE.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return str(version) if version else None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def machine_info() -> dict[str, Any]:
    """The ``machine``, ``versions`` and ``commit`` blocks of a result file."""
    model, processors = cpuinfo(_read("/proc/cpuinfo"))
    status = _git("status", "--porcelain", "--untracked-files=no")
    commit = _git("rev-parse", "--short", "HEAD")
    return {
        "machine": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "kernel": platform.release(),
            "architecture": platform.machine(),
            "cpu_model": model,
            "cpu_count": processors or os.cpu_count(),
            "memory_mb": _memory_mb(_read("/proc/meminfo")),
            # Other work on the machine when the figures were taken (1, 5, 15 minutes).
            "load_average": [round(value, 2) for value in os.getloadavg()],
        },
        "versions": {
            **{package: _version(package) for package in PACKAGES},
            "copilot-cli": _copilot_cli_version(),
        },
        "commit": {
            "sha": commit.strip() if commit else None,
            # Tracked files changed since that commit: the figures are not quite that commit's.
            "dirty": bool(status.strip()) if status is not None else None,
        },
    }
