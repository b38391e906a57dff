"""The zygote forks runs that are what ``Popen([python, -m, module], env=..., stdout=log,
start_new_session=True)`` would be: the run's exact environment and arguments, a session of its
own, its output on its log, its exit code (negative for a signal) once it has ended."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squadron.adapters.zygote import Zygote

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.support.zygote_child"


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    started = Zygote(
        MODULE,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "ZYGOTE_ONLY": "1",
        },
        log=tmp_path / "zygote.log",
    )
    assert started.ready(timeout=60)
    yield started
    started.stop()


def _written(log: Path) -> dict[str, Any]:
    line = log.read_text(encoding="utf-8").splitlines()[0]
    return dict(json.loads(line))


@pytest.mark.parametrize(("argument", "code"), [("0", 0), ("3", 3)])
def test_a_run_is_the_module_as_main_with_its_own_environment_session_and_exit_code(
    zygote: Zygote, tmp_path: Path, argument: str, code: int
) -> None:
    log = tmp_path / "run.log"
    run = zygote.spawn(["agent", argument], env={"ONLY": "this", "PATH": "/bin"}, log=log)
    assert run.wait(timeout=30) == code
    seen = _written(log)
    assert seen["argv"][1:] == [argument]
    assert seen["env"] == {"ONLY": "this", "PATH": "/bin"}  # nothing of the zygote's (ZYGOTE_ONLY)
    assert seen["pid"] == run.pid and seen["session"] == run.pid and seen["group"] == run.pid
    assert seen["stdin"] == os.devnull
    assert zygote.process.pid != run.pid and os.getpid() != run.pid


def test_a_signalled_run_ends_as_popen_says_it_and_the_zygote_goes_on(zygote: Zygote, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    run = zygote.spawn(["agent", "wait"], env={}, log=log)
    assert run.poll() is None
    with pytest.raises(Exception, match="timed out"):
        run.wait(timeout=0)
    os.killpg(run.pid, signal.SIGTERM)  # its process group: as the launcher stops an agent
    assert run.wait(timeout=30) == -signal.SIGTERM
    again = zygote.spawn(["agent", "0"], env={}, log=tmp_path / "again.log")
    assert again.wait(timeout=30) == 0


def test_a_stopped_zygote_refuses_runs(zygote: Zygote, tmp_path: Path) -> None:
    zygote.stop()
    assert zygote.process.returncode == 0
    with pytest.raises(RuntimeError, match="zygote"):
        zygote.spawn([sys.executable], env={}, log=tmp_path / "run.log").wait(timeout=30)
