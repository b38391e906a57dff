"""AD-005 in the router: a PR conflict goes to its dev agent first, then to a human."""

from __future__ import annotations

from datetime import UTC, datetime

from squadron.domain.commands import ReportConflict
from squadron.domain.events import command_envelope
from tests.support.world import World

A38 = "1-38-feat-dev"


def conflict(world: World, sha: str = "c" * 40, n: int = 1) -> list[str]:
    command = ReportConflict(issue_number=38, pr_number=101, head_sha=sha, base="main")
    envelope = command_envelope(
        command,
        repository={"id": 1, "full_name": "octo/repo"},
        installation_id=77,
        delivery_id=f"conflict-{n}",
        now=datetime(2026, 11, 22, 13, tzinfo=UTC),
    )
    return world.say(envelope)


def test_a_working_agent_hears_of_the_conflict_without_a_second_task() -> None:
    world = World()
    world.send(world.events.assigned(38))
    assert conflict(world) == [f"inbox {A38} merge_conflict", f"put {A38} CREATED (v3)"]
    assert conflict(world, n=2) == ["discard"]  # same head, still working on it
    assert len(world.launcher.tasks_for(A38)) == 1


def test_a_new_head_that_still_conflicts_is_a_new_round_for_the_agent() -> None:
    world = World()
    world.send(world.events.assigned(38))
    conflict(world)
    assert conflict(world, sha="d" * 40, n=2)[0] == f"inbox {A38} merge_conflict"
    assert world.agent(A38).last_conflict == "d" * 40


def test_no_agent_no_conflict_handling() -> None:
    assert conflict(World()) == ["discard"]
