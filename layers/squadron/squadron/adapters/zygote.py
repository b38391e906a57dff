"""A process that imports a module once and forks a fresh process to run it each time it is asked.

The local launcher's agent processes (``python -m squadron.agent``) spent about 3 s each (5 s on a
busy machine) importing before they did anything: mostly the Copilot SDK's generated RPC module,
whose some 1,500 dataclasses are each built at import (``dataclasses`` writes and compiles their
methods: the time is the module's own, bytecode cached or not), and the package's pydantic models.
A zygote imports the module once (``python -m squadron.adapters.zygote squadron.agent``) and forks
per run; each fork is what ``python -m squadron.agent`` would be after its imports: a session of its
own (its process group is its pid, as ``start_new_session``), the run's exact environment (nothing
of the zygote's), stdout and stderr on the run's log, stdin on ``/dev/null``, and the module run
as ``__main__`` to an ordinary interpreter exit (``atexit``, flushed streams, the exit code).

The zygote only imports: it starts no thread, opens no socket and runs none of the module's
``__main__``, so a fork holds nothing shared but read-only code (copied on write).

Its protocol, one JSON object a line: on stdin ``{"id", "env", "log", "argv"}`` for a run; on
stdout ``{"ready": true}`` once the module is imported, ``{"id", "pid"}`` once a run's process exists, ``{"pid", "code"}`` once it has ended (its
exit code as :attr:`subprocess.Popen.returncode` says it: negative for a signal). It ends when
stdin closes, leaving runs still going to end on their own.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import selectors
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Run:
    env: dict[str, str]
    log: str
    argv: list[str]


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
                session_read, session_write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for descriptor in (wake_read, wake_write, session_read):
                        os.close(descriptor)
                    os.setsid()  # its own session and process group, before anyone hears of its pid
                    os.close(session_write)
                    return Run(env=request["env"], log=request["log"], argv=request["argv"])
                os.close(session_write)
                os.read(session_read, 1)  # end of file: the fork has its session (or has died)
                os.close(session_read)
                _answer({"id": request["id"], "pid": pid})
        _reap()  # a SIGCHLD that arrived while a request was being read


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


def become(run: Run) -> None:
    """In the fork (in a session of its own already): what ``Popen(argv, env=..., stdout=log,
    stderr=STDOUT, stdin=DEVNULL, start_new_session=True)`` would have given the process."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    log = os.open(run.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(run.env)
    sys.argv = list(run.argv)


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
    local launcher uses (``pid``, ``poll``, ``wait``, ``returncode``)."""

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


class Zygote:
    """The launcher's side: starts ``python -m squadron.adapters.zygote <module>`` (which starts
    importing at once) and hands it runs."""

    def __init__(self, module: str, *, env: Mapping[str, str], log: Path) -> None:
        self.module = module
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            self.process = subprocess.Popen(  # noqa: S603 (this interpreter, our own module)
                [sys.executable, "-m", __name__, module],
                env=dict(env),
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

    def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str], log: Path, timeout: float = 120.0
    ) -> ZygoteProcess:
        """Run the module in a fresh fork (``argv`` as its ``sys.argv``), once the zygote has
        imported it: raises RuntimeError if the zygote is gone or does not answer."""
        run = ZygoteProcess()
        with self._lock:
            if self._gone.is_set():
                raise RuntimeError("the zygote has ended")
            self._next += 1
            ident = self._next
            self._by_id[ident] = run
        request = {"id": ident, "env": dict(env), "log": str(log), "argv": list(argv)}
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
        except (OSError, ValueError) as exc:  # its pipe broken, or closed by stop
            raise RuntimeError(f"the zygote has ended: {exc}") from exc
        if not run._started.wait(timeout) or not run.pid:
            raise RuntimeError(f"the zygote did not start {self.module} in {timeout:.0f} s")
        return run

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            with self._lock:
                if "ready" in message:
                    self._ready.set()
                elif "id" in message:
                    run = self._by_id.pop(message["id"])
                    run.pid = message["pid"]
                    self._by_pid[run.pid] = run
                    run._started.set()
                else:
                    self._by_pid.pop(message["pid"])._end(message["code"])
        with self._lock:
            self._gone.set()
            self._ready.set()
            for run in self._by_id.values():  # asked, never started
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
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)


if __name__ == "__main__":
    main()
