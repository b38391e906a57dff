"""The documented defaults a repository's files are merged over.

Mappings merge key by key, ``null`` removes a default entry, lists replace; default entries
that name a role or label the repository removed are dropped; the built-in agent definitions
are parsed once.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from squadron.config.builtin import BUILTIN_AGENTS
from squadron.config.parse.documents import ParseContext
from squadron.config.yamlsource import LineMap
from squadron.domain.repo_config.constants import AGENTS_DIR
from squadron.domain.repo_config.errors import ConfigError
from squadron.domain.repo_config.models import AgentDefinition, RepoConfig


def defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    return model().model_dump(mode="json")


def deep_merge(base: Any, override: Any) -> Any:
    """``override`` over ``base``: mappings merge key by key, ``None`` drops a key, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        result = dict(base)
        for key, value in override.items():
            if value is None:
                result.pop(key, None)
            elif key in result:
                result[key] = deep_merge(result[key], value)
            else:
                result[key] = value
        return result
    return override


def prune_default_role_refs(merged: dict[str, Any], lines: LineMap) -> None:
    """Drop default entries that name a role the repository removed (its own entries stay, to be reported)."""
    roles = merged.get("roles")
    if not isinstance(roles, dict):
        return
    for section, key in (
        ("branch_naming", "roles"),
        ("circuit_breakers", "roles"),
        ("runtime", "max_concurrent_per_role"),
    ):
        table = merged.get(section, {}).get(key) if isinstance(merged.get(section), dict) else None
        if isinstance(table, dict):
            for name in [n for n in table if n not in roles and (section, key, n) not in lines.lines]:
                del table[name]
    labels = merged.get("labels")
    naming = merged.get("branch_naming")
    if isinstance(labels, dict) and isinstance(naming, dict) and isinstance(naming.get("labels"), dict):
        table = naming["labels"]
        for name in [
            n for n in table if n not in labels and ("branch_naming", "labels", n) not in lines.lines
        ]:
            del table[name]
    if isinstance(labels, dict):
        for name, label in labels.items():
            if (
                isinstance(label, dict)
                and label.get("role") is not None
                and label["role"] not in roles
                and ("labels", name, "role") not in lines.lines
            ):
                label["role"] = None


def prune_default_reviews(merged: dict[str, Any], lines: LineMap, config: RepoConfig) -> None:
    default = merged.get("default")
    if not isinstance(default, dict) or ("default", "required_reviews") in lines.lines:
        return
    reviews = default.get("required_reviews")
    if isinstance(reviews, list):
        default["required_reviews"] = [
            r
            for r in reviews
            if not (isinstance(r, dict) and str(r.get("role", "")).startswith("agent:"))
            or str(r["role"]).removeprefix("agent:") in config.roles
        ]


@functools.cache
def builtin_agents() -> Mapping[str, AgentDefinition]:
    ctx = ParseContext("built-in")
    agents = {}
    for name, text in BUILTIN_AGENTS.items():
        agent = ctx.parse_agent(f"{AGENTS_DIR}/{name}.md", text)
        if agent is not None:
            agents[name] = agent.model_copy(update={"source": "built-in"})
    if ctx.problems:  # a bug in this package, not in the repository
        raise ConfigError(ctx.problems)
    return types.MappingProxyType(agents)
