"""What `make setup` (and so the first `make local` and `make test`) shows while it installs.

Runs one install command and says what it installs and how far it is, instead of minutes of
silence: a header naming the step and the packages (read from pyproject.toml or package.json and
package-lock.json), progress lines as the command reports packages (pip's resolution, npm's
downloads counted against the lock), and the time it took. The command's own output is kept
back; if it fails, its last lines are shown and its exit status is this one's.

Standard library only: it runs before .venv exists (``python3 scripts/setup_progress.py``).

    python3 scripts/setup_progress.py --step 2/3 --kind pip -- .venv/bin/pip install -e '.[dev]'
    python3 scripts/setup_progress.py --step 3/3 --kind npm -- npm ci --loglevel=http
    python3 scripts/setup_progress.py --step 1/3 --title "the virtual environment" -- python3 -m venv .venv
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
import tomllib
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

#: The command's last lines shown when it fails.
TAIL_LINES = 40
#: pip: one progress line per this many packages resolved.
PIP_EVERY = 10

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: pip: a distribution taken into the resolution (from an index, a local file, or installed).
_PIP_COLLECTING = re.compile(r"^(?:Collecting|Requirement already satisfied:) (\S+)")
_PIP_PROCESSING = re.compile(r"^Processing (\S+)")
_PIP_INSTALLING = re.compile(r"^Installing collected packages: (.+)$")
_PIP_INSTALLED = re.compile(r"^Successfully installed (.+)$")
#: npm (``--loglevel=http``): a package's tarball fetched, from the registry or npm's cache.
_NPM_TARBALL = re.compile(r"^npm http fetch GET \d+ \S+/-/(\S+?)\.tgz\b")


@dataclass(frozen=True)
class Progress:
    """One thing worth a line: ``kind`` is ``resolved``, ``installing``, ``installed`` or
    ``fetched``; ``name`` the package (or the list), ``count`` how many the line names."""

    kind: str
    name: str
    count: int = 1


def pip_progress(line: str) -> Progress | None:
    """What a line of ``pip install`` (not --quiet) reports, if anything."""
    line = line.strip()
    if found := _PIP_COLLECTING.match(line):
        return Progress("resolved", _distribution(found.group(1)))
    if found := _PIP_PROCESSING.match(line):
        return Progress("resolved", _distribution(found.group(1)))
    if found := _PIP_INSTALLING.match(line):
        names = [n.strip() for n in found.group(1).split(",") if n.strip()]
        return Progress("installing", ", ".join(names), len(names))
    if found := _PIP_INSTALLED.match(line):
        names = found.group(1).split()
        return Progress("installed", " ".join(names), len(names))
    return None


def npm_progress(line: str) -> Progress | None:
    """What a line of ``npm ci --loglevel=http`` reports, if anything."""
    found = _NPM_TARBALL.match(line.strip())
    return Progress("fetched", found.group(1)) if found else None


def _distribution(spec: str) -> str:
    """``pydantic==2.14.3`` -> ``pydantic``; a local wheel's path -> its project name."""
    if "/" in spec:
        spec = spec.rstrip("/").rsplit("/", 1)[-1]
        return spec.split("-", 1)[0]
    found = _NAME.match(spec)
    return found.group(0) if found else spec


# --- what a step installs ----------------------------------------------------------------------


def pyproject_packages(pyproject: Path) -> tuple[list[str], list[str]]:
    """The names pyproject.toml pins: what the package runs on, and what it is developed with."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    runtime = [_distribution(spec) for spec in project.get("dependencies", [])]
    dev = [_distribution(spec) for spec in project.get("optional-dependencies", {}).get("dev", [])]
    return runtime, dev


def npm_packages(package_json: Path) -> list[str]:
    manifest = json.loads(package_json.read_text(encoding="utf-8"))
    return sorted({**manifest.get("dependencies", {}), **manifest.get("devDependencies", {})})


@dataclass(frozen=True)
class Platform:
    """Where npm installs, in npm's words: ``os`` (linux, darwin, win32), ``cpu`` (x64, arm64),
    ``libc`` (glibc, musl; Linux only)."""

    os: str
    cpu: str
    libc: str | None

    @classmethod
    def here(cls) -> Platform:
        system = platform.system()
        machine = platform.machine()
        libc = None
        if system == "Linux":
            libc = "glibc" if platform.libc_ver()[0] == "glibc" else "musl"
        return cls(
            {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(system, system.lower()),
            {"x86_64": "x64", "AMD64": "x64", "aarch64": "arm64"}.get(machine, machine),
            libc,
        )


def npm_total(lock: Path, where: Platform | None = None) -> int:
    """How many packages ``npm ci`` installs from ``lock`` here: every entry of the lock but the
    project itself and those made for another operating system, CPU or C library."""
    packages: dict[str, Any] = json.loads(lock.read_text(encoding="utf-8")).get("packages", {})
    here = where or Platform.here()
    return sum(
        1
        for path, entry in packages.items()
        if path
        and _allows(entry.get("os"), here.os)
        and _allows(entry.get("cpu"), here.cpu)
        and (here.libc is None or _allows(entry.get("libc"), here.libc))
    )


def _allows(constraint: list[str] | None, value: str) -> bool:
    """npm's ``os``/``cpu`` rule: ``["linux"]`` allows only Linux, ``["!win32"]`` all but Windows."""
    if not constraint:
        return True
    if any(item == f"!{value}" for item in constraint):
        return False
    allowed = [item for item in constraint if not item.startswith("!")]
    return not allowed or value in allowed


# --- running a step ----------------------------------------------------------------------------


def elapsed(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class Reporter:
    """Turns the command's lines into progress lines on ``out``."""

    def __init__(self, kind: str, out: TextIO, *, total: int | None = None) -> None:
        self.kind, self.out, self.total = kind, out, total
        self.seen = 0
        self.installed: int | None = None
        self._shown_tenth = 0

    def line(self, text: str) -> None:
        if self.kind == "pip":
            self._pip(pip_progress(text))
        elif self.kind == "npm":
            self._npm(npm_progress(text))

    def _say(self, text: str) -> None:
        self.out.write(f"  {text}\n")
        self.out.flush()

    def _pip(self, progress: Progress | None) -> None:
        if progress is None:
            return
        if progress.kind == "resolved":
            self.seen += 1
            if self.seen % PIP_EVERY == 0:
                self._say(f"resolved {self.seen} packages so far (latest: {progress.name})")
        elif progress.kind == "installing":
            self._say(f"installing {progress.count} packages: {progress.name}")
        elif progress.kind == "installed":
            self.installed = progress.count

    def _npm(self, progress: Progress | None) -> None:
        if progress is None:
            return
        self.seen += 1
        if not self.total:
            return
        tenth = min(10, self.seen * 10 // self.total)
        if tenth > self._shown_tenth:
            self._shown_tenth = tenth
            self._say(f"[{tenth * 10:3d}%] {self.seen}/{self.total} packages (latest: {progress.name})")

    def done(self, seconds: float) -> str:
        if self.kind == "pip":
            count = self.installed if self.installed is not None else self.seen
            what = (
                f"{count} packages installed"
                if self.installed is not None
                else f"{count} packages resolved, none to install"
            )
            return f"done: {what} in {elapsed(seconds)}"
        if self.kind == "npm":
            return f"done: {self.seen} packages in {elapsed(seconds)}"
        return f"done in {elapsed(seconds)}"


def header(args: argparse.Namespace) -> str:
    step = f"setup {args.step}" if args.step else "setup"
    if args.kind == "pip":
        runtime, dev = pyproject_packages(Path(args.pyproject))
        return (
            f"{step}: Python packages into .venv (pip): squadron itself, the {len(runtime)} packages it runs "
            f"on ({', '.join(runtime)}) and the {len(dev)} it is developed with ({', '.join(dev)}), as "
            f"{args.pyproject} pins them, with their own dependencies"
        )
    if args.kind == "npm":
        total = npm_total(Path(args.lock))
        return (
            f"{step}: npm packages into node_modules (npm ci): {', '.join(npm_packages(Path(args.package_json)))}, "
            f"{total} packages with their dependencies, as {args.lock} pins them"
        )
    return f"{step}: {args.title}"


def run(args: argparse.Namespace, command: Sequence[str], out: TextIO) -> int:
    out.write(header(args) + "\n")
    out.flush()
    total = npm_total(Path(args.lock)) if args.kind == "npm" else None
    reporter = Reporter(args.kind, out, total=total)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    started = time.monotonic()
    try:
        process = subprocess.Popen(  # noqa: S603 (the Makefile's own command)
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        out.write(f"  could not run {command[0]}: {exc.strerror or exc}\n")
        return 127
    assert process.stdout is not None
    for line in _lines(process.stdout):
        tail.append(line)
        reporter.line(line)
    status = process.wait()
    if status != 0:
        out.write(
            f"  failed (exit status {status}) after {elapsed(time.monotonic() - started)}; its last lines:\n"
        )
        out.writelines(f"    {line}\n" for line in tail)
        out.flush()
        return status
    out.write(f"  {reporter.done(time.monotonic() - started)}\n")
    out.flush()
    return 0


def _lines(stream: Iterable[str]) -> Iterable[str]:
    for line in stream:
        yield line.rstrip("\n")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: setup_progress.py [--step N/M] [--kind pip|npm|plain] [--title T] -- COMMAND...")
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="setup_progress.py")
    parser.add_argument("--step", default="", help="which step of the setup, e.g. 2/3")
    parser.add_argument("--kind", choices=("pip", "npm", "plain"), default="plain")
    parser.add_argument("--title", default="", help="what a plain step does")
    parser.add_argument("--pyproject", default="pyproject.toml")
    parser.add_argument("--package-json", default="package.json")
    parser.add_argument("--lock", default="package-lock.json")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("no command after --")
    return run(args, command, out if out is not None else sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
