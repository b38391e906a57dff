"""Small value types shared by the config models: durations, names, principals, globs."""

from __future__ import annotations

import re
import string
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema

from squadron.domain.repo_config import globs
from squadron.domain.repo_config.constants import (
    BRANCH_PLACEHOLDERS,
    FRAMEWORK_TOOLS,
    HOST_TOOLS,
    PRINCIPAL_KINDS,
)
from squadron.domain.repo_config.limits import MAX_GLOB_LENGTH

_DURATION_RE = re.compile(r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
DURATION_PATTERN = r"^(\d+|(\d+d)?(\d+h)?(\d+m)?(\d+s)?)$"


def parse_duration(value: Any) -> Any:
    """Seconds as an int, or a string like ``"90s"``, ``"30m"``, ``"2h"``, ``"1d"``, ``"1h30m"``."""
    if isinstance(value, bool):
        raise ValueError("expected seconds or a duration like '30m' or '2h', not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text.isdigit():
            return int(text)
        match = _DURATION_RE.fullmatch(text)
        if text and match:
            return sum(
                int(amount) * _UNIT_SECONDS[unit] for unit, amount in match.groupdict().items() if amount
            )
        raise ValueError(f"expected seconds or a duration like '30m', '2h' or '1h30m' (got {value!r})")
    return value  # let the int validator report the type


def format_duration(seconds: int) -> str:
    """The shortest ``1d2h3m4s`` spelling of ``seconds`` (``0s`` for zero)."""
    parts = []
    rest = seconds
    for unit, size in _UNIT_SECONDS.items():
        amount, rest = divmod(rest, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"


#: A duration in seconds; YAML may spell it as an int or as "30m" / "2h" / "1d".
Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0, "description": "seconds"},
                {
                    "type": "string",
                    "pattern": DURATION_PATTERN,
                    "description": "e.g. 90s, 30m, 2h, 1d, 1h30m",
                },
            ]
        }
    ),
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
_NAME_RE = re.compile(NAME_PATTERN)


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(f"names are lowercase letters, digits and '-' (got {value!r})")
    return value


#: A role, agent or human group name: ``feat-dev``, ``security-review``, ``maintainers``.
Name = Annotated[
    str, AfterValidator(_check_name), WithJsonSchema({"type": "string", "pattern": NAME_PATTERN})
]

LOGIN_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\[bot\])?$"
_LOGIN_RE = re.compile(LOGIN_PATTERN)


def _check_login(value: str) -> str:
    if not _LOGIN_RE.fullmatch(value.removeprefix("@")) or len(value) > 45:
        raise ValueError(f"not a GitHub login: {value!r}")
    return value.removeprefix("@")


#: A GitHub login (a leading ``@`` is accepted and dropped).
Login = Annotated[
    str,
    AfterValidator(_check_login),
    WithJsonSchema({"type": "string", "pattern": r"^@?[A-Za-z0-9-]+(\[bot\])?$"}),
]

PRINCIPAL_PATTERN = r"^(agent|human_group|user):[A-Za-z0-9][A-Za-z0-9_.-]*$"


def _check_principal(value: str) -> str:
    kind, sep, name = value.partition(":")
    if not sep or kind not in PRINCIPAL_KINDS or not name:
        raise ValueError(f"expected 'agent:<role>', 'human_group:<group>' or 'user:<login>' (got {value!r})")
    if kind == "user":
        _check_login(name)
    else:
        _check_name(name)
    return value


#: Who reviews, is notified or is assigned: ``agent:<role>``, ``human_group:<group>``, ``user:<login>``.
Principal = Annotated[
    str, AfterValidator(_check_principal), WithJsonSchema({"type": "string", "pattern": PRINCIPAL_PATTERN})
]


def _check_framework_tool(value: str) -> str:
    if value in FRAMEWORK_TOOLS:
        return value
    if value in HOST_TOOLS:
        raise ValueError(f"{value!r} is a CLI host tool: opt into it explicitly under host_tools")
    raise ValueError(f"unknown tool {value!r}; framework tools are: {', '.join(sorted(FRAMEWORK_TOOLS))}")


def _check_host_tool(value: str) -> str:
    if value in HOST_TOOLS:
        return value
    if value in FRAMEWORK_TOOLS:
        raise ValueError(f"{value!r} is a framework tool: list it under tools")
    raise ValueError(f"unknown host tool {value!r}; host tools are: {', '.join(sorted(HOST_TOOLS))}")


FrameworkTool = Annotated[
    str,
    AfterValidator(_check_framework_tool),
    WithJsonSchema({"type": "string", "enum": sorted(FRAMEWORK_TOOLS)}),
]
HostTool = Annotated[
    str, AfterValidator(_check_host_tool), WithJsonSchema({"type": "string", "enum": sorted(HOST_TOOLS)})
]

#: Longest branch template (git refuses overlong ref names anyway).
MAX_BRANCH_TEMPLATE_LENGTH = 200

_BAD_REF_RE = re.compile(r"[\s~^:?*\[\\]|\.\.|@\{|//|\.lock(?:/|$)|^[/.-]|[/.]$")


def _check_branch_template(value: str) -> str:
    if len(value) > MAX_BRANCH_TEMPLATE_LENGTH:
        raise ValueError(f"a branch template is at most {MAX_BRANCH_TEMPLATE_LENGTH} characters")
    try:
        parsed = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(value)]
    except ValueError as exc:
        raise ValueError(f"bad template {value!r}: {exc}") from exc
    fields = [name for name, _, _ in parsed if name is not None]
    if any(spec or conversion for name, spec, conversion in parsed if name is not None):
        # "{issue_number:>999999999}" would build a gigabyte-long branch name.
        raise ValueError(f"placeholders take no format spec (':') or conversion ('!') (got {value!r})")
    unknown = sorted(set(fields) - BRANCH_PLACEHOLDERS)
    if unknown:
        raise ValueError(
            f"unknown placeholder {{{unknown[0]}}}; branch templates may use "
            + ", ".join(f"{{{name}}}" for name in sorted(BRANCH_PLACEHOLDERS))
        )
    if "issue_number" not in fields:
        raise ValueError(f"a branch template must contain {{issue_number}} (got {value!r})")
    repeated = sorted(name for name in set(fields) if fields.count(name) > 1)
    if repeated:
        # Each placeholder is read back from branch names (which issue a branch is for):
        # once each keeps that reading unambiguous and quick.
        raise ValueError(f"{{{repeated[0]}}} may appear only once in a branch template (got {value!r})")
    sample = value.format(issue_number=1, role="role")
    if _BAD_REF_RE.search(sample):
        raise ValueError(f"{value!r} does not make a valid git branch name")
    return value


#: A branch name template such as ``feat/issue-{issue_number}``.
BranchTemplate = Annotated[
    str,
    AfterValidator(_check_branch_template),
    WithJsonSchema({"type": "string", "pattern": r"\{issue_number\}"}),
]


def _check_glob(value: str) -> str:
    if not value or value.startswith("/") or "\\" in value:
        raise ValueError(
            f"a path glob is relative to the repository root, with '/' separators (got {value!r})"
        )
    if len(value) > MAX_GLOB_LENGTH:
        raise ValueError(
            f"a path glob is at most {MAX_GLOB_LENGTH} characters (MAX_GLOB_LENGTH); this one has {len(value)}"
        )
    return value


#: A repository path glob: ``*`` within one segment, ``**`` across segments (see squadron.domain.repo_config.globs).
PathGlob = Annotated[
    str,
    AfterValidator(_check_glob),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_GLOB_LENGTH}),
]

#: Matching a path glob against a repository path, in linear time.
path_matches = globs.path_matches
