"""Agent tasks as local processes: the :class:`~squadron.ports.TaskLauncher` port of the local stack.

Each launch is first run on the ECS API stand-in (the moto server) with the
same client token and ``startedBy`` as in AWS, so the task has an ARN the
registry records, the reconciler can ask about and a retried launch can find
(:meth:`LocalLauncher.find`); then ``python -m
squadron.agent`` starts as a process with the same environment overrides an
ECS task gets. When the process ends, its ECS task is stopped; stopping a task
terminates its process group. ``shutdown`` leaves no process behind.

With ``agents_root``, each task's ``SQUADRON_AGENTS_ROOT`` is its repository's own root under it
(``<agents root>/repos/<repo id>``, :mod:`squadron.domain.repo_volumes`), as each repository's
task definition mounts only its own access point on AWS.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from squadron.adapters.ecs import AGENT_ID_ENV, LAUNCH_PURPOSE_ENV, LAUNCH_TOKEN_ENV, EcsTaskLauncher
from squadron.adapters.zygote import Zygote, ZygoteProcess, ZygoteUnavailable
from squadron.domain.agents import parse_agent_id
from squadron.domain.launches import SECRET_ENV
from squadron.domain.repo_volumes import REPOS_DIRECTORY, ROOT_PERMISSIONS

logger = logging.getLogger(__name__)


class LocalLauncher:
    def __init__(
        self,
        *,
        ecs: EcsTaskLauncher,
        env: Mapping[str, str],
        log_dir: Path,
        command: Sequence[str] = (sys.executable, "-m", "squadron.agent"),
        agents_root: Path | None = None,
        zygote: Zygote | None = None,
    ) -> None:
        self.ecs = ecs
        #: Forks each agent process already imported, if ``command`` is its module run by this
        #: interpreter (:meth:`Zygote.runs`); None: each is ``command`` started afresh. A launch the
        #: zygote cannot start (it died) starts afresh. Stopped with the launcher.
        self.zygote = zygote
        #: Where each repository's root is made (None: every task gets ``env``'s root).
        self.agents_root = agents_root
        self.env = dict(env)
        self.log_dir = log_dir
        self.command = list(command)
        self.processes: dict[str, subprocess.Popen[bytes] | ZygoteProcess] = {}
        self.exits: dict[str, int] = {}
        #: (agent id, launch purpose) of every process started, in order.
        self.launches: list[tuple[str, str]] = []
        #: The same with the ``time.monotonic()`` its process started at (the benchmarks' latencies).
        self.launch_times: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()
        self._closing = False
        self._agent_of: dict[int, str] = {}

    def launch(self, agent_id: str, purpose: str, token: str, secret: str) -> str:
        arn = self.ecs.launch(agent_id, purpose, token, secret)
        with self._lock:
            if self._closing:
                raise RuntimeError("the local stack is shutting down")
            running = self.processes.get(arn)
            if running is not None and running.poll() is None:
                return arn  # a retried launch with the same token: the same task
            self.log_dir.mkdir(parents=True, exist_ok=True)
            env = {
                **self.env,
                **self._repo_root(agent_id),
                AGENT_ID_ENV: agent_id,
                LAUNCH_PURPOSE_ENV: purpose,
                LAUNCH_TOKEN_ENV: token,
                SECRET_ENV: secret,
            }
            process = self._start(agent_id, env)
            self.processes[arn] = process
            self.launches.append((agent_id, purpose))
            self.launch_times.append((agent_id, purpose, time.monotonic()))
            self._agent_of[process.pid] = agent_id
        threading.Thread(target=self._watch, args=(arn, agent_id, process), daemon=True).start()
        logger.info("agent %s: task %s started (%s)", agent_id, arn.rsplit("/", 1)[-1], purpose)
        return arn

    def _start(self, agent_id: str, env: dict[str, str]) -> subprocess.Popen[bytes] | ZygoteProcess:
        log = self.log_dir / f"{agent_id}.log"
        if self.zygote is not None and self.zygote.runs(self.command):
            try:
                # What follows `python -m <module>`; the environment goes in a launch file the fork
                # reads, never through the zygote (squadron.adapters.zygote).
                return self.zygote.spawn(self.command[3:], env=env, log=log)
            except ZygoteUnavailable:
                logger.warning(
                    "agent %s: the zygote did not start it; starting it afresh", agent_id, exc_info=True
                )
        with log.open("ab") as out:
            return subprocess.Popen(  # noqa: S603 (our own agent command, fixed at construction)
                self.command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def find(self, token: str) -> str | None:
        """The task of launch ``token`` on the ECS stand-in, if its process still runs here (a
        task of this stack's earlier life is gone with its process)."""
        arn = self.ecs.find(token)
        with self._lock:
            process = self.processes.get(arn) if arn is not None else None
            return arn if process is not None and process.poll() is None else None

    def repo_root(self, repo_id: int) -> Path:
        """The repository's root, as its access point's root on AWS (None without agents_root)."""
        if self.agents_root is None:
            raise LookupError("this launcher gives every task the same root")
        return self.agents_root / REPOS_DIRECTORY / str(repo_id)

    def _repo_root(self, agent_id: str) -> dict[str, str]:
        """The task's SQUADRON_AGENTS_ROOT: its repository's root, made as EFS makes an access
        point's (the stack's owner's, mode 0711: agents' users pass, never list)."""
        if self.agents_root is None:
            return {}
        repo_id, _, _ = parse_agent_id(agent_id)
        root = self.repo_root(repo_id)
        mode = int(ROOT_PERMISSIONS, 8)
        for directory in (root.parent, root):
            directory.mkdir(mode=mode, exist_ok=True)
            os.chmod(directory, mode)
        return {"SQUADRON_AGENTS_ROOT": str(root)}

    def _watch(self, arn: str, agent_id: str, process: subprocess.Popen[bytes] | ZygoteProcess) -> None:
        code = process.wait()
        with self._lock:
            self.exits[arn] = code
        logger.info("agent %s: task %s exited with %s", agent_id, arn.rsplit("/", 1)[-1], code)
        try:
            self.ecs.stop(arn, f"the agent process exited with {code}")
        except Exception:  # the stand-in may be gone when the stack shuts down
            logger.debug("stopping %s on the ECS stand-in failed", arn, exc_info=True)

    def stop(self, task_arn: str, reason: str) -> None:
        with self._lock:
            process = self.processes.get(task_arn)
        if process is None:
            # Not a task of this stack: one from before a restart, gone with the ECS stand-in that
            # ran it (moto answers StopTask on an unknown task with a 500, not ECS's "not found").
            logger.info("task %s is not this stack's: already gone", task_arn.rsplit("/", 1)[-1])
            return
        if process.poll() is None:
            _terminate(process)
        self.ecs.stop(task_arn, reason)

    def kill(self, agent_id: str) -> None:
        """SIGKILL the agent's running process group, as a task dying mid-turn (tests' fault)."""
        with self._lock:
            alive = [p for p in self.processes.values() if p.poll() is None]
            targets = [p for p in alive if self._agent_of.get(p.pid) == agent_id]
        if not targets:
            raise LookupError(f"no running process for {agent_id}")
        for process in targets:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def running_agents(self) -> set[str]:
        """The agents with a live process."""
        with self._lock:
            return {self._agent_of[p.pid] for p in self.processes.values() if p.poll() is None}

    def running(self) -> list[str]:
        with self._lock:
            return [arn for arn, process in self.processes.items() if process.poll() is None]

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._lock:
            self._closing = True
            processes = list(self.processes.values())
        for process in processes:
            if process.poll() is None:
                _terminate(process, timeout)
        if self.zygote is not None:
            self.zygote.stop(timeout)


def _terminate(process: subprocess.Popen[bytes] | ZygoteProcess, timeout: float = 10.0) -> None:
    """SIGTERM to the process group (the agent and its Copilot CLI), SIGKILL if it lingers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)
    except ProcessLookupError:
        return
