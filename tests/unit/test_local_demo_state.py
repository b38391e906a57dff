"""The demo's own state directory: emptied before each run, never while a demo uses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from squadron.local.demo import DemoRunningError, fresh_state


def test_each_demo_starts_from_nothing_beside_the_stacks_own_state(tmp_path: Path) -> None:
    own = tmp_path / "saved" / "aws.json"
    own.parent.mkdir()
    own.write_text("the user's registry")
    first = fresh_state(tmp_path, running=lambda _dir: False)
    assert first == tmp_path / "demo" and list(first.iterdir()) == []
    (first / "saved").mkdir()
    (first / "saved" / "github.json").write_text("the first demo's issues")
    again = fresh_state(tmp_path, running=lambda _dir: False)
    assert again == first and list(again.iterdir()) == []
    assert own.read_text() == "the user's registry"


def test_a_demo_still_running_is_not_pulled_from_under_it(tmp_path: Path) -> None:
    running = fresh_state(tmp_path, running=lambda _dir: False)
    (running / "endpoints.json").write_text("{}")
    with pytest.raises(DemoRunningError, match=f"a demo is still running with state in {running}"):
        fresh_state(tmp_path, running=lambda directory: directory == running)
    assert (running / "endpoints.json").exists()
