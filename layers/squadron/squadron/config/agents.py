"""Agent definition files: YAML front matter between ``---`` lines, then the system prompt."""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from squadron.domain.repo_config.constants import PROMPT_PLACEHOLDERS, WAKE_PLACEHOLDERS
from squadron.domain.repo_config.errors import Problem
from squadron.domain.repo_config.limits import MAX_FRONT_MATTER_BYTES

_FENCE = "---"


@dataclass(frozen=True)
class AgentSource:
    """An agent file split in two; line numbers are 1-based in the whole file."""

    front_matter: str
    front_matter_line: int
    body: str
    body_line: int


def split_front_matter(text: str, file: str) -> AgentSource:
    """Split ``text`` at its front matter fences, or raise a :class:`Problem`-carrying ValueError."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != _FENCE:
        raise FrontMatterError(
            Problem(file, 1, "", "an agent file starts with YAML front matter between '---' lines")
        )
    size = 0
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n").rstrip() in (_FENCE, "..."):
            return AgentSource(
                front_matter="".join(lines[1:index]),
                front_matter_line=2,
                body="".join(lines[index + 1 :]),
                body_line=index + 2,
            )
        size += len(lines[index].encode("utf-8", "surrogatepass"))
        if size > MAX_FRONT_MATTER_BYTES:
            raise FrontMatterError(
                Problem(
                    file,
                    2,
                    "",
                    f"the front matter is over {MAX_FRONT_MATTER_BYTES} bytes (MAX_FRONT_MATTER_BYTES) "
                    "before its closing '---' line",
                )
            )
    raise FrontMatterError(Problem(file, 1, "", "the front matter is not closed by a '---' line"))


class FrontMatterError(Exception):
    """Internal: an agent file without well-formed front matter."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


def placeholder_problems(
    text: str,
    *,
    file: str,
    first_line: int | None,
    key_path: str,
    allowed: Mapping[str, str],
    same_line: bool = False,
) -> Iterator[Problem]:
    """Problems of the ``{placeholders}`` in ``text``, one per bad placeholder.

    Each line of ``text`` is parsed on its own so a problem names its line;
    with ``same_line`` (a YAML value) every problem is reported at ``first_line``.
    """
    for offset, line_text in enumerate(text.splitlines()):
        line = first_line if same_line or first_line is None else first_line + offset
        try:
            parsed = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(line_text)]
        except ValueError as exc:
            yield Problem(file, line, key_path, f"{exc}; write '{{{{' or '}}}}' for a literal brace")
            continue
        fields = [name for name, _, _ in parsed if name is not None]
        if any(spec or conv for name, spec, conv in parsed if name is not None):
            # "{project_name:>999999999}" would build a gigabyte-long prompt when the agent starts.
            yield Problem(
                file,
                line,
                key_path,
                "placeholders take no format spec (':') or conversion ('!'): write {name} only",
            )
            continue
        for name in fields:
            if name not in allowed:
                shown = "{" + name + "}"
                yield Problem(
                    file,
                    line,
                    key_path,
                    f"unknown placeholder {shown}; documented placeholders are "
                    + ", ".join(sorted(allowed))
                    + " (write '{{' or '}}' for a literal brace)",
                )


PROMPT_ALLOWED: Mapping[str, str] = dict(PROMPT_PLACEHOLDERS)
WAKE_ALLOWED: Mapping[str, str] = {**PROMPT_PLACEHOLDERS, **WAKE_PLACEHOLDERS}
