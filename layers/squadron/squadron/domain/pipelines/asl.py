"""Amazon States Language pieces the pipeline compiler builds with — pure: the names of the
states a run ends through, how a stage's id becomes a key of the run's state, Choice rules that
never fail on a missing key, and what is reachable (Step Functions refuses a definition with a
state nothing reaches)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Step Functions' longest state name.
MAX_STATE_NAME = 80
#: What a timed-out task raises: ``States.Timeout`` (moto raises it for a missed heartbeat too)
#: and ``States.HeartbeatTimeout``.
TIMEOUT_ERRORS = ["States.Timeout", "States.HeartbeatTimeout"]
#: Where a stage's task reads its input from.
INPUT = "$.data"

COMPLETE = "__complete__"
SUCCEEDED = "__succeeded__"
ESCALATE = "__escalate__"
ESCALATED = "__escalated__"
FAIL = "__fail__"
FAILED = "__failed__"
CANCEL = "__cancel__"
START = "__start__"
CONTEXT = "__context__"
#: A run that may be restarted part-way: ``__start__`` is a Choice between these and ``__fresh__``.
FRESH = "__fresh__"
RESTART = "__restart__"
RESTART_FROM = "__restart_from__"


def state_key(stage_id: str) -> str:
    """A stage id as a key of ``$.data.stages`` (a JSONPath name: ``_`` becomes ``_0``, ``-``
    becomes ``_1``, so two ids never meet): ``code-review`` is ``code_1review``."""
    return stage_id.replace("_", "_0").replace("-", "_1")


def stage_of_key(key: str) -> str:
    """The stage id :func:`state_key` made ``key`` of."""
    out: list[str] = []
    escaped = False
    for char in key:
        if escaped:
            out.append("_" if char == "0" else "-")
            escaped = False
        elif char == "_":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def dump(model: Any) -> dict[str, Any]:
    value: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def is_set(path: str, *, value: bool = True) -> dict[str, Any]:
    """A Choice rule: ``path`` is there and is ``value`` (a missing key is false, never an error)."""
    return {"And": [{"Variable": path, "IsPresent": True}, {"Variable": path, "BooleanEquals": value}]}


def reachable(start: str, states: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The states reachable from ``start`` (Step Functions refuses a definition with others), in
    the order they were built."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(targets(states[name]))
    return {name: state for name, state in states.items() if name in seen}


def targets(state: dict[str, Any]) -> list[str]:
    found = [state[key] for key in ("Next", "Default") if key in state]
    found += [choice["Next"] for choice in state.get("Choices", [])]
    found += [catch["Next"] for catch in state.get("Catch", [])]
    return found


def task_states(definition: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A compiled definition's task states, by name, inside ``Parallel`` branches too."""
    found: dict[str, dict[str, Any]] = {}

    def visit(scope: Mapping[str, Any]) -> None:
        for name, state in scope["States"].items():
            if state["Type"] == "Task":
                found[name] = state
            for branch in state.get("Branches", []):
                visit(branch)

    visit(definition)
    return found
