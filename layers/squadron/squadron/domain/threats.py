"""Secrets in what an agent asks the App to write — pure: the bounds of a scan and what is said.

Before the gateway posts an agent's words (a comment, an issue, a pull request, a review, a
status) they are scanned for secrets (:mod:`squadron.adapters.secret_scan`, a maintained
scanner). A hit refuses the write: the agent is told which kind of secret was found where,
never the secret itself, its task hands the issue to humans, and the refusal is counted
(``GatewayRefusals`` with the reason ``secret_found``).

The scan is bounded: at most :data:`MAX_SCAN_CHARS` of a text and :data:`MAX_LINE_CHARS` of a
line are read (a bigger write is refused by its own limits first: a body is at most 65,536
characters), so its time grows with the size of the write and never with what the text holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

#: The most of one text a scan reads.
MAX_SCAN_CHARS: Final = 262_144
#: The most of one line a scan reads (a secret is shorter; a minified line is not read whole).
MAX_LINE_CHARS: Final = 4_096


@dataclass(frozen=True, order=True)
class Finding:
    """A secret found: where (the write's field and line) and its kind, never its value."""

    field: str
    line: int
    kind: str

    def said(self) -> str:
        return f"{self.kind} in the {self.field}, line {self.line}"


def scanned_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of ``text`` a scan reads, numbered from 1, within the bounds."""
    for number, line in enumerate(text[:MAX_SCAN_CHARS].splitlines(), start=1):
        yield number, line[:MAX_LINE_CHARS]


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def added_lines(diff: str) -> Iterator[tuple[str, int, str]]:
    """The lines a unified diff (``git diff -U0``) adds: (the file, its line number there, the
    line), within the bounds: what a push would put on GitHub that was not there."""
    path, number = "", 0
    for raw in diff[:MAX_SCAN_CHARS].splitlines():
        if raw.startswith("+++ "):
            path = raw[4:].removeprefix("b/")
        elif raw.startswith("@@"):
            found = _HUNK.match(raw)
            number = int(found.group(1)) if found else 0
        elif raw.startswith("+") and path:
            yield path, number, raw[1:][:MAX_LINE_CHARS]
            number += 1


def write_texts(fields: Iterable[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """The named texts of a write to scan (absent and empty ones left out)."""
    return [(name, text) for name, text in fields if text]


def _shown(findings: Sequence[Finding]) -> str:
    shown = "; ".join(f.said() for f in sorted(set(findings))[:10])
    return shown + (f" and {len(findings) - 10} more" if len(findings) > 10 else "")


def refusal(findings: Sequence[Finding]) -> str:
    """What the agent is told of ``findings`` (kinds and places only)."""
    return (
        f"it carries what looks like a secret ({_shown(findings)}). Nothing reached GitHub; "
        "your task is handed to humans, who check it and rotate the secret if it is real"
    )


def withheld_words(findings: Sequence[Finding]) -> str:
    """What the humans read in place of an agent's last words that carried ``findings``."""
    return (
        f"its last words were withheld: they carry what looks like a secret ({_shown(findings)}). "
        "Check its work and rotate the secret if it is real"
    )
