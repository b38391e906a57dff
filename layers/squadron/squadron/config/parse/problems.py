"""Validation errors with lines: one :class:`Problem` per pydantic error, where the key was written.

Unknown keys and names come with a "did you mean" suggestion when one is close.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from squadron.config.yamlsource import KeyPath, LineMap, dotted
from squadron.domain.repo_config.errors import Problem


def validation_problems(
    exc: ValidationError, file: str, data: Any, lines: LineMap, model: type[BaseModel]
) -> list[Problem]:
    """One :class:`Problem` per pydantic error, at the line the offending key was written on."""
    problems = []
    errors = [(error, key_path_of(error["loc"], data)) for error in exc.errors(include_url=False)]
    for error, data_path in errors:
        path = data_path
        if _union_miss(error, path, errors):
            continue
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            key = str(error.get("ctx", {}).get("discriminator", "")).strip("'")
            message = _tag_message(error, key)
            if key and isinstance(_at(data, path), dict):
                path = (*path, key)
        elif error["type"] == "extra_forbidden":
            allowed = _fields_at(model, path[:-1])
            message = f"unknown key {path[-1]!r}" + did_you_mean(str(path[-1]), allowed)
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] != "value_error" and isinstance(error.get("input"), str | int | float | bool):
            message += f" (got {error['input']!r})"
        problems.append(Problem(file, lines.line_of(path), dotted(path), message))
    return problems


#: Errors of a union member whose type the input is not (a string where a mapping was given).
_TYPE_MISMATCH = frozenset(
    {"string_type", "model_type", "model_attributes_type", "dict_type", "int_type", "list_type"}
)


def _union_miss(error: Any, path: KeyPath, errors: list[tuple[Any, KeyPath]]) -> bool:
    """Whether ``error`` only says the input is not of one member of a union whose other member
    says what is wrong (``on_fail: {goto: x, max_iterations: 99}`` is no string: beside the point)."""
    if error["type"] not in _TYPE_MISMATCH:
        return False
    return any(
        other["type"] not in _TYPE_MISMATCH and other_path[: len(path)] == path and other is not error
        for other, other_path in errors
    )


#: Keys whose value picks the model of a mapping (a tagged union): a stage's ``type``, a gate
#: condition's ``check``, an action's or a reactive handler's ``action``.
_TAG_KEYS = ("type", "check", "action")


def _tag_message(error: Any, key: str) -> str:
    if error["type"] == "union_tag_not_found":
        return f"required key {key!r} is missing"
    tag = str(error["ctx"]["tag"])
    expected = [name.strip().strip("'") for name in str(error["ctx"]["expected_tags"]).split(",")]
    return f"unknown {key} {tag!r}{did_you_mean(tag, expected)}: one of {', '.join(expected)}"


def _at(data: Any, path: KeyPath) -> Any:
    for part in path:
        if not _has_child(data, part):
            return None
        data = data[part]
    return data


def key_path_of(loc: Sequence[str | int], data: Any) -> KeyPath:
    """The key path in the YAML data of a pydantic ``loc`` (union tags and ``[key]`` dropped).

    A tagged union puts its tag in ``loc`` (``stages.0.agent.timeout``: ``agent`` is the
    stage's type); a tag is the value of one of :data:`_TAG_KEYS` of the mapping it is at, and
    each such key tags once (an agent stage's ``agent`` key is its role, not its type again).
    """
    path: list[str | int] = []
    current = data
    tags_used: set[str] = set()
    for index, part in enumerate(loc):
        tag = _tag_key(current, part, tags_used)
        if tag is not None:
            tags_used.add(tag)
            continue
        if isinstance(current, dict) and index + 1 < len(loc) and loc[index + 1] == part and part in current:
            continue  # a union tagged by its one key (a condition's any:, all:...), then that key
        if _has_child(current, part):
            tags_used = set()
            path.append(part)
            current = current[part]
        elif not _is_pydantic_marker(part, current):
            path.append(part)
            current = None
    return tuple(path)


def _tag_key(current: Any, part: str | int, used: set[str]) -> str | None:
    if not isinstance(current, dict) or not isinstance(part, str):
        return None
    return next((key for key in _TAG_KEYS if key not in used and current.get(key) == part), None)


def _has_child(current: Any, part: str | int) -> bool:
    if isinstance(current, dict):
        return part in current
    return isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)


def _is_pydantic_marker(part: str | int, current: Any) -> bool:
    """A ``loc`` element naming no key of the data: a dict key check, a union tag, a validator."""
    if not isinstance(part, str):
        return False
    if part == "[key]" or (isinstance(current, dict) and current.get("type") == part):
        return True
    if part[:1].isupper() or (part == "template" and isinstance(current, str)):
        return True  # a union's member model (Goto, OnFail), or a condition written as a template
    return part.startswith(("function-", "tagged-union[", "literal[", "list[", "dict[")) or part in _SCALARS


_SCALARS = frozenset({"str", "int", "float", "bool", "none"})


def _fields_at(model: type[BaseModel], path: KeyPath) -> list[str]:
    """Field names of the model found at ``path`` below ``model`` (for typo suggestions)."""
    annotations: list[Any] = [model]
    for part in path:
        next_annotations: list[Any] = []
        for annotation in annotations:
            for candidate in _unwrap(annotation):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    field = candidate.model_fields.get(str(part))
                    if field is not None:
                        next_annotations.append(field.annotation)
                elif typing.get_origin(candidate) in (dict, list):
                    next_annotations.append(typing.get_args(candidate)[-1])
        annotations = next_annotations
    names: list[str] = []
    for annotation in annotations:
        for candidate in _unwrap(annotation):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                names.extend(candidate.model_fields)
    return names


def _unwrap(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [item for arg in typing.get_args(annotation) for item in _unwrap(arg)]
    return [annotation]


#: Suggestions are looked for among at most this many names of at most this length: difflib is
#: quadratic in a name's length, and a hostile file may be full of long names.
_SUGGEST_AMONG = 200
_SUGGEST_LENGTH = 64


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    names = [name for name in choices if len(name) <= _SUGGEST_LENGTH]
    if len(value) > _SUGGEST_LENGTH or len(names) > _SUGGEST_AMONG:
        return ""
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""
