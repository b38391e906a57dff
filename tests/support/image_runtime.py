"""The agent image's runtime, assembled without a container engine.

No Docker engine runs on the test machines, and the agent image is built only at deploy. So the
tests assemble what the image holds from the same sources the Dockerfile uses: the package
installed with pip (not editable) into a clean virtual environment, the one linux-x64 Copilot
binary, its package unpacked once into a cache its users only read, and an environment of
exactly the Dockerfile's ENV and the task definition's (paths mapped under ``prefix``); the
local stack then runs agent tasks through it as root, as the task definition does.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from infra.constructs.agents import task_environment
from squadron.local.copilot_cli import cli_paths, unpack_cli
from squadron.local.stack import GATEWAY_FUNCTION, AgentRuntime

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "functions" / "agent" / "Dockerfile"
#: Where the image keeps what it adds (mapped under the prefix here).
IMAGE_DIRS = ("/opt/",)
#: The base image's PATH (python:3.12-slim), with the package's scripts first.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def dockerfile_env(dockerfile: Path = DOCKERFILE) -> dict[str, str]:
    """The ENV the final stage of ``dockerfile`` sets (``KEY=VALUE`` pairs, continued lines joined)."""
    text = dockerfile.read_text(encoding="utf-8").replace("\\\n", " ")
    final = text.split("\nFROM ")[-1]
    env: dict[str, str] = {}
    for line in final.splitlines():
        words = line.strip().split(maxsplit=1)
        if len(words) == 2 and words[0] == "ENV":
            for pair in shlex.split(words[1]):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def _mapped(value: str, prefix: Path) -> str:
    for image_dir in IMAGE_DIRS:
        if value.startswith(image_dir):
            return str(prefix / value.lstrip("/"))
    return value


def _fingerprint() -> str:
    """What the runtime is built from: a new one when any of it changes."""
    digest = hashlib.sha256()
    sources = [ROOT / "pyproject.toml", DOCKERFILE, *sorted((ROOT / "layers" / "squadron").rglob("*.py"))]
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def assemble(cache: Path) -> tuple[AgentRuntime, Path]:
    """The runtime (command and environment) and its prefix, built once per source fingerprint."""
    prefix = cache / _fingerprint()
    venv = prefix / "venv"
    ready = prefix / ".ready"
    image_env = dockerfile_env()
    cli = Path(_mapped(image_env["COPILOT_CLI_PATH"], prefix))
    if not ready.exists():
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin" / "pip"),
                "install",
                "--quiet",
                "--no-compile",
                "--disable-pip-version-check",
                f"{ROOT}[agent]",
            ],
            check=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
        cli.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cli_paths(ROOT)[0], cli)  # the one binary, as the Dockerfile's first stage
        unpack_cli(cli, Path(_mapped(image_env["XDG_CACHE_HOME"], prefix)))
        for path in (prefix, *prefix.rglob("*")):
            if not path.is_symlink():
                mode = path.stat().st_mode
                path.chmod(mode | 0o044 | (0o011 if path.is_dir() or mode & 0o100 else 0))
        ready.touch()
    environment = {
        "PATH": f"{venv / 'bin'}:{BASE_PATH}",
        "HOME": "/root",  # the task runs as root (the task definition's user)
        **{key: _mapped(value, prefix) for key, value in image_env.items()},
        **{key: _mapped(value, prefix) for key, value in task_environment(GATEWAY_FUNCTION).items()},
    }
    return AgentRuntime(
        command=(str(venv / "bin" / "python"), "-m", "squadron.agent"), environment=environment
    ), prefix
