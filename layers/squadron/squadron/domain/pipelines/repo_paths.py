"""``file_exists`` paths: bounded and normalised when the configuration is read, so what the
router asks GitHub is always one path of the repository — pure (docs/pipelines.md, "Gate
checks").

The router reads whether a path exists at the pull request's head (an issue's run: the default
branch) through GitHub's contents API with the App's installation token
(:mod:`squadron.shell.pipeline_facts`). A path is part of an address there
(``/repos/<owner>/<repo>/contents/<path>``), so one written ``../../collaborators/x``, or with
``%2e%2e``, ``?``, ``#``, could make that read another endpoint of the App's rights. Only a plain
relative path passes: no ``.`` or ``..`` segment, no empty segment, no leading ``/``, no
backslash, no control character, no ``%``, ``?`` or ``#``, no glob (the reference's check tests
literal paths), at most :data:`~.limits.MAX_PATH_LENGTH` characters. Each segment is
percent-encoded again when the address is built (the adapter quotes it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema

from squadron.domain.pipelines.limits import MAX_PATH_LENGTH

#: Characters a ``file_exists`` path may not hold (an address's own, globs, a Windows separator).
_REFUSED = {
    "\\": "a backslash",
    "%": "'%' (an escape in the address it is read at)",
    "?": "'?' (a query of the address it is read at, or a glob)",
    "#": "'#' (a fragment of the address it is read at)",
    "*": "'*' (a glob: file_exists names paths)",
    "[": "'[' (a glob: file_exists names paths)",
    "]": "']' (a glob: file_exists names paths)",
    "{": "'{' (a glob: file_exists names paths)",
    "}": "'}' (a glob: file_exists names paths)",
}


def check_repo_path(value: str) -> str:
    """``value`` as a path of the repository (a trailing ``/`` of a directory dropped), or an
    error saying which rule it breaks."""
    if len(value) > MAX_PATH_LENGTH:
        raise ValueError(
            f"a path is at most {MAX_PATH_LENGTH} characters (MAX_PATH_LENGTH); this one has {len(value)}"
        )
    shown = value if len(value) <= 60 else value[:60] + "..."
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValueError(f"a path has no control character (got {shown!r})")
    for char, what in _REFUSED.items():
        if char in value:
            raise ValueError(f"a path of the repository may not hold {what} (got {shown!r})")
    if value.startswith("/"):
        raise ValueError(
            f"a path is relative to the repository's root, without a leading '/' (got {shown!r})"
        )
    path = value[:-1] if value.endswith("/") else value
    segments = path.split("/")
    if not path or any(segment in ("", ".", "..") for segment in segments):
        raise ValueError(
            f"a path is names joined by '/', without an empty, '.' or '..' part (got {shown!r}): "
            "it is read inside the repository only"
        )
    return path


#: One path of a ``file_exists`` check.
RepoPath = Annotated[
    str,
    AfterValidator(check_repo_path),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": MAX_PATH_LENGTH,
            "description": "a path relative to the repository's root (no '..', no glob)",
        }
    ),
]


def paths_read(checks: Iterable[Any]) -> tuple[str, ...]:
    """Every path the ``file_exists`` checks among ``checks`` name, once each, in order."""
    found: dict[str, None] = {}
    for check in checks:
        if getattr(check, "check", None) == "file_exists":
            found.update(dict.fromkeys(check.paths))
    return tuple(found)
