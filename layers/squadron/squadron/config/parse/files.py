"""``parse_files({relative path: text}) -> SquadronConfig``: the whole ``.squadron`` directory.

Each file is parsed with line numbers (:mod:`.documents`), merged over the documented
defaults (:mod:`.defaults`), validated by its model, then the files are checked against each
other (:mod:`.references`). Every problem of every file is collected into one
:class:`~squadron.domain.repo_config.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping

from squadron.config.parse.defaults import (
    _builtin_agents,
    _deep_merge,
    _defaults_of,
    _prune_default_reviews,
    _prune_default_role_refs,
)
from squadron.config.parse.documents import _Context, _is_agent_file
from squadron.config.parse.references import _Directory, check_config_references, check_flow_references
from squadron.config.parse.result import SquadronConfig
from squadron.domain.repo_config.constants import APPROVAL_FLOWS_FILE, CONFIG_DIR, CONFIG_FILE, CONTEXT_FILE
from squadron.domain.repo_config.errors import ConfigError
from squadron.domain.repo_config.limits import MAX_CONTEXT_CHARS
from squadron.domain.repo_config.models import ApprovalFlowsFile, RepoConfig


def parse_files(files: Mapping[str, str], *, root: str = CONFIG_DIR) -> SquadronConfig:
    """Parse a ``.squadron`` directory given as {path relative to it: text}.

    ``root`` prefixes file names in problems. An empty mapping (no ``.squadron/``)
    gives the documented defaults with the built-in agent definitions.
    """
    ctx = _Context(root)
    ctx.check_file_names(files)

    config_doc = ctx.load_mapping(CONFIG_FILE, files.get(CONFIG_FILE))
    merged_config = _deep_merge(_defaults_of(RepoConfig), config_doc.data)
    _prune_default_role_refs(merged_config, config_doc.lines)
    repo_config = ctx.validate(RepoConfig, merged_config, CONFIG_FILE, config_doc.lines)

    agents = dict(_builtin_agents())
    for rel in sorted(files):
        if _is_agent_file(rel):
            agent = ctx.parse_agent(rel, files[rel])
            if agent is not None:
                agents[agent.name] = agent

    flows_doc = ctx.load_mapping(APPROVAL_FLOWS_FILE, files.get(APPROVAL_FLOWS_FILE))
    merged_flows = _deep_merge(_defaults_of(ApprovalFlowsFile), flows_doc.data)
    if repo_config is not None:
        _prune_default_reviews(merged_flows, flows_doc.lines, repo_config)
    flows = ctx.validate(ApprovalFlowsFile, merged_flows, APPROVAL_FLOWS_FILE, flows_doc.lines)

    directory = _Directory.of(repo_config, merged_config)
    if repo_config is not None:
        check_config_references(ctx, repo_config, agents, config_doc.lines, directory)
    if flows is not None:
        check_flow_references(ctx, flows, flows_doc.lines, directory)

    context = files.get(CONTEXT_FILE, "").strip()
    if len(context) > MAX_CONTEXT_CHARS:
        ctx.add(
            CONTEXT_FILE,
            None,
            (),
            f"is {len(context)} characters, over the limit of {MAX_CONTEXT_CHARS} for the shared context "
            "every agent starts with (MAX_CONTEXT_CHARS): keep what every agent needs",
        )
    if ctx.problems or repo_config is None or flows is None:
        raise ConfigError(ctx.problems)
    return SquadronConfig(
        context=context,
        config=repo_config,
        agents=agents,
        approval_flows=flows,
        files=tuple(sorted(files)),
        defaults=tuple(name for name in (CONFIG_FILE, APPROVAL_FLOWS_FILE) if name not in files),
    )
