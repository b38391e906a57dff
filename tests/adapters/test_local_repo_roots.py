"""The local stack's stand-in for per-repository access points: each task's agents' root is its
repository's own directory, so a task of one repository finds nothing of another's under it."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from squadron.adapters.ecs import EcsTaskLauncher
from squadron.adapters.local_launcher import LocalLauncher
from tests.support.aws import agent_compute

SECRET = "s3cret-" + "x" * 40
#: The "agent": records the root it was given and lists what it can see there, then exits.
RECORD = (
    "import json, os, sys; root = os.environ['SQUADRON_AGENTS_ROOT']; "
    "open(os.path.join(sys.argv[1], os.environ['SQUADRON_AGENT_ID'] + '.json'), 'w')"
    ".write(json.dumps({'root': root, 'sees': sorted(os.listdir(root))}))"
)


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
        (tmp_path / "seen").mkdir()
        local = LocalLauncher(
            ecs=ecs,
            env={"PATH": "/usr/bin:/bin", "SQUADRON_AGENTS_ROOT": str(tmp_path / "agents")},
            log_dir=tmp_path / "logs",
            command=[sys.executable, "-c", RECORD, str(tmp_path / "seen")],
            agents_root=tmp_path / "agents",
        )
        yield local
        local.shutdown()


def _seen(launcher: LocalLauncher, tmp_path: Path, agent_id: str) -> dict[str, object]:
    """What the agent's process recorded, once it exited."""
    (process,) = [p for p in launcher.processes.values() if launcher._agent_of.get(p.pid) == agent_id]
    assert process.wait(timeout=30) == 0
    seen: dict[str, object] = json.loads((tmp_path / "seen" / f"{agent_id}.json").read_text())
    return seen


def test_each_repositorys_tasks_get_their_own_root(launcher: LocalLauncher, tmp_path: Path) -> None:
    other = launcher.repo_root(2)
    other.mkdir(parents=True)
    (other / "2-7-feat-dev").mkdir()  # another repository's agent's state

    launcher.launch("1-7-feat-dev", "start", "1-7-feat-dev-g1-l1", SECRET)
    mine = _seen(launcher, tmp_path, "1-7-feat-dev")

    assert mine["root"] == str(tmp_path / "agents" / "repos" / "1")
    assert mine["sees"] == []  # nothing of repository 2 under its root
    launcher.launch("2-7-feat-dev", "start", "2-7-feat-dev-g1-l1", SECRET)
    assert _seen(launcher, tmp_path, "2-7-feat-dev") == {"root": str(other), "sees": ["2-7-feat-dev"]}
    for root in (launcher.repo_root(1), launcher.repo_root(1).parent):
        assert stat.S_IMODE(root.stat().st_mode) == 0o711  # passable, never listable, as on EFS
