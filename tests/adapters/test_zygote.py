"""The zygote forks runs that are what the launcher's ``Popen([python, -m, module], env=...,
stdout=log, start_new_session=True)`` would be — and never holds a run's secret.

A run's environment (its launch secret) reaches only its fork, through a launch file the fork
takes: the zygote's memory holds no secret after many runs, another run (as an agent's user)
cannot open a launch file that is not its own, and a zygote that dies or hangs makes a launch fail
at once or start afresh, never wait."""

from __future__ import annotations

import json
import os
import resource
import secrets
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from squadron.adapters.ecs import EcsTaskLauncher
from squadron.adapters.local_launcher import LocalLauncher
from squadron.adapters.zygote import Zygote, ZygoteProcess, ZygoteUnavailable, write_launch
from squadron.domain.launches import SECRET_ENV
from tests.support.aws import agent_compute

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.support.zygote_child"
PYTHONPATH = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="an agent's own user exists only under root")


def _zygote(tmp_path: Path) -> Zygote:
    started = Zygote(
        MODULE,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": PYTHONPATH, "ZYGOTE_ONLY": "1"},
        log=tmp_path / "zygote.log",
    )
    assert started.ready(timeout=60)
    return started


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    started = _zygote(tmp_path)
    yield started
    if started.process.poll() is None:
        os.kill(started.process.pid, signal.SIGCONT)  # if a test stopped it
    started.stop()


def _written(log: Path) -> dict[str, Any]:
    line = log.read_text(encoding="utf-8").splitlines()[0]
    return dict(json.loads(line))


@pytest.mark.parametrize(("argument", "code"), [("0", 0), ("3", 3)])
def test_a_run_is_the_module_as_main_with_its_own_environment_session_and_exit_code(
    zygote: Zygote, tmp_path: Path, argument: str, code: int
) -> None:
    log = tmp_path / "run.log"
    run = zygote.spawn([argument], env={"ONLY": "this", "PATH": "/bin"}, log=log)
    assert run.wait(timeout=30) == code
    seen = _written(log)
    assert seen["argv"] == [str(ROOT / "tests" / "support" / "zygote_child.py"), argument]  # as `python -m`
    # Nothing of the zygote's (ZYGOTE_ONLY); its C locale coerced as an interpreter's start does.
    assert seen["env"] == {"ONLY": "this", "PATH": "/bin", "LC_CTYPE": "C.UTF-8"}
    assert seen["pid"] == run.pid and seen["session"] == run.pid and seen["group"] == run.pid
    assert seen["descriptors"]["0"] == os.devnull
    assert zygote.process.pid != run.pid and os.getpid() != run.pid


def test_a_signalled_run_ends_as_popen_says_it_and_the_zygote_goes_on(zygote: Zygote, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    run = zygote.spawn(["wait"], env={}, log=log)
    assert run.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        run.wait(timeout=0)
    os.killpg(run.pid, signal.SIGTERM)  # its process group: as the launcher stops an agent
    assert run.wait(timeout=30) == -signal.SIGTERM
    again = zygote.spawn(["0"], env={}, log=tmp_path / "again.log")
    assert again.wait(timeout=30) == 0


# --- A fork is what a plain launch is --------------------------------------------------------


@pytest.fixture
def ecs() -> Iterator[EcsTaskLauncher]:
    with mock_aws():
        compute = agent_compute()
        yield EcsTaskLauncher(
            cluster="squadron",
            task_definition=compute.task_definition,
            container_name="agent",
            subnets=[compute.subnet],
            security_groups=[compute.security_group],
        )


def _launched(launcher: LocalLauncher, agent_id: str, secret: str) -> dict[str, Any]:
    """What the launched probe says of its process, with what differs between any two launches
    (its pid, its log's name, its agent's variables) made alike."""
    token = secrets.token_hex(8)
    launcher.launch(agent_id, "start", token, secret)
    (process,) = [p for p in launcher.processes.values() if launcher._agent_of.get(p.pid) == agent_id]
    assert process.wait(timeout=60) == 0
    log = launcher.log_dir / f"{agent_id}.log"
    seen = _written(log)
    assert seen["pid"] == process.pid and seen["session"] == process.pid and seen["group"] == process.pid
    assert seen["env"][SECRET_ENV] == secret and seen["env"]["SQUADRON_AGENT_ID"] == agent_id
    text = json.dumps({key: value for key, value in seen.items() if key not in ("pid", "session", "group")})
    return dict(
        json.loads(
            text.replace(str(log), "<log>")
            .replace(agent_id, "<agent>")
            .replace(secret, "<secret>")
            .replace(token, "<token>")
        )
    )


def _umask(value: int) -> Callable[[], None]:
    previous = os.umask(value)

    def undo() -> None:
        os.umask(previous)

    return undo


def _cwd(path: Path) -> Callable[[], None]:
    previous = os.getcwd()
    os.chdir(path)
    return lambda: os.chdir(previous)


def _nofile() -> Callable[[], None]:
    previous = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(previous[0], 512), previous[1]))
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, previous)


def _groups() -> Callable[[], None]:
    previous = os.getgroups()
    os.setgroups([*previous, 4242])
    return lambda: os.setgroups(previous)


#: What the launcher changes about itself after its zygote started: a launch, forked or not, has it.
CHANGES: dict[str, Callable[[Path], Callable[[], None]]] = {
    "nothing": lambda _: lambda: None,
    "umask": lambda _: _umask(0o027),
    "cwd": _cwd,
    "rlimit": lambda _: _nofile(),
    "groups": lambda _: _groups(),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_forked_launch_is_a_plain_launch(
    ecs: EcsTaskLauncher, zygote: Zygote, tmp_path: Path, change: str
) -> None:
    if change == "groups" and os.geteuid() != 0:
        pytest.skip("only root sets its groups")
    command = [sys.executable, "-m", MODULE, "0"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHONPATH}
    plain = LocalLauncher(ecs=ecs, env=env, log_dir=tmp_path / "plain", command=command)
    forked = LocalLauncher(ecs=ecs, env=env, log_dir=tmp_path / "forked", command=command, zygote=zygote)
    (tmp_path / "here").mkdir()
    undo = CHANGES[change](tmp_path / "here")
    try:
        expected = _launched(plain, "1-7-feat-dev", "plain-" + secrets.token_hex(16))
        seen = _launched(forked, "1-8-feat-dev", "forked-" + secrets.token_hex(16))
    finally:
        undo()
        plain.shutdown()
    assert forked.processes and all(isinstance(p, ZygoteProcess) for p in forked.processes.values())
    assert seen == expected  # user, groups, umask, cwd, descriptors, limits, signals, capabilities, env
    assert set(expected) >= {"uid", "gid", "groups", "cwd", "descriptors", "rlimits", "handlers", "status"}


# --- No secret reaches the zygote ------------------------------------------------------------


def _memory_holds(pid: int, needles: list[bytes]) -> set[bytes]:
    """Which of ``needles`` are anywhere in process ``pid``'s readable memory."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps", encoding="ascii") as maps, open(f"/proc/{pid}/mem", "rb", 0) as memory:
        for line in maps:
            addresses, permissions = line.split()[:2]
            if "r" not in permissions:
                continue
            start, end = (int(address, 16) for address in addresses.split("-"))
            try:
                memory.seek(start)
                data = memory.read(end - start)
            except (OSError, OverflowError, ValueError):  # [vvar], [vsyscall]
                continue
            found |= {needle for needle in needles if needle in data}
    return found


@ROOT_ONLY
def test_the_zygote_never_holds_a_launchs_secret(zygote: Zygote, tmp_path: Path) -> None:
    launched = [f"launch-secret-{n}-{secrets.token_hex(16)}" for n in range(5)]
    for n, secret in enumerate(launched):
        run = zygote.spawn(["0"], env={SECRET_ENV: secret}, log=tmp_path / f"{n}.log")
        assert run.wait(timeout=30) == 0
        assert _written(tmp_path / f"{n}.log")["env"][SECRET_ENV] == secret
    waiting_secret = f"launch-secret-waiting-{secrets.token_hex(16)}"
    os.mkfifo(tmp_path / "waiting.log")  # its first line, once it has its environment
    waiting = zygote.spawn(["wait"], env={SECRET_ENV: waiting_secret}, log=tmp_path / "waiting.log")
    with open(tmp_path / "waiting.log", encoding="utf-8") as fifo:
        assert json.loads(fifo.readline())["env"][SECRET_ENV] == waiting_secret
    needles = [secret.encode() for secret in [*launched, waiting_secret]]
    assert _memory_holds(waiting.pid, needles) == {waiting_secret.encode()}  # the scan finds a secret held
    assert _memory_holds(zygote.process.pid, needles) == set()
    os.killpg(waiting.pid, signal.SIGTERM)
    assert waiting.wait(timeout=30) == -signal.SIGTERM


@ROOT_ONLY
def test_a_run_cannot_open_another_launchs_file(zygote: Zygote, tmp_path: Path) -> None:
    running = zygote.spawn(["wait"], env={SECRET_ENV: "a-" + secrets.token_hex(16)}, log=tmp_path / "a.log")
    assert os.listdir(zygote.launches) == []  # its own launch file is gone once it runs
    # B's launch file, as the launcher writes it while A runs (its spawn not yet answered).
    other = write_launch(zygote.launches, {"env": {SECRET_ENV: "b-" + secrets.token_hex(16)}})
    assert stat.S_IMODE(zygote.launches.stat().st_mode) == 0o700
    assert stat.S_IMODE(other.stat().st_mode) == 0o600
    # A's tools run as the agent's own user (squadron.adapters.confinement): a uid of its own, no groups.
    for command in (["cat", str(other)], ["ls", str(zygote.launches)], ["ls", str(other)]):
        attempt = subprocess.run(
            command,
            check=False,
            capture_output=True,
            text=True,
            user=54321,
            group=54321,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        assert attempt.returncode != 0 and "Permission denied" in attempt.stderr, attempt
    assert other.exists()  # there all along: unreadable, not merely gone
    os.killpg(running.pid, signal.SIGTERM)
    assert running.wait(timeout=30) == -signal.SIGTERM


# --- A zygote that dies or hangs -----------------------------------------------------------


def test_a_dead_zygote_refuses_runs_at_once_and_the_launcher_starts_them_afresh(
    ecs: EcsTaskLauncher, zygote: Zygote, tmp_path: Path
) -> None:
    os.kill(zygote.process.pid, signal.SIGKILL)
    zygote.process.wait(timeout=30)
    with pytest.raises(ZygoteUnavailable, match="zygote"):
        zygote.spawn(["0"], env={}, log=tmp_path / "run.log", timeout=600)  # not waited for
    assert not zygote.alive() and os.listdir(zygote.launches) == []
    command = [sys.executable, "-m", MODULE, "0"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHONPATH}
    launcher = LocalLauncher(ecs=ecs, env=env, log_dir=tmp_path / "logs", command=command, zygote=zygote)
    secret = "afresh-" + secrets.token_hex(16)
    launcher.launch("1-7-feat-dev", "start", secrets.token_hex(8), secret)
    (process,) = launcher.processes.values()
    assert isinstance(process, subprocess.Popen) and process.wait(timeout=60) == 0
    assert _written(tmp_path / "logs" / "1-7-feat-dev.log")["env"][SECRET_ENV] == secret
    launcher.shutdown()


def test_a_hung_zygote_fails_the_run_in_its_time_and_its_late_fork_runs_nothing(
    zygote: Zygote, tmp_path: Path
) -> None:
    os.kill(zygote.process.pid, signal.SIGSTOP)
    with pytest.raises(ZygoteUnavailable, match="did not start"):
        zygote.spawn(["0"], env={}, log=tmp_path / "late.log", timeout=1)
    assert os.listdir(zygote.launches) == []  # taken back: a fork of it can never run it
    os.kill(zygote.process.pid, signal.SIGCONT)
    run = zygote.spawn(["0"], env={}, log=tmp_path / "next.log")
    assert run.wait(timeout=30) == 0
    assert not (tmp_path / "late.log").exists()  # the late fork found no launch file and ran nothing
    assert "not started" in zygote.log.read_text(encoding="utf-8")


def test_a_stopped_zygote_refuses_runs(zygote: Zygote, tmp_path: Path) -> None:
    zygote.stop()
    assert zygote.process.returncode == 0
    with pytest.raises(ZygoteUnavailable, match="zygote"):
        zygote.spawn(["0"], env={}, log=tmp_path / "run.log")
