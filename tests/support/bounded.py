"""Run one call in a forked child under a memory ceiling and a deadline, and report what it cost.

The hostile-input tests and the fuzzers use it so that a parser that would hang or
allocate without end fails the test (killed at the deadline, or a MemoryError under
``RLIMIT_AS``) instead of taking the machine with it. What a call cost is measured
as the child's CPU time (user + system, from ``wait4``), which other processes on a
loaded machine barely change — unlike wall-clock time.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Address space a call may add to what the forked child already maps.
DEFAULT_MEMORY_MIB = 512
#: Wall-clock seconds after which the child is killed (a hang, not a slow machine).
DEFAULT_DEADLINE = 60.0


class BoundExceededError(AssertionError):
    """The call did not answer within its deadline (it was killed)."""


@dataclass(frozen=True)
class Outcome:
    #: "returned" or "raised".
    how: str
    #: The returned value (when picklable, else its repr), or "ExceptionType: message".
    value: Any
    cpu_seconds: float
    max_rss_mib: float

    @property
    def raised(self) -> str | None:
        return str(self.value) if self.how == "raised" else None


def _mapped_bytes() -> int:
    """The address space this process maps now (``/proc/self/statm``'s first field)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(write: int, call: Callable[..., Any], args: tuple[Any, ...], memory_mib: int) -> None:
    limit = _mapped_bytes() + memory_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        result: tuple[str, Any] = ("returned", call(*args))
    except BaseException as exc:  # everything is reported, MemoryError and RecursionError included
        result = ("raised", f"{type(exc).__name__}: {exc}"[:4000])
    try:
        data = pickle.dumps(result)
    except Exception:
        data = pickle.dumps((result[0], repr(result[1])[:4000]))
    with os.fdopen(write, "wb") as out:
        out.write(data)


def run_bounded(
    call: Callable[..., Any],
    *args: Any,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    deadline: float = DEFAULT_DEADLINE,
) -> Outcome:
    """``call(*args)`` in a forked child with at most ``memory_mib`` more address space."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        try:
            _child(write, call, args, memory_mib)
        finally:
            os._exit(0)
    os.close(write)
    chunks: list[bytes] = []
    give_up = time.monotonic() + deadline
    with os.fdopen(read, "rb", buffering=0) as pipe:
        while True:
            left = give_up - time.monotonic()
            ready, _, _ = select.select([pipe], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.wait4(pid, 0)
                raise BoundExceededError(f"{call!r} gave no answer within {deadline} s; killed")
            chunk = pipe.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
    _, status, usage = os.wait4(pid, 0)
    if not chunks:
        raise BoundExceededError(f"{call!r} died without an answer (wait status {status})")
    how, value = pickle.loads(b"".join(chunks))  # noqa: S301 (our own child's answer)
    return Outcome(how, value, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
