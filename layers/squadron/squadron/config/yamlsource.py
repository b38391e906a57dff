"""YAML with line numbers and hard bounds: every key and list item remembers where it was written.

:func:`load_yaml` composes the node tree (``yaml.compose``-style, safe
constructors only) and builds plain Python data next to a :class:`LineMap`, so a
pydantic error at ``roles.feat-dev.lifecycle`` can be reported at the line the
user wrote it on. Duplicate keys, which YAML silently resolves to the last one,
are problems here.

Configuration files come from strangers' repositories, so the parse is bounded
(:mod:`squadron.domain.repo_config.limits`): nesting depth and alias count while composing,
values built while expanding aliases (a "billion laughs" document stops at
:data:`~squadron.domain.repo_config.limits.MAX_YAML_NODES`), and only plain YAML — mappings,
lists, strings, numbers, booleans, null, timestamps — with any other tag
(``!!python/object``, ``!!binary``, ``!custom``) refused by name. Events come
from libyaml when PyYAML has it (several times faster than the pure-Python
parser, which is the fallback); composing and every bound are in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from squadron.domain.repo_config.errors import Problem
from squadron.domain.repo_config.limits import MAX_YAML_ALIASES, MAX_YAML_DEPTH, MAX_YAML_NODES

KeyPath = tuple[str | int, ...]

_CORE = "tag:yaml.org,2002:"
#: The tags plain YAML resolves to; any other (explicit) tag is refused.
_SCALAR_TAGS = frozenset(f"{_CORE}{name}" for name in ("str", "int", "float", "bool", "null", "timestamp"))
_MAP_TAG = f"{_CORE}map"
_SEQ_TAG = f"{_CORE}seq"
_MERGE_TAG = f"{_CORE}merge"


@dataclass
class LineMap:
    """Line (1-based) of each key path of one YAML document, offset to the enclosing file."""

    lines: dict[KeyPath, int] = field(default_factory=dict)
    offset: int = 0
    #: Column (1-based) of each key path: where its key (or list item) starts.
    columns: dict[KeyPath, int] = field(default_factory=dict)

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

    def column_of(self, path: Sequence[str | int]) -> int | None:
        """The column of ``path``, or of the ancestor :meth:`line_of` falls back to."""
        parts = tuple(path)
        while parts:
            if parts in self.lines:
                return self.columns.get(parts)
            parts = parts[:-1]
        return self.columns.get(())


@dataclass(frozen=True)
class YamlDocument:
    data: Any
    lines: LineMap


class YamlProblems(Exception):
    """Internal: the problems of one YAML document (never escapes the package)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(problems)


class _Bound(Exception):
    """Internal: a limit was passed at ``line`` (1-based in the document, or None)."""

    def __init__(self, line: int | None, message: str, key_path: KeyPath = ()) -> None:
        self.line = line
        self.message = message
        self.key_path = key_path
        super().__init__(message)


def _line(node_or_event: Any) -> int | None:
    mark = getattr(node_or_event, "start_mark", None)
    return None if mark is None else int(mark.line) + 1


class _BoundedComposer(Composer):
    """Python's composer with a depth, alias and node count (the node tree stays bounded)."""

    if TYPE_CHECKING:  # given by the parser this is mixed with (libyaml's, or Python's)

        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...

    def _reset_bounds(self) -> None:
        self.depth = 0
        self.aliases = 0
        self.composed = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise _Bound(
                    _line(self.peek_event()),
                    f"more than {MAX_YAML_ALIASES} aliases (*name) in one file (MAX_YAML_ALIASES)",
                )
            return super().compose_node(parent, index)
        self.composed += 1
        if self.composed > MAX_YAML_NODES:
            raise _Bound(
                _line(self.peek_event()),
                f"more than {MAX_YAML_NODES} values in one file (MAX_YAML_NODES)",
            )
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise _Bound(
                    _line(self.peek_event()),
                    f"nested more than {MAX_YAML_DEPTH} levels deep (MAX_YAML_DEPTH)",
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


try:  # libyaml's events, Python's composer (the bounds above) and safe constructors
    from yaml._yaml import CParser

    class _Loader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
            self._reset_bounds()

except ImportError:  # pragma: no cover (PyYAML built without libyaml)

    class _Loader(Reader, Scanner, Parser, _BoundedComposer, SafeConstructor, Resolver):  # type: ignore[no-redef]
        def __init__(self, text: str) -> None:
            Reader.__init__(self, text)
            Scanner.__init__(self)
            Parser.__init__(self)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._reset_bounds()


def load_yaml(text: str, file: str, *, line_offset: int = 0) -> YamlDocument:
    """Parse one YAML document; raise :class:`YamlProblems` on syntax errors, duplicate keys,
    refused tags or a passed limit (each a problem at its line)."""
    loader = _Loader(text)
    problems: list[Problem] = []
    lines = LineMap(offset=line_offset)
    try:
        node = loader.get_single_node()
        builder = _Builder(loader, lines=lines, problems=problems, file=file, offset=line_offset)
        data = None if node is None else builder.build(node, (), 1)
    except _Bound as exc:
        line = None if exc.line is None else exc.line + line_offset
        raise YamlProblems([Problem(file, line, dotted(exc.key_path), exc.message)]) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        tab = _indenting_tab(text, mark.line if mark is not None else None)
        if tab is not None:
            raise YamlProblems(
                [Problem(file, tab[0] + 1 + line_offset, "", TAB_PROBLEM, column=tab[1] + 1)]
            ) from exc
        line = None if mark is None else mark.line + 1 + line_offset
        column = None if mark is None else mark.column + 1
        message = " ".join(part for part in (exc.context, exc.problem) if part)
        raise YamlProblems([Problem(file, line, "", f"YAML syntax error: {message}", column=column)]) from exc
    except yaml.YAMLError as exc:
        raise YamlProblems([Problem(file, None, "", f"YAML error: {_one_line(exc)}")]) from exc
    except (ValueError, UnicodeError) as exc:  # text libyaml cannot take (e.g. a lone surrogate)
        raise YamlProblems([Problem(file, None, "", f"not YAML text: {_one_line(exc)}")]) from exc
    finally:
        loader.dispose()
    if problems:
        raise YamlProblems(problems)
    return YamlDocument(data, lines)


#: What a tab that indents a line is told (YAML indents with spaces only).
TAB_PROBLEM = "a tab indents this line: YAML indents with spaces only; replace the tab with spaces"


def _indenting_tab(text: str, error_line: int | None) -> tuple[int, int] | None:
    """(line, column), 0-based, of the tab in a line's indentation that a syntax error at
    ``error_line`` (0-based) comes from: on that line, or the nearest line before it (a tab can
    make the parser fail a line later); None when no such tab is there."""
    if error_line is None:
        return None
    lines = text.split("\n")
    for number in range(min(error_line, len(lines) - 1), max(error_line - 2, -1), -1):
        line = lines[number]
        indentation = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indentation and line.strip():
            return number, indentation.index("\t")
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _shown_tag(tag: str) -> str:
    shown = "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag
    return shown if len(shown) <= 80 else shown[:79] + "…"


class _Builder:
    """Plain data from the node tree, every alias expanded — counted against MAX_YAML_NODES."""

    def __init__(
        self, loader: _Loader, *, lines: LineMap, problems: list[Problem], file: str, offset: int
    ) -> None:
        self.loader = loader
        self.lines = lines
        self.problems = problems
        self.file = file
        self.offset = offset
        self.built = 0

    def _problem(self, node: Node, path: KeyPath, message: str) -> None:
        self.problems.append(
            Problem(self.file, node.start_mark.line + 1 + self.offset, dotted(path), message)
        )

    def build(self, node: Node, path: KeyPath, depth: int) -> Any:
        self.built += 1
        if self.built > MAX_YAML_NODES:
            # At the top-level key whose value expands (the node itself may sit anywhere).
            top = self.lines.lines.get(path[:1]) if path else None
            raise _Bound(
                top if top is not None else node.start_mark.line + 1,
                f"expands to more than {MAX_YAML_NODES} values, aliases included (MAX_YAML_NODES)",
                path,
            )
        if depth > MAX_YAML_DEPTH:  # an alias can nest a document in itself
            raise _Bound(
                node.start_mark.line + 1,
                f"nested more than {MAX_YAML_DEPTH} levels deep, aliases included (MAX_YAML_DEPTH)",
                path,
            )
        self.lines.lines.setdefault(path, node.start_mark.line + 1)
        self.lines.columns.setdefault(path, node.start_mark.column + 1)
        if isinstance(node, MappingNode):
            if node.tag != _MAP_TAG:
                self._refused(node, path)
                return None
            return self._mapping(node, path, depth)
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ_TAG:
                self._refused(node, path)
                return None
            return [self.build(item, (*path, index), depth + 1) for index, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _refused(self, node: Node, path: KeyPath) -> None:
        if node.tag == _MERGE_TAG:
            self._problem(node, path, "YAML merge keys (<<) are not supported: write the keys out")
        else:
            self._problem(
                node,
                path,
                f"the tag {_shown_tag(node.tag)} is not allowed: configuration is plain YAML "
                "(mappings, lists, strings, numbers, booleans, null)",
            )

    def _scalar(self, node: Node, path: KeyPath) -> Any:
        if node.tag not in _SCALAR_TAGS:
            self._refused(node, path)
            return None
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._problem(node, path, f"not a value YAML can read: {exc.problem}")
        except (ValueError, OverflowError) as exc:
            if node.tag == f"{_CORE}int":  # Python reads at most 4300 digits
                self._problem(node, path, f"an integer of {len(node.value)} characters is too long")
            else:
                self._problem(node, path, f"not a value Squadron can read: {_one_line(exc)}")
        return None

    def _mapping(self, node: MappingNode, path: KeyPath, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self.problems.append(
                    Problem(self.file, line + self.offset, dotted(path), "keys must be scalars")
                )
                continue
            if key_node.tag == _MERGE_TAG or key_node.tag not in _SCALAR_TAGS:
                self._refused(key_node, path)
                continue
            self.built += 1
            key = self._scalar(key_node, path)
            if key is None and key_node.tag != f"{_CORE}null":
                continue
            key = key if isinstance(key, str) else str(key)
            child = (*path, key)
            if key in result:
                first = self.lines.lines[child] + self.offset
                self.problems.append(
                    Problem(
                        self.file,
                        line + self.offset,
                        dotted(child),
                        f"duplicate key (first written on line {first})",
                    )
                )
                continue
            self.lines.lines[child] = line
            self.lines.columns[child] = key_node.start_mark.column + 1
            result[key] = self.build(value_node, child, depth + 1)
        return result


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in path)


dotted = _dotted
