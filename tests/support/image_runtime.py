"""The agent image's runtime, assembled without a container engine.

No Docker engine runs on the test machines, and the agent image is built only at deploy. So the
tests assemble what the image holds from the same sources the Dockerfile uses: the package
installed with pip (not editable) into a clean virtual environment, the one linux-x64 Copilot
binary, its package unpacked once into a cache its users only read, and an environment of
exactly the Dockerfile's ENV and the task definition's (paths mapped under ``prefix``); the
local stack then runs agent tasks through it as root, as the task definition does.

Built as the Dockerfile's build stage builds it, without its index round trips: the package's wheel
is built from a copy of the files the Dockerfile copies (pyproject.toml, README.md,
layers/squadron) and installed with ``--no-deps``; its dependencies are the closure of that wheel's
``Requires-Dist`` (with the ``agent`` extra), each distribution copied file by file (its RECORD)
from the environment running the tests, where ``make setup`` installed the same pins. ``pip check``
then proves the environment whole: a requirement missing or at a version the wheel does not accept
fails the build. Nothing else is there (no pytest, no moto, not this checkout). Where a dependency
is not installed here, pip installs the package from the index as the Dockerfile does.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from infra.constructs.agents import task_environment
from squadron.local.copilot_cli import cli_paths, unpack_cli
from squadron.local.wiring import GATEWAY_FUNCTION, AgentRuntime

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
    sources = [
        ROOT / "pyproject.toml",
        DOCKERFILE,
        Path(__file__),  # how it is built
        *sorted((ROOT / "layers" / "squadron").rglob("*.py")),
    ]
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _pip(*args: str) -> None:
    """pip as the tests' environment has it (``--python`` names the environment it acts on)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )


def _wheel(into: Path) -> Path:
    """The package's wheel, built from a copy of what the Dockerfile copies (no stray build/ here)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, src / name)
        shutil.copytree(
            ROOT / "layers" / "squadron",
            src / "layers" / "squadron",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
        )
        _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(into), str(src))
    (wheel,) = into.glob("squadron-*.whl")
    return wheel


def _requirements(wheel: Path, extras: tuple[str, ...]) -> list[Requirement]:
    """What the wheel requires with ``extras`` (its METADATA's Requires-Dist, markers applied)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    requirements = [Requirement(text) for text in metadata.get_all("Requires-Dist") or []]
    return [r for r in requirements if _applies(r, ("", *extras))]


def _applies(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    return requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in extras)


def _closure(requirements: list[Requirement]) -> list[importlib.metadata.Distribution] | None:
    """The installed distributions ``requirements`` need, transitively; None if one is missing or
    at a version a requirement does not accept."""
    found: dict[str, importlib.metadata.Distribution] = {}
    wanted: set[tuple[str, str]] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        try:
            dist = found.get(name) or importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return None
        if not requirement.specifier.contains(dist.version, prereleases=True):
            return None
        found[name] = dist
        for extra in ("", *sorted(requirement.extras)):
            if (name, extra) not in wanted:
                wanted.add((name, extra))
                todo += [
                    r
                    for r in map(Requirement, dist.requires or [])
                    if _applies(r, (extra,) if extra else ("",))
                ]
    return list(found.values())


def _copy_distribution(dist: importlib.metadata.Distribution, site: Path) -> None:
    """Every file ``dist``'s RECORD lists, at the same place relative to ``site`` (scripts' first
    line pointing at the new environment's python); compiled files are left out (``--no-compile``)."""
    here = Path(str(dist.locate_file("")))
    python = site.parents[2] / "bin" / "python"
    for file in dist.files or []:
        if file.suffix == ".pyc" or "__pycache__" in file.parts:
            continue
        source = here / file
        target = Path(os.path.normpath(site / file))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.parent.name == "bin" and source.read_bytes()[:2] == b"#!":
            lines = source.read_bytes().split(b"\n", 1)
            target.write_bytes(b"#!" + str(python).encode() + b"\n" + (lines[1] if len(lines) > 1 else b""))
            shutil.copymode(source, target)
        else:
            shutil.copy2(source, target)


def _install(venv: Path) -> None:
    """The package with the ``agent`` extra in ``venv``, as the Dockerfile's build stage has it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _wheel(Path(tmp))
        needed = _closure(_requirements(wheel, ("agent",)))
        if needed is None:  # not all installed here: from the index, as the Dockerfile does
            _pip("--python", python, "install", "--quiet", "--no-compile", f"{wheel}[agent]")
        else:
            (site,) = venv.glob("lib/python*/site-packages")
            for dist in needed:
                _copy_distribution(dist, site)
            _pip(
                "--python",
                python,
                "install",
                "--quiet",
                "--no-compile",
                "--no-deps",
                "--no-index",
                str(wheel),
            )
    _pip("--python", python, "check")


def _prune(cache: Path, keep: Path) -> None:
    """Remove the runtimes of other fingerprints: one is kept, the current sources'."""
    if cache.is_dir():
        for entry in cache.iterdir():
            if entry != keep:
                shutil.rmtree(entry, ignore_errors=True)


def assemble(cache: Path) -> tuple[AgentRuntime, Path]:
    """The runtime (command and environment) and its prefix, built once per source fingerprint
    (the runtimes of earlier fingerprints are removed when a new one is built)."""
    prefix = cache / _fingerprint()
    venv = prefix / "venv"
    ready = prefix / ".ready"
    image_env = dockerfile_env()
    cli = Path(_mapped(image_env["COPILOT_CLI_PATH"], prefix))
    if not ready.exists():
        _prune(cache, keep=prefix)
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        _install(venv)
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
