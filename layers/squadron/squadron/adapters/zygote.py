"""A process that imports a module once and forks a fresh process to run it each time it is asked.

The local launcher's agent processes (``python -m squadron.agent``) spent about 3 s each (5 s on a
busy machine) importing before they did anything: mostly the Copilot SDK's generated RPC module,
whose some 1,500 dataclasses are each built at import (``dataclasses`` writes and compiles their
methods: the time is the module's own, bytecode cached or not), and the package's pydantic models.
A zygote imports the module once (``python -m squadron.adapters.zygote squadron.agent``) and forks
per run; each fork is what ``python -m squadron.agent`` started by the launcher would be after its
imports: a session of its own (its process group is its pid, as ``start_new_session``), the run's
exact environment (nothing of the zygote's), the launcher's user, groups, umask, working directory
and resource limits at the time of the run, stdout and stderr on the run's log, stdin on
``/dev/null``, no other descriptor, and the module run as ``__main__`` to an ordinary interpreter
exit (``atexit``, flushed streams, the exit code).

**No secret ever reaches the zygote.** Every fork inherits the zygote's memory, so whatever the
zygote once held, every later run (another repository's agent) could hold too. A run's environment
(its launch secret) and everything else of the run go into a launch file the launcher creates
(``O_EXCL``, mode 0600, a random name in a directory of its own, mode 0700): the zygote is told only
the file's path, and it is the fork that opens the file (refusing a link or a file not its user's
alone), unlinks it and reads it, in its own memory. Whoever unlinks the file owns the run: the fork
(which then runs it) or the launcher (which gave up waiting, or found the fork gone without it, and
may start the run another way) — never both. The zygote itself starts with no more environment
than the interpreter needs (``PATH``, ``PYTHONPATH``, ``HOME``), runs no thread, opens no socket and
runs none of the module's ``__main__``: a fork shares nothing with it but code (copied on write).

Its protocol, one JSON object a line: on stdin ``{"id", "path"}`` for a run; on stdout
``{"ready": true}`` once the module is imported, ``{"id", "pid"}`` once a run's process has its
session and has claimed (or failed to claim) its launch file, ``{"pid", "code"}`` once it has ended
(its exit code as :attr:`subprocess.Popen.returncode` says it: negative for a signal). It ends when
stdin closes, leaving runs still going to end on their own.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import locale
import logging
import os
import resource
import runpy
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: The environment a zygote starts with: what an interpreter needs to find its modules, no more.
ZYGOTE_ENV = ("PATH", "PYTHONPATH", "HOME")
#: Set to ``0`` in the launcher's environment: no zygote, every process started afresh.
SWITCH_ENV = "SQUADRON_ZYGOTE"
#: Every resource limit a run gets as the launcher has it (``resource.RLIMIT_*``).
RLIMITS = sorted(
    (name for name in dir(resource) if name.startswith("RLIMIT_")), key=lambda name: getattr(resource, name)
)


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(SWITCH_ENV, "1") != "0"


def zygote_env(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: environ[name] for name in ZYGOTE_ENV if name in environ}


@dataclass(frozen=True)
class Run:
    """What a fork becomes: all of it read from the run's launch file, never from the zygote."""

    env: dict[str, str]
    log: str
    args: list[str]
    directory: str
    umask: int
    uid: tuple[int, int, int]
    gid: tuple[int, int, int]
    groups: list[int]
    rlimits: dict[str, tuple[int, int]]


def launcher_state() -> dict[str, Any]:
    """The launcher's own user, groups, umask, working directory and resource limits: what a
    process it started itself would have."""
    return {
        "cwd": os.getcwd(),
        "umask": _umask(),
        "uid": list(os.getresuid()),
        "gid": list(os.getresgid()),
        "groups": os.getgroups(),
        "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMITS},
    }


def _umask() -> int:
    """The umask, read without setting it (another thread may be creating a file meanwhile)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    raise RuntimeError("no Umask in /proc/self/status")


def write_launch(directory: Path, launch: Mapping[str, Any]) -> Path:
    """A fresh launch file in ``directory`` (the launcher's, mode 0700): created, never reused or
    followed, readable by its user alone."""
    path = directory / f"{secrets.token_hex(16)}.json"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(json.dumps(dict(launch)).encode())
    return path


def claim(path: str) -> Run:
    """In the fork: take the run's launch file (open it, unlink it, read it). Raises OSError if
    it is gone (the launcher took it back), a link, or not this user's alone."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o077:
            raise PermissionError(f"{path} is not a launch file of this user's alone")
        os.unlink(path)  # FileNotFoundError: the launcher took it back first; the run is not ours
        data = b""
        while chunk := os.read(descriptor, 65536):
            data += chunk
    finally:
        os.close(descriptor)
    launch = json.loads(data)
    return Run(
        env=launch["env"],
        log=launch["log"],
        args=launch["args"],
        directory=launch["cwd"],
        umask=launch["umask"],
        uid=_ids(launch["uid"]),
        gid=_ids(launch["gid"]),
        groups=launch["groups"],
        rlimits={name: (soft, hard) for name, (soft, hard) in launch["rlimits"].items()},
    )


def _ids(ids: list[int]) -> tuple[int, int, int]:
    real, effective, saved = ids
    return real, effective, saved


def serve(module: str) -> Run | None:
    """Import ``module``, then fork a run per request: the fork returns its :class:`Run`, the
    zygote None once its stdin closes."""
    imported = importlib.import_module(module)
    if hasattr(imported, "__path__"):  # a package: what runs is its __main__ (imported, not run)
        importlib.import_module(f"{module}.__main__")
    _answer({"ready": True})
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD wakes the selector
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_read:
                os.read(wake_read, 4096)
                _reap()
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                return None
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                claimed_read, claimed_write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for descriptor in (wake_read, wake_write, claimed_read):
                        os.close(descriptor)
                    return _begin(request["path"], claimed_write)
                os.close(claimed_write)
                os.read(claimed_read, 1)  # end of file: the fork has its session and its run (or died)
                os.close(claimed_read)
                _answer({"id": request["id"], "pid": pid})
        _reap()  # a SIGCHLD that arrived while a request was being read


def _begin(path: str, claimed: int) -> Run:
    """In the fork: its own session and process group (before anyone hears of its pid), then its
    run's launch file; exits at once if the file is not its to take."""
    try:
        os.setsid()
        run = claim(path)
    except BaseException as exc:  # whatever it is, this fork runs nothing
        with contextlib.suppress(OSError):
            os.write(2, f"zygote: run {path} not started: {exc!r}\n".encode())
        os._exit(70)
    os.close(claimed)
    return run


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _answer({"pid": pid, "code": os.waitstatus_to_exitcode(status)})


def _answer(message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


#: The locale a C locale is coerced to (PEP 538) by this interpreter: the zygote's own environment
#: is bare enough to have been, so its ``LC_CTYPE`` says which.
_COERCED_TO = os.environ.get("LC_CTYPE", "C.UTF-8")


def _coerced(env: dict[str, str]) -> dict[str, str]:
    """``env`` as the interpreter's start leaves it in ``os.environ``: with ``LC_CTYPE`` set when
    it names the C locale (or nothing), as PEP 538's locale coercion does."""
    if env.get("LC_ALL") or env.get("PYTHONCOERCECLOCALE") == "0":
        return env
    if (env.get("LC_CTYPE") or env.get("LANG") or "C") not in ("C", "POSIX"):
        return env
    return {**env, "LC_CTYPE": _COERCED_TO}


def become(run: Run) -> None:
    """In the fork (in a session of its own already): what ``Popen(argv, env=..., stdout=log,
    stderr=STDOUT, stdin=DEVNULL, start_new_session=True)`` from the launcher would have given the
    process. Its user and groups first, as ``subprocess`` sets them (groups, gid, uid), then umask
    and limits, and only then its directory and its log, entered and opened as that user."""
    if os.getgroups() != run.groups:
        os.setgroups(run.groups)
    if os.getresgid() != run.gid:
        os.setresgid(*run.gid)
    if os.getresuid() != run.uid:
        os.setresuid(*run.uid)
    os.umask(run.umask)
    for name, limits in run.rlimits.items():
        number = getattr(resource, name, None)
        if number is not None and resource.getrlimit(number) != limits:
            resource.setrlimit(number, limits)
    os.chdir(run.directory)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    log = os.open(run.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # Popen's close_fds
    os.environ.clear()
    os.environ.update(_coerced(run.env))
    with contextlib.suppress(locale.Error):  # as the interpreter's start: the environment's locale
        locale.setlocale(locale.LC_CTYPE, "")
    sys.argv = [sys.argv[0], *run.args]  # the first, the module's path once it runs (as `python -m`)


def main() -> None:
    module = sys.argv[1]
    run = serve(module)
    if run is None:
        return
    become(run)
    # Run afresh as __main__, as `python -m` would: its imports are done, its own body is not.
    package = hasattr(sys.modules[module], "__path__")
    sys.modules.pop(f"{module}.__main__" if package else module, None)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


class ZygoteProcess:
    """A run of a :class:`Zygote`, with the part of :class:`subprocess.Popen`'s interface the
    local stack uses (``pid``, ``poll``, ``wait``, ``returncode``, ``terminate``, ``kill``)."""

    def __init__(self) -> None:
        self.pid = 0
        self.returncode: int | None = None
        self._started = threading.Event()
        self._ended = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"process {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, number: int) -> None:
        if self.returncode is None:  # not reaped: the pid is still its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def _end(self, code: int) -> None:
        self.returncode = code
        self._ended.set()


def _await_end(run: ZygoteProcess) -> None:
    """Waits for a run whose zygote has gone (it was reparented) to end."""
    try:
        descriptor = os.pidfd_open(run.pid)
    except ProcessLookupError:
        run._end(-1)
        return
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(descriptor, selectors.EVENT_READ)
            selector.select()
    finally:
        os.close(descriptor)
    run._end(-1)


class ZygoteUnavailable(RuntimeError):
    """The zygote did not start the run, and never will: the caller may start it another way."""


class Zygote:
    """The launcher's side: starts ``python -m squadron.adapters.zygote <module>`` (which starts
    importing at once, with :data:`ZYGOTE_ENV` of ``env`` only) and hands it runs."""

    def __init__(self, module: str, *, env: Mapping[str, str], log: Path) -> None:
        self.module = module
        self.log = log
        #: Where runs' launch files are written: the launcher's user's alone (mkdtemp: 0700).
        self.launches = Path(tempfile.mkdtemp(prefix="squadron-launches-"))
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            self.process = subprocess.Popen(  # noqa: S603 (this interpreter, our own module)
                [sys.executable, "-m", __name__, module],
                env=zygote_env(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=out,
                start_new_session=True,  # a terminal's Ctrl-C goes to the stack, which stops it
            )
        self._lock = threading.Lock()
        self._next = 0
        self._by_id: dict[int, ZygoteProcess] = {}
        self._by_pid: dict[int, ZygoteProcess] = {}
        self._gone = threading.Event()
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def runs(self, command: Sequence[str]) -> bool:
        """Whether ``command`` is this zygote's module run by this interpreter (``python -m``)."""
        return list(command[:3]) == [sys.executable, "-m", self.module]

    def spawn(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        ready_timeout: float = 120.0,
        timeout: float = 30.0,
    ) -> ZygoteProcess:
        """Run the module in a fresh fork (``args`` as ``python -m module args`` gets them), once
        the zygote has imported it (waiting up to ``ready_timeout``). Raises
        :class:`ZygoteUnavailable` if the zygote is gone, not ready or does not start the run in
        ``timeout`` (the run will not start: its launch file is taken back), RuntimeError if a fork
        took the run but the zygote ended before saying which process it is."""
        if not self._ready.wait(ready_timeout) or self._gone.is_set():
            raise ZygoteUnavailable(f"the zygote of {self.module} is not running (see {self.log})")
        path = write_launch(
            self.launches,
            {"env": dict(env), "log": os.path.abspath(log), "args": list(args), **launcher_state()},
        )
        run = ZygoteProcess()
        with self._lock:
            self._next += 1
            ident = self._next
            if self._gone.is_set():  # nothing will ever answer it: taken back below at once
                run._started.set()
            else:
                self._by_id[ident] = run
                self._send(ident, path)
        try:
            run._started.wait(timeout)
        finally:
            with self._lock:
                self._by_id.pop(ident, None)
        try:
            path.unlink()
        except FileNotFoundError:  # the fork took it: the run is going
            if run.pid:
                return run
            raise RuntimeError(
                f"a fork of the zygote of {self.module} took run {ident} but the zygote ended before "
                f"saying which process it is (see {self.log})"
            ) from None
        raise ZygoteUnavailable(  # taken back: no fork runs it now or later
            f"the zygote of {self.module} did not start run {ident}"
            + (f" (its fork {run.pid} failed: see {self.log})" if run.pid else f" in {timeout:.0f} s")
        )

    def _send(self, ident: int, path: Path) -> None:
        """One request on the zygote's stdin (under the lock: a line at a time): its id and path."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps({"id": ident, "path": str(path)}) + "\n").encode())
            self.process.stdin.flush()
        except (OSError, ValueError) as exc:  # its pipe broken, or closed by stop: _read says it
            logger.debug("the zygote of %s is gone: %r", self.module, exc)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            with self._lock:
                if "ready" in message:
                    self._ready.set()
                elif "id" in message:
                    run = self._by_id.pop(message["id"], None)
                    if run is not None:  # else: its spawn gave up and took its launch file back
                        run.pid = message["pid"]
                        self._by_pid[run.pid] = run
                        run._started.set()
                else:
                    ended = self._by_pid.pop(message["pid"], None)
                    if ended is not None:
                        ended._end(message["code"])
        with self._lock:
            self._gone.set()
            self._ready.set()
            for run in self._by_id.values():  # asked, never answered
                run._started.set()
            self._by_id.clear()
            going = list(self._by_pid.values())
            self._by_pid.clear()
        for run in going:  # no exit code to read now: their end, when it comes, says -1
            threading.Thread(target=_await_end, args=(run,), daemon=True).start()

    def ready(self, timeout: float = 120.0) -> bool:
        """Whether the zygote has imported its module (and can fork runs at once)."""
        return self._ready.wait(timeout) and not self._gone.is_set()

    def alive(self) -> bool:
        return not self._gone.is_set()

    def stop(self, timeout: float = 10.0) -> None:
        """Close its stdin (it ends; runs still going are the caller's to end first)."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError), self._lock:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)
        shutil.rmtree(self.launches, ignore_errors=True)


if __name__ == "__main__":
    main()
