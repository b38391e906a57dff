"""The agent image's size: built with Docker where an engine runs, else its runtime assembled without one.

The image is built at deploy (`cdk deploy` builds functions/agent/Dockerfile). Where a Docker engine
answers, this builds it for linux/amd64 and records its size as Docker reports it. Where none does
(these test machines), it records the size of what the image adds, assembled as the tests assemble
it (tests/support/image_runtime.py: the installed package and its dependencies, the one Copilot
binary and its unpacked package), plus the base image's size as an assumption.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: python:3.12-slim-bookworm for linux/amd64, uncompressed, with git and ca-certificates added
#: (Docker Hub lists the base at about 125 MB; git and its dependencies add about 40 MB).
BASE_IMAGE_MB = 165.0


def _tree_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def _docker_size() -> float | None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, check=False).returncode != 0:
        return None
    tag = "squadron-agent:bench"
    subprocess.run(
        [docker, "build", "--platform", "linux/amd64", "-f", "functions/agent/Dockerfile", "-t", tag, "."],
        cwd=ROOT,
        check=True,
    )
    out = subprocess.run(
        [docker, "image", "inspect", tag, "--format", "{{.Size}}"], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip()) / 2**20


def bench_image() -> dict[str, Any]:
    built = _docker_size()
    if built is not None:
        return {"method": "docker build", "image_mb": round(built, 1)}
    from tests.support.image_runtime import assemble  # noqa: PLC0415 (imports the CDK app: only here)

    _, prefix = assemble(ROOT / "tests" / ".cache" / "image-runtime")
    venv = prefix / "venv"
    site = next(venv.glob("lib/python*/site-packages"))
    cli = prefix / "opt" / "copilot"
    cache = prefix / "opt" / "copilot-cache"
    added = {
        "python packages": _tree_mb(site),
        "Copilot CLI binary": _tree_mb(cli),
        "its unpacked package": _tree_mb(cache),
    }
    return {
        "method": "assembled without a container engine (no Docker engine here)",
        "added_mb": {name: round(mb, 1) for name, mb in added.items()},
        "base_image_mb_assumed": BASE_IMAGE_MB,
        "image_mb_estimate": round(BASE_IMAGE_MB + sum(added.values()), 1),
    }


def summary(result: dict[str, Any]) -> str:
    size = result.get("image_mb", result.get("image_mb_estimate"))
    return f"agent image {size} MB ({result['method']})"
