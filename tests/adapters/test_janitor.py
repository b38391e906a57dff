"""The janitor on a real directory tree: finished agents' directories leave the agents' root, and
nothing else ever does.

The attacker here planted links and odd entries where an agent's directory or clone belongs, or
names a path instead of an agent; what is asserted is what is left on disk, inside the root and
outside it. The pass itself runs against the agent gateway on DynamoDB (moto).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from moto import mock_aws

from squadron.adapters import confinement
from squadron.adapters.confinement import AgentDirs, ConfinementError
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.sqs import SqsEventQueue
from squadron.agent.door import Door
from squadron.agent.janitor import Sweep, sweep
from squadron.domain.agents import AgentStatus
from squadron.shell.gateway import AgentGateway
from squadron.shell.router import RouterService
from tests.support.aws import registry_and_queue
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher
from tests.support.gateway import door_of, gateway_for
from tests.support.github_fake import FakeGitHub
from tests.support.router_stack import router_over

A38 = "1-38-feat-dev"


@dataclass(frozen=True)
class Volume:
    """An agents' root with one finished agent's state, and a place outside it worth protecting."""

    root: Path
    outside: Path

    @property
    def dirs(self) -> AgentDirs:
        return AgentDirs(self.root, A38)

    def left_outside(self) -> list[str]:
        return sorted(str(p.relative_to(self.outside)) for p in self.outside.rglob("*"))

    def trash(self) -> list[str]:
        trash = self.root / confinement.TRASH
        return sorted(p.name for p in trash.iterdir()) if trash.exists() else []


def _state(dirs: AgentDirs, outside: Path) -> None:
    """An agent's working copy, session and home, the framework's clone, and links out of them."""
    for path in (dirs.work / "src", dirs.copilot_home / "session-state", dirs.home, dirs.framework_clone):
        path.mkdir(parents=True)
    (dirs.work / "src" / "app.py").write_text("print('work in progress')\n")
    (dirs.copilot_home / "session-state" / "events.jsonl").write_text("{}\n")
    (dirs.framework_clone / "HEAD").write_text("ref: refs/heads/main\n")
    (dirs.work / "escape").symlink_to(outside)  # the agent's own links: removed, never followed
    (dirs.home / "passwd").symlink_to(outside / "secret.txt")


@pytest.fixture
def volume(tmp_path: Path) -> Volume:
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "secret.txt").write_text("not the janitor's\n")
    (outside / "keep" / "data").write_text("precious\n")
    root = tmp_path / "volume"
    _state(AgentDirs(root, A38), outside)
    return Volume(root, outside)


OUTSIDE = ["keep", "keep/data", "secret.txt"]


def _link_agent_dir(v: Volume) -> None:
    os.rename(v.dirs.agent, v.root / "moved")
    v.dirs.agent.symlink_to(v.outside)


def _link_clone(v: Volume) -> None:
    os.rename(v.dirs.framework_clone, v.root / "moved.git")
    v.dirs.framework_clone.symlink_to(v.outside / "keep")


def _file_in_place(v: Volume) -> None:
    os.rename(v.dirs.agent, v.root / "moved")
    v.dirs.agent.write_text("not a directory\n")


def _link_agents_root(v: Volume) -> None:
    os.rename(v.root / "agents", v.outside / "agents")
    (v.root / "agents").symlink_to(v.outside / "agents")


def _link_trash(v: Volume) -> None:
    (v.root / confinement.TRASH).symlink_to(v.outside / "keep")


def _gone(v: Volume) -> None:
    os.rename(v.dirs.agent, v.outside / "gone-agent")
    os.rename(v.dirs.framework_clone, v.outside / "gone-clone")


Setup = Callable[[Volume], None]
# (case, setup, agent id asked for, refusal or None, what moved)
RETIRE: list[tuple[str, Setup | None, str, str | None, tuple[str, ...]]] = [
    (
        "a finished agent's directory and clone",
        None,
        A38,
        None,
        (f"agents/{A38}", f"framework/{A38}.git"),
    ),
    ("gone already", _gone, A38, None, ()),
    ("its directory is a link out of the root", _link_agent_dir, A38, "is a link or not a directory", ()),
    ("its clone is a link out of the root", _link_clone, A38, "is a link or not a directory", ()),
    ("a file where its directory belongs", _file_in_place, A38, "is a link or not a directory", ()),
    ("the agents' directory is a link out of the root", _link_agents_root, A38, "is a link", ()),
    ("the trash is a link out of the root", _link_trash, A38, "is a link", ()),
    ("'..' for an agent", None, "..", "not an agent's directory", ()),
    ("a path up and out for an agent", None, f"{A38}/../../../outside", "not an agent's directory", ()),
    ("an absolute path for an agent", None, "/etc", "not an agent's directory", ()),
    ("an empty name", None, "", "not an agent's directory", ()),
]


@pytest.mark.parametrize(
    ("setup", "agent_id", "refusal", "moved"), [c[1:] for c in RETIRE], ids=[c[0] for c in RETIRE]
)
def test_only_an_agents_own_directories_leave_the_root(
    volume: Volume, setup: Setup | None, agent_id: str, refusal: str | None, moved: tuple[str, ...]
) -> None:
    if setup is not None:
        setup(volume)
    outside_before = volume.left_outside()
    root_before = sorted(str(p.relative_to(volume.root)) for p in volume.root.rglob("*"))
    if refusal is not None:
        with pytest.raises(ConfinementError, match=refusal):
            confinement.retire(volume.root, agent_id)
        after = sorted(str(p.relative_to(volume.root)) for p in volume.root.rglob("*"))
        assert after == root_before  # left as found: nothing moved, no trash made
    else:
        assert confinement.retire(volume.root, agent_id) == moved
        assert not os.path.lexists(volume.dirs.agent) and not os.path.lexists(volume.dirs.framework_clone)
        assert len(volume.trash()) == len(moved)
        assert confinement.empty_trash(volume.root) == len(moved)
        assert volume.trash() == []
        assert (volume.root / "agents").is_dir() and (volume.root / "framework").is_dir()  # the layout stays
    assert volume.left_outside() == outside_before  # nothing outside the root was touched
    assert (volume.outside / "keep" / "data").read_text() == "precious\n"


def test_a_root_reached_through_a_link_is_resolved_first(volume: Volume, tmp_path: Path) -> None:
    mounted = tmp_path / "mnt-agents"
    mounted.symlink_to(volume.root)  # SQUADRON_AGENTS_ROOT may name the volume through a link
    assert confinement.retire(mounted, A38) == (f"agents/{A38}", f"framework/{A38}.git")
    assert confinement.empty_trash(mounted) == 2
    assert volume.left_outside() == OUTSIDE


def test_emptying_the_trash_removes_links_and_never_what_they_point_to(volume: Volume) -> None:
    trash = volume.root / confinement.TRASH
    trash.mkdir(mode=0o700)
    (trash / "left-by-a-pass-that-died").symlink_to(volume.outside)
    (trash / "a-file").write_text("x")
    nested = trash / f"{A38}.abcd1234" / "deep" / "deeper"
    nested.mkdir(parents=True)
    (nested / "to-keep").symlink_to(volume.outside / "keep")
    assert confinement.empty_trash(volume.root) == 3
    assert volume.trash() == [] and volume.left_outside() == OUTSIDE


def test_no_trash_and_no_root_are_nothing_to_do(tmp_path: Path) -> None:
    assert confinement.empty_trash(tmp_path / "nowhere") == 0
    assert confinement.retire(tmp_path / "nowhere", A38) == ()
    assert confinement.empty_trash(tmp_path) == 0


# --- the pass, through the gateway ----------------------------------------------------------------


@dataclass
class World:
    registry: DynamoRegistry
    router: RouterService
    launcher: FakeLauncher
    gateway: AgentGateway
    events: Events
    clock: list[datetime]

    def door(self, agent_id: str) -> Door:
        record = self.registry.get_agent(agent_id)
        assert record is not None
        return door_of(self.gateway, self.launcher, record)


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        clock = [T0]
        launcher = FakeLauncher()
        gateway = gateway_for(registry, SqsEventQueue(url, client=sqs), FakeGitHub(), clock=lambda: clock[0])
        router = router_over(registry, launcher, clock=lambda: clock[0])
        yield World(registry, router, launcher, gateway, Events(), clock)


def test_a_pass_moves_what_is_due_reports_what_is_gone_and_leaves_the_unsafe_as_found(
    world: World, volume: Volume
) -> None:
    for number in (38, 39, 40):  # 38 has state on the volume, 39 never ran here, 40's is a link
        world.router.process(world.events.assigned(number))
        world.router.process(world.events.unassigned(number))
    (volume.root / "agents" / "1-40-feat-dev").symlink_to(volume.outside / "keep")
    world.clock[0] = T0 + timedelta(days=8)
    world.router.process(world.events.assigned(50))
    door = world.door("1-50-feat-dev")
    door.begin()
    swept = sweep(door, volume.root)
    assert swept == Sweep(
        claimed=("1-38-feat-dev", "1-39-feat-dev", "1-40-feat-dev"),
        removed=("1-38-feat-dev", "1-39-feat-dev"),
        refused=("1-40-feat-dev",),
        recorded=("1-38-feat-dev", "1-39-feat-dev"),
    )
    for agent_id, purged in (("1-38-feat-dev", True), ("1-39-feat-dev", True), ("1-40-feat-dev", False)):
        record = world.registry.get_agent(agent_id)
        assert record is not None and record.status is AgentStatus.CANCELLED
        assert (record.purged_at is not None) is purged
    assert not os.path.lexists(volume.dirs.agent) and not os.path.lexists(volume.dirs.framework_clone)
    assert (volume.root / "agents" / "1-40-feat-dev").is_symlink()  # left as found
    assert confinement.empty_trash(volume.root) == 2
    assert volume.left_outside() == OUTSIDE
    # The refused one's claim lapses; a later pass meets it again, and nothing else.
    world.clock[0] += timedelta(minutes=6)
    assert door.purge_claim() == ["1-40-feat-dev"]
