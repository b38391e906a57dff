"""What is valid of a file with schema problems, so its cross-references are checked in the same pass.

A file whose model refuses it is reported problem by problem (:mod:`.problems`); without more,
its references (a role's agent definition, a label's role, a human group) would go unchecked
until the schema problems are fixed, and ``squadron validate`` would tell the rest one fix later.
:func:`salvage` removes what each error points at from a copy of the data, a few rounds, and
validates again: the model it gets checks the references of everything that was valid, and
the problems of references at a removed path are left out (the schema's told them).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from squadron.config.parse.problems import key_path_of
from squadron.config.yamlsource import KeyPath

ModelT = TypeVar("ModelT", bound=BaseModel)

#: Rounds of removal at most (a removed field that was required is one more round, up the tree).
MAX_ROUNDS = 6


def salvage(model: type[ModelT], data: Any) -> tuple[ModelT | None, list[KeyPath]]:
    """``model`` from what of ``data`` is valid, and the key paths removed to get it (None: nothing
    of it validates, not even with the offending parts removed)."""
    if not isinstance(data, dict):
        return None, []
    kept = copy.deepcopy(data)
    removed: list[KeyPath] = []
    for _ in range(MAX_ROUNDS):
        try:
            return model.model_validate(kept), removed
        except ValidationError as exc:
            progressed = False
            for error in exc.errors(include_url=False):
                path = _removable(kept, key_path_of(error["loc"], kept))
                if path and _remove(kept, path):
                    removed.append(path)
                    progressed = True
            if not progressed:
                return None, removed
    return None, removed


def _removable(data: Any, path: KeyPath) -> KeyPath:
    """The longest prefix of ``path`` the data holds (a missing key: its parent, which is then
    removed whole)."""
    current = data
    for depth, part in enumerate(path):
        if isinstance(current, dict) and part in current:  # noqa: SIM114 (mypy narrows each)
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            return path[:depth]
    if current is None and len(path) > 1 and isinstance(_at(data, path[:-1]), list):
        return path[:-1]  # an item removed already (None) that the list refuses: the whole list
    return path


def _at(data: Any, path: KeyPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _remove(data: Any, path: KeyPath) -> bool:
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        parent[last] = None  # keeps the other items' indexes (their paths) as the file has them
        return True
    return False
