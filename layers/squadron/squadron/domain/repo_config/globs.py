"""Glob matching in linear time: no regular expressions, no backtracking — pure.

Two dialects, with the meanings the configuration has always given them:

* **path globs** (``protected_paths``): ``**/`` any leading directories (none
  included), ``**`` anything, ``*`` anything within one path segment, ``?`` one
  character of a segment; every other character, ``[`` included, is literal.
  A glob without ``/`` matches a file's name in any directory.
* **branch patterns** (``branch_rules``): Python's :func:`fnmatch.fnmatchcase`
  — ``*`` anything (``/`` too), ``?`` one character, ``[...]`` a class
  (``[!...]`` negated, ranges, a literal ``[`` when unclosed).

A glob compiles to a small automaton — one state per glob token — that is run
over the text with every live state at once, as bits of one integer (the
Shift-And idea behind agrep): each character of the text costs a few integer
operations, whatever the glob, so matching takes time linear in the text. The
transitions a text actually takes are remembered per compiled glob (a lazily
built DFA, bounded in size), so matching many file names against one glob costs
about one dictionary lookup per character. A regular expression engine with
backtracking would need exponential time on ``*a*a*a*a*b`` against a long
run of ``a``; this never does.

Unlike the regular expressions this replaces, ``**`` and ``?`` also match a
newline: a file name with a newline in it cannot slip past a protected path.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["path", "fnmatch"]

#: Remembered transitions per compiled glob; past this the automaton is run without memory.
_MAX_DFA_EDGES = 4096
#: Per-character masks remembered per compiled glob (file names are mostly ASCII).
_MAX_CHAR_MASKS = 1024
#: Entries (transitions and masks) remembered by every compiled glob together: past this the
#: compiled globs are forgotten and compiled again when next needed, so that hostile globs and
#: file names from many repositories cannot grow a long-lived router's memory (about 30 MB).
MAX_REMEMBERED = 200_000
_remembered = 0


def remembered() -> int:
    """Entries the compiled globs remember now (at most :data:`MAX_REMEMBERED`)."""
    return _remembered


def forget() -> None:
    """Forget every compiled glob and what it remembered."""
    global _remembered  # noqa: PLW0603 (one budget for the module's cache)
    compile_glob.cache_clear()
    _remembered = 0


def _remember() -> bool:
    """Count one more remembered entry; False (and every compiled glob forgotten) past the budget."""
    global _remembered  # noqa: PLW0603 (one budget for the module's cache)
    if _remembered >= MAX_REMEMBERED:
        forget()
        return False
    _remembered += 1
    return True


@dataclass(frozen=True)
class CharClass:
    """A set of characters: literal ``chars`` and inclusive ``ranges``, possibly negated."""

    chars: frozenset[str] = frozenset()
    ranges: tuple[tuple[str, str], ...] = ()
    negate: bool = False

    def __contains__(self, c: object) -> bool:
        if not isinstance(c, str):
            return False
        inside = c in self.chars or any(lo <= c <= hi for lo, hi in self.ranges)
        return inside != self.negate


ANY = CharClass(negate=True)
NOT_SLASH = CharClass(frozenset("/"), negate=True)
NOTHING = CharClass()


def _literal(c: str) -> CharClass:
    return CharClass(frozenset(c))


@dataclass(frozen=True)
class _Token:
    """``one``: exactly one character of ``chars``; ``star``: any number of them;
    ``dirs``: ``(.*/)?`` — nothing, or anything ending with ``/`` (takes two states)."""

    kind: Literal["one", "star", "dirs"]
    chars: CharClass = ANY


def _path_tokens(glob: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            tokens.append(_Token("dirs"))
            i += 3
        elif glob.startswith("**", i):
            tokens.append(_Token("star", ANY))
            i += 2
        elif glob[i] == "*":
            tokens.append(_Token("star", NOT_SLASH))
            i += 1
        elif glob[i] == "?":
            tokens.append(_Token("one", NOT_SLASH))
            i += 1
        else:
            tokens.append(_Token("one", _literal(glob[i])))
            i += 1
    return tokens


def _fnmatch_tokens(pattern: str) -> list[_Token]:
    """:func:`fnmatch.translate`'s reading of ``pattern``, as tokens instead of a regex."""
    tokens: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            tokens.append(_Token("star", ANY))
        elif c == "?":
            tokens.append(_Token("one", ANY))
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                tokens.append(_Token("one", _literal("[")))
            else:
                tokens.append(_Token("one", _bracket(pattern, i, j)))
                i = j + 1
        else:
            tokens.append(_Token("one", _literal(c)))
    return tokens


def _bracket(pattern: str, i: int, j: int) -> CharClass:
    """The class ``pattern[i:j]`` (between ``[`` and ``]``) exactly as fnmatch's regex reads it."""
    stuff = pattern[i:j]
    if "-" not in stuff:
        chunks = [stuff]
    else:
        chunks = []
        k = i + 2 if pattern[i] == "!" else i + 1
        while True:
            k = pattern.find("-", k, j)
            if k < 0:
                break
            chunks.append(pattern[i:k])
            i = k + 1
            k = k + 3
        chunk = pattern[i:j]
        if chunk:
            chunks.append(chunk)
        else:
            chunks[-1] += "-"
        # Empty ranges (z-a) are removed, as fnmatch does.
        for k in range(len(chunks) - 1, 0, -1):
            if chunks[k - 1][-1] > chunks[k][0]:
                chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
                del chunks[k]
    if chunks == [""]:
        return NOTHING  # fnmatch: "(?!)", never matches
    negate = chunks[0].startswith("!")
    if "".join(chunks) == "!":
        return ANY  # fnmatch: a negated empty class matches any character
    if negate:
        chunks[0] = chunks[0][1:]
    # Consecutive chunks join as a range: the last character of one to the first of the next.
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    for index, chunk in enumerate(chunks):
        body = chunk
        if index > 0 and chunks[index - 1] and chunk:
            ranges.append((chunks[index - 1][-1], chunk[0]))
            body = body[1:]
        elif index > 0:
            chars.add("-")
        if index < len(chunks) - 1:
            body = body[:-1]
        chars.update(body)
    return CharClass(frozenset(chars), tuple(ranges), negate)


def _simplify(tokens: list[_Token]) -> list[_Token]:
    """Merge what matches the same as one token (``**`` next to ``*`` or ``**/``), so epsilon
    chains stay short."""
    out: list[_Token] = []
    for token in tokens:
        last = out[-1] if out else None
        if last is not None and last.kind == "star" and token.kind == "star":
            # X*Y* with X ⊆ Y is Y*: the two star kinds are [^/] and everything.
            out[-1] = _Token("star", ANY if ANY in (last.chars, token.chars) else last.chars)
        elif (
            last is not None
            and token.kind == "dirs"
            and (last.kind == "dirs" or (last.kind == "star" and last.chars == ANY))
        ):
            continue  # (.*/)?(.*/)? and .*(.*/)? add nothing
        elif last is not None and last.kind == "dirs" and token.kind == "star" and token.chars == ANY:
            out[-1] = token  # (.*/)?.* is .*
        else:
            out.append(token)
    return out


class Glob:
    """One compiled glob; :meth:`matches` runs in time linear in the text."""

    def __init__(self, pattern: str, dialect: Dialect) -> None:
        self.pattern = pattern
        self.dialect = dialect
        tokens = _simplify(_path_tokens(pattern) if dialect == "path" else _fnmatch_tokens(pattern))
        # States: one per token ("dirs" takes two: its entry, then its body), then the accepting one.
        self._step: list[tuple[int, CharClass]] = []  # (bit, class) consumed to move to the next state
        self._loop: list[tuple[int, CharClass]] = []  # (bit, class) consumed to stay
        eps1 = eps2 = 0
        state = 0
        for token in tokens:
            bit = 1 << state
            if token.kind == "one":
                self._step.append((bit, token.chars))
                state += 1
            elif token.kind == "star":
                self._loop.append((bit, token.chars))
                eps1 |= bit
                state += 1
            else:  # dirs: entry --ε--> body, entry --ε--> after; body loops on anything, '/' leaves it
                eps1 |= bit
                eps2 |= bit
                self._loop.append((bit << 1, ANY))
                self._step.append((bit << 1, _literal("/")))
                state += 2
        self._accept = 1 << state
        self._eps1 = eps1
        self._eps2 = eps2
        self._start = self._closure(1)
        self._masks: dict[str, tuple[int, int]] = {}
        self._dfa: dict[int, dict[str, int]] = {}
        self._edges = 0

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r}, {self.dialect!r})"

    def _closure(self, states: int) -> int:
        while True:
            more = states | ((states & self._eps1) << 1) | ((states & self._eps2) << 2)
            if more == states:
                return states
            states = more

    def _char_masks(self, c: str) -> tuple[int, int]:
        masks = self._masks.get(c)
        if masks is None:
            loop = sum(bit for bit, chars in self._loop if c in chars)
            step = sum(bit for bit, chars in self._step if c in chars)
            masks = (loop, step)
            if len(self._masks) < _MAX_CHAR_MASKS and _remember():
                self._masks[c] = masks
        return masks

    def _next(self, states: int, c: str) -> int:
        row = self._dfa.get(states)
        if row is not None:
            found = row.get(c)
            if found is not None:
                return found
        loop, step = self._char_masks(c)
        after = (states & loop) | ((states & step) << 1)
        if after:
            after = self._closure(after)
        if self._edges < _MAX_DFA_EDGES and _remember():
            self._dfa.setdefault(states, {})[c] = after
            self._edges += 1
        return after

    def matches(self, text: str) -> bool:
        """Whether the whole of ``text`` matches (the path dialect's file-name rule is in
        :func:`path_matches`)."""
        states = self._start
        for c in text:
            states = self._next(states, c)
            if not states:
                return False
        return bool(states & self._accept)


@functools.lru_cache(maxsize=4096)
def compile_glob(pattern: str, dialect: Dialect = "path") -> Glob:
    return Glob(pattern, dialect)


def path_matches(glob: str, path: str) -> bool:
    """Whether repository path ``path`` matches path glob ``glob`` (a glob without ``/``
    matches the file name in any directory)."""
    compiled = compile_glob(glob, "path")
    if "/" not in glob:
        return compiled.matches(path.rsplit("/", 1)[-1])
    return compiled.matches(path)


def fnmatch_matches(name: str, pattern: str) -> bool:
    """:func:`fnmatch.fnmatchcase` in linear time (branch patterns)."""
    return compile_glob(pattern, "fnmatch").matches(name)
