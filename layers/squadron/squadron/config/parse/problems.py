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
    for error in exc.errors(include_url=False):
        path = _data_path(error["loc"], data)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            allowed = _fields_at(model, path[:-1])
            message = f"unknown key {path[-1]!r}" + _did_you_mean(str(path[-1]), allowed)
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] != "value_error" and isinstance(error.get("input"), str | int | float | bool):
            message += f" (got {error['input']!r})"
        problems.append(Problem(file, lines.line_of(path), dotted(path), message))
    return problems


def _data_path(loc: Sequence[str | int], data: Any) -> KeyPath:
    """The key path in the YAML data of a pydantic ``loc`` (union tags and ``[key]`` dropped)."""
    path: list[str | int] = []
    current = data
    for part in loc:
        if _has_child(current, part):
            path.append(part)
            current = current[part]
        elif not _is_pydantic_marker(part, current):
            path.append(part)
            current = None
    return tuple(path)


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
    return part.startswith(("function-", "tagged-union["))


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


def _did_you_mean(value: str, choices: Iterable[str]) -> str:
    names = [name for name in choices if len(name) <= _SUGGEST_LENGTH]
    if len(value) > _SUGGEST_LENGTH or len(names) > _SUGGEST_AMONG:
        return ""
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""
