"""YAML with line numbers: every key and list item remembers where it was written.

:func:`load_yaml` composes the node tree (``yaml.compose``-style, safe
constructors only) and builds plain Python data next to a :class:`LineMap`, so a
pydantic error at ``roles.feat-dev.lifecycle`` can be reported at the line the
user wrote it on. Duplicate keys, which YAML silently resolves to the last one,
are problems here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from squadron.config.errors import Problem

KeyPath = tuple[str | int, ...]


@dataclass
class LineMap:
    """Line (1-based) of each key path of one YAML document, offset to the enclosing file."""

    lines: dict[KeyPath, int] = field(default_factory=dict)
    offset: int = 0

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of ``path``, or of its nearest ancestor that the file spells out."""
        parts = tuple(path)
        while parts:
            line = self.lines.get(parts)
            if line is not None:
                return line + self.offset
            parts = parts[:-1]
        line = self.lines.get(())
        return None if line is None else line + self.offset


@dataclass(frozen=True)
class YamlDocument:
    data: Any
    lines: LineMap


class YamlProblems(Exception):
    """Internal: the problems of one YAML document (never escapes the package)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(problems)


def load_yaml(text: str, file: str, *, line_offset: int = 0) -> YamlDocument:
    """Parse one YAML document; raise :class:`YamlProblems` on syntax errors or duplicate keys."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        problems: list[Problem] = []
        lines = LineMap(offset=line_offset)
        data = (
            None
            if node is None
            else _build(loader, node, (), lines=lines, problems=problems, file=file, offset=line_offset)
        )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1 + line_offset
        message = " ".join(part for part in (exc.context, exc.problem) if part)
        raise YamlProblems([Problem(file, line, "", f"YAML syntax error: {message}")]) from exc
    except yaml.YAMLError as exc:
        raise YamlProblems([Problem(file, None, "", f"YAML error: {exc}")]) from exc
    finally:
        loader.dispose()
    if problems:
        raise YamlProblems(problems)
    return YamlDocument(data, lines)


def _build(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    path: KeyPath,
    *,
    lines: LineMap,
    problems: list[Problem],
    file: str,
    offset: int,
) -> Any:
    lines.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                problems.append(
                    Problem(
                        file, key_node.start_mark.line + 1 + offset, _dotted(path), "keys must be scalars"
                    )
                )
                continue
            key = str(key) if not isinstance(key, str) else key
            child = (*path, key)
            if key in result:
                problems.append(
                    Problem(
                        file,
                        key_node.start_mark.line + 1 + offset,
                        _dotted(child),
                        f"duplicate key (first written on line {lines.lines[child] + offset})",
                    )
                )
                continue
            lines.lines[child] = key_node.start_mark.line + 1
            result[key] = _build(
                loader, value_node, child, lines=lines, problems=problems, file=file, offset=offset
            )
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _build(loader, item, (*path, index), lines=lines, problems=problems, file=file, offset=offset)
            for index, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in path)


dotted = _dotted
