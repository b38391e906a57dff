"""One local stack per state directory: a second ``squadron local`` on the same state is refused
before it starts anything, says who holds it, and its stop removes nothing of the running one's.

The running stack is another process holding the state's lock, as a real one does (the lock is
taken first, before anything heavy starts, so the refusal is seen without starting a stack).
"""

from __future__ import annotations

import io
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from squadron import cli
from squadron.adapters.operations import ENDPOINTS_FILE
from squadron.local.stack import LocalStack
from squadron.local.state_lock import StateInUseError, StateLock
from squadron.local.wiring import LocalOptions

ROOT = Path(__file__).resolve().parents[2]
ENDPOINTS = '{"table_name": "the running stack\'s"}\n'

HOLD = """
import sys
from pathlib import Path
from squadron.local.state_lock import StateLock
StateLock.take(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A state directory another process's stack runs on (its lock held, its endpoints written)."""
    state = tmp_path / "state"
    state.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    (state / ENDPOINTS_FILE).write_text(ENDPOINTS)
    try:
        yield state, holder
    finally:
        holder.kill()
        holder.wait()


def test_a_second_stack_on_the_same_state_is_refused_and_its_stop_removes_nothing(
    running: tuple[Path, subprocess.Popen[str]],
) -> None:
    state, holder = running
    second = LocalStack(LocalOptions(root=ROOT, state_dir=state))
    with pytest.raises(StateInUseError, match=rf"pid {holder.pid}\) is running with its state in {state}"):
        second.start()
    assert (
        second.moto is None and second.sandbox is None and second.endpoint_server is None
    )  # nothing started
    second.stop()
    assert (state / ENDPOINTS_FILE).read_text() == ENDPOINTS  # the running stack is still found


def test_squadron_local_on_a_state_in_use_says_so_and_exits_with_problems(
    running: tuple[Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, holder = running
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # the test run's own handlers stay
    out = io.StringIO()
    code = cli.main(["local", "--state", str(state)], out=out)
    assert code == cli.EXIT_PROBLEMS
    assert f"another `squadron local` (pid {holder.pid}) is running" in out.getvalue()
    assert (state / ENDPOINTS_FILE).read_text() == ENDPOINTS


def test_the_state_is_free_again_once_its_stack_is_gone(running: tuple[Path, subprocess.Popen[str]]) -> None:
    state, holder = running
    holder.kill()  # however it ends, the system releases its lock
    holder.wait()
    lock = StateLock.take(state)
    with pytest.raises(StateInUseError):
        StateLock.take(state)  # and this process's own second take is refused as well
    lock.release()
    StateLock.take(state).release()
