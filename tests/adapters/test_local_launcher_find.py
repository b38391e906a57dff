"""The local stack's launcher finds a launch's task as ECS would (by its launch token), and only
while its process runs: a retried launch adopts a live task, never one that ended or one the
stand-in remembers from before the stack restarted (its process is gone)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from squadron.adapters.ecs import EcsTaskLauncher
from squadron.adapters.local_launcher import LocalLauncher
from tests.support.aws import agent_compute

SECRET = "s3cret-" + "x" * 40
#: The "agent": runs until the file named by its argument exists, then exits.
WAIT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)"


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[LocalLauncher]:
    with mock_aws():
        compute = agent_compute()
        ecs = EcsTaskLauncher(
            cluster="squadron",
            task_definition=compute.task_definition,
            container_name="agent",
            subnets=[compute.subnet],
            security_groups=[compute.security_group],
        )
        local = LocalLauncher(
            ecs=ecs,
            env={"PATH": "/usr/bin:/bin"},
            log_dir=tmp_path / "logs",
            command=[sys.executable, "-c", WAIT, str(tmp_path / "done")],
        )
        yield local
        local.shutdown()


def test_a_launch_is_found_while_its_process_runs_and_not_after(
    launcher: LocalLauncher, tmp_path: Path
) -> None:
    token = "1-7-feat-dev-g1-l1"
    assert launcher.find(token) is None
    arn = launcher.launch("1-7-feat-dev", "start", token, SECRET)
    assert launcher.find(token) == arn
    assert launcher.find("1-7-feat-dev-g1-l2") is None  # another launch of the agent
    (tmp_path / "done").touch()
    assert launcher.processes[arn].wait(timeout=30) == 0
    assert launcher.find(token) is None  # ended: a retry starts a new task


def test_a_task_of_the_stand_in_without_a_process_here_is_not_adopted(launcher: LocalLauncher) -> None:
    token = "1-7-feat-dev-g1-l1"
    arn = launcher.ecs.launch("1-7-feat-dev", "start", token, SECRET)  # the stack's earlier life
    assert launcher.ecs.find(token) == arn
    assert launcher.find(token) is None
