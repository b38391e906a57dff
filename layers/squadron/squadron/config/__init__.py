"""A repository's ``.squadron/`` configuration: models, loader, JSON Schemas.

* :func:`parse_files` — pure: {relative path: text} → :class:`SquadronConfig`
* :class:`ConfigLoader` — from the default branch through :class:`RepositoryFiles`, cached per commit
* :func:`load_directory` — from a directory (``squadron validate``)

Every problem is a :class:`Problem` (file, line, key path, message); all of them
are raised together as one :class:`ConfigError`. This package does no network
I/O of its own and never imports boto3 or httpx.
"""

from __future__ import annotations

from squadron.config.loader import (
    ConfigLoader,
    RepositoryFiles,
    load_directory,
    read_directory,
    with_bot_login,
)
from squadron.config.parse import ResolvedRole, SquadronConfig, parse_files
from squadron.config.schema import json_schemas, write_schemas
from squadron.domain.repo_config.constants import (
    FRAMEWORK_TOOLS,
    HOST_TOOLS,
    PROMPT_PLACEHOLDERS,
    WAKE_PLACEHOLDERS,
)
from squadron.domain.repo_config.errors import ConfigError, Problem
from squadron.domain.repo_config.models import (
    AgentDefinition,
    AgentFrontMatter,
    ApprovalFlow,
    ApprovalFlowsFile,
    BranchRule,
    BreakerLimits,
    RepoConfig,
    RoleConfig,
)

__all__ = [
    "FRAMEWORK_TOOLS",
    "HOST_TOOLS",
    "PROMPT_PLACEHOLDERS",
    "WAKE_PLACEHOLDERS",
    "AgentDefinition",
    "AgentFrontMatter",
    "ApprovalFlow",
    "ApprovalFlowsFile",
    "BranchRule",
    "BreakerLimits",
    "ConfigError",
    "ConfigLoader",
    "Problem",
    "RepoConfig",
    "RepositoryFiles",
    "ResolvedRole",
    "RoleConfig",
    "SquadronConfig",
    "json_schemas",
    "load_directory",
    "parse_files",
    "read_directory",
    "with_bot_login",
    "write_schemas",
]
