"""The router's dispatch is a table of record kinds: a record that is no event envelope reaches
the handler its ``kind`` names, and nothing else; everything else is parsed as an envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest

from squadron.shell.dispatch import Dispatcher, InvalidRecordError, record_kind
from tests.support.world import World

KIND = "squadron.example_task"


def _dispatcher(world: World, seen: list[tuple[str, str | None]]) -> Dispatcher:
    def handle(body: str, message_id: str | None) -> dict[str, Any]:
        seen.append((body, message_id))
        return {"kind": KIND}

    return Dispatcher(world.router, kinds={KIND: handle})


def test_a_record_of_a_registered_kind_goes_to_its_handler_and_is_not_routed() -> None:
    world = World()
    seen: list[tuple[str, str | None]] = []
    body = json.dumps({"kind": KIND, "token": "t"})
    assert _dispatcher(world, seen).handle(body, "m-1") == {"kind": KIND}
    assert seen == [(body, "m-1")]
    assert world.registry.agents == {} and world.launcher.launched == {}


def test_an_envelope_is_routed_as_before_with_a_table() -> None:
    world = World()
    seen: list[tuple[str, str | None]] = []
    summary = _dispatcher(world, seen).handle(world.events.assigned(38).to_message())
    assert seen == []
    assert summary["launches"] == ["start"] and not summary["duplicate"]


@pytest.mark.parametrize(
    "body",
    [json.dumps({"kind": "squadron.unknown"}), json.dumps({"kind": 7}), "not json", json.dumps([KIND])],
    ids=["an unknown kind", "a kind that is no string", "no JSON", "a list"],
)
def test_anything_else_must_be_a_valid_envelope(body: str) -> None:
    world = World()
    seen: list[tuple[str, str | None]] = []
    with pytest.raises(InvalidRecordError):
        _dispatcher(world, seen).handle(body, "m-1")
    assert seen == []


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ('{"kind": "a"}', "a"),
        ('{"event": "issues"}', None),
        ("[]", None),
        ("{", None),
        ('{"kind": null}', None),
    ],
)
def test_record_kind(body: str, kind: str | None) -> None:
    assert record_kind(body) == kind
