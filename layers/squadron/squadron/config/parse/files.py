"""``parse_files({relative path: text}) -> SquadronConfig``: the whole ``.squadron`` directory.

Each file is parsed with line numbers (:mod:`.documents`), merged over the documented
defaults (:mod:`.defaults`), validated by its model, then the files are checked against each
other (:mod:`.references`). Every problem of every file is collected into one
:class:`~squadron.domain.repo_config.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from squadron.config.parse.defaults import (
    builtin_agents,
    deep_merge,
    defaults_of,
    prune_default_reviews,
    prune_default_role_refs,
)
from squadron.config.parse.documents import ParseContext, is_agent_file
from squadron.config.parse.pipelines import (
    check_pipeline_references,
    prepare_pipelines,
    salvage_pipelines,
    with_columns,
)
from squadron.config.parse.references import RoleDirectory, check_config_references, check_flow_references
from squadron.config.parse.result import SquadronConfig
from squadron.config.parse.salvage import salvage
from squadron.config.yamlsource import KeyPath, dotted
from squadron.domain.repo_config.constants import APPROVAL_FLOWS_FILE, CONFIG_DIR, CONFIG_FILE, CONTEXT_FILE
from squadron.domain.repo_config.errors import ConfigError
from squadron.domain.repo_config.limits import MAX_CONTEXT_CHARS
from squadron.domain.repo_config.models import ApprovalFlowsFile, RepoConfig


def parse_files(files: Mapping[str, str], *, root: str = CONFIG_DIR) -> SquadronConfig:
    """Parse a ``.squadron`` directory given as {path relative to it: text}.

    ``root`` prefixes file names in problems. An empty mapping (no ``.squadron/``)
    gives the documented defaults with the built-in agent definitions.
    """
    ctx = ParseContext(root)
    ctx.check_file_names(files)

    config_doc = ctx.load_mapping(CONFIG_FILE, files.get(CONFIG_FILE))
    merged_config = deep_merge(defaults_of(RepoConfig), config_doc.data)
    prune_default_role_refs(merged_config, config_doc.lines)
    prepare_pipelines(ctx, merged_config, config_doc.lines)
    repo_config = ctx.validate(RepoConfig, merged_config, CONFIG_FILE, config_doc.lines)

    agents = dict(builtin_agents())
    for rel in sorted(files):
        if is_agent_file(rel):
            agent = ctx.parse_agent(rel, files[rel])
            if agent is not None:
                agents[agent.name] = agent

    flows_doc = ctx.load_mapping(APPROVAL_FLOWS_FILE, files.get(APPROVAL_FLOWS_FILE))
    merged_flows = deep_merge(defaults_of(ApprovalFlowsFile), flows_doc.data)
    if repo_config is not None:
        prune_default_reviews(merged_flows, flows_doc.lines, repo_config)
    flows = ctx.validate(ApprovalFlowsFile, merged_flows, APPROVAL_FLOWS_FILE, flows_doc.lines)

    directory = RoleDirectory.of(repo_config, merged_config)
    # A file with schema problems still has its references checked, on what of it is valid
    # (one pass tells every problem); those at a part the schema refused were told already.
    config_checked, config_removed = (
        (repo_config, [])
        if repo_config is not None
        else salvage(RepoConfig, {k: v for k, v in merged_config.items() if k != "pipelines"})
    )
    if config_checked is not None:
        _told_once(
            ctx,
            config_removed,
            lambda: check_config_references(ctx, config_checked, agents, config_doc.lines, directory),
        )
    pipelines, pipelines_removed = (
        (repo_config.pipelines, [])
        if repo_config is not None
        else salvage_pipelines(merged_config.get("pipelines"))
    )
    _told_once(
        ctx,
        pipelines_removed,
        lambda: check_pipeline_references(ctx, pipelines, config_doc.lines, directory),
    )
    flows_checked, flows_removed = (
        (flows, []) if flows is not None else salvage(ApprovalFlowsFile, merged_flows)
    )
    if flows_checked is not None:
        _told_once(
            ctx,
            flows_removed,
            lambda: check_flow_references(ctx, flows_checked, flows_doc.lines, directory),
        )

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
        raise ConfigError(with_columns(ctx.problems, ctx.file(CONFIG_FILE), config_doc.lines))
    return SquadronConfig(
        context=context,
        config=repo_config,
        agents=agents,
        approval_flows=flows,
        files=tuple(sorted(files)),
        defaults=tuple(name for name in (CONFIG_FILE, APPROVAL_FLOWS_FILE) if name not in files),
    )


def _told_once(ctx: ParseContext, removed: list[KeyPath], check: Callable[[], None]) -> None:
    """Run a reference ``check``, leaving out its problems about a part the schema refused."""
    before = len(ctx.problems)
    check()
    if removed:
        found = ctx.problems[before:]
        del ctx.problems[before:]
        gone = [dotted(path) for path in removed]
        ctx.problems.extend(p for p in found if not any(_related(p.key_path, g) for g in gone))


def _related(key_path: str, removed: str) -> bool:
    """Whether a reference problem at ``key_path`` may come of removing ``removed``: at or below
    it, or about what holds it (``roles`` counted without a role the schema refused)."""
    return bool(key_path) and (
        key_path == removed or key_path.startswith(f"{removed}.") or removed.startswith(f"{key_path}.")
    )
