"""Configuration problems: each names the file, the line and the key path."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from squadron.errors import ConfigurationError


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong in one file of ``.squadron/``.

    ``line`` (and ``column``, when one character is the problem) is 1-based, or None when the problem is about something absent
    from the file (a default, a missing file). ``key_path`` is dotted, with list
    indexes as numbers: ``roles.feat-dev.lifecycle``, ``branch_rules.0.pattern``.
    """

    file: str
    line: int | None
    key_path: str
    message: str
    #: 1-based, when the problem is one character of the line (a tab, a syntax error).
    column: int | None = field(default=None, compare=False)

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.line is not None and self.column is not None:
            where = f"{where}:{self.column}"
        return f"{where}: {self.key_path}: {self.message}" if self.key_path else f"{where}: {self.message}"


class ConfigError(ConfigurationError):
    """The ``.squadron/`` configuration has problems; all of them are in ``problems``."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(sorted(set(problems), key=_sort_key))
        count = len(self.problems)
        summary = f"{count} configuration problem{'s' if count != 1 else ''}"
        super().__init__("\n".join([summary, *(str(p) for p in self.problems)]))


def _sort_key(problem: Problem) -> tuple[str, int, str, str]:
    return (problem.file, problem.line or 0, problem.key_path, problem.message)
