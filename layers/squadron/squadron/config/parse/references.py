"""The files checked against each other: roles, agent definitions, labels, human groups.

A reference that names nothing (an unknown role, a missing agent definition, a human group
not defined) is a problem at the line it was written on, with a suggestion when a name is close.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from squadron.config.parse.documents import ParseContext
from squadron.config.parse.problems import did_you_mean
from squadron.config.yamlsource import KeyPath, LineMap
from squadron.domain.repo_config.constants import AGENTS_DIR, APPROVAL_FLOWS_FILE, CONFIG_FILE
from squadron.domain.repo_config.models import (
    AgentDefinition,
    ApprovalFlow,
    ApprovalFlowsFile,
    BranchRule,
    RepoConfig,
)


def check_config_references(
    ctx: ParseContext,
    config: RepoConfig,
    agents: Mapping[str, AgentDefinition],
    lines: LineMap,
    directory: RoleDirectory,
) -> None:
    rel = CONFIG_FILE
    roles = config.roles

    def refer(path: KeyPath, role: str, *, kinds: tuple[str, ...] = ()) -> None:
        found = roles.get(role)
        if found is None and role in directory.roles:
            return  # written, but refused by the schema: its own problem says why
        if found is None:
            ctx.add(rel, lines.line_of(path), path, f"unknown role {role!r}{did_you_mean(role, roles)}")
        elif kinds and found.kind not in kinds:
            ctx.add(
                rel,
                lines.line_of(path),
                path,
                f"role {role!r} is a {found.kind} role, not {' or '.join(kinds)}",
            )

    pm_roles = [name for name, kind in directory.roles.items() if kind == "pm"]
    if len(pm_roles) != 1:
        ctx.add(
            rel,
            lines.line_of(("roles",)),
            ("roles",),
            f"exactly one role must be of kind pm (found {len(pm_roles)})",
        )
    for name, role in roles.items():
        agent_name = role.agent or name
        if agent_name not in agents:
            path: KeyPath = ("roles", name, "agent") if role.agent else ("roles", name)
            ctx.add(
                rel,
                lines.line_of(path),
                path,
                f"no agent definition {agent_name!r} ({AGENTS_DIR}/{agent_name}.md){did_you_mean(agent_name, agents)}",
            )
    refer(("default_dev_role",), config.default_dev_role, kinds=("dev",))
    for name, label in config.labels.items():
        if label.role is not None:
            refer(("labels", name, "role"), label.role, kinds=("dev",))
    for name in config.branch_naming.roles:
        refer(("branch_naming", "roles", name), name)
    for label_name in config.branch_naming.labels:
        if label_name not in config.labels:
            path = ("branch_naming", "labels", label_name)
            ctx.add(
                rel,
                lines.line_of(path),
                path,
                f"unknown label {label_name!r}{did_you_mean(label_name, config.labels)}",
            )
    for name in config.circuit_breakers.roles:
        refer(("circuit_breakers", "roles", name), name)
    for name in config.runtime.max_concurrent_per_role:
        refer(("runtime", "max_concurrent_per_role", name), name)
    for index, who in enumerate(config.escalation.notify):
        check_principal(
            ctx, rel, ("escalation", "notify", index), who, directory=directory, lines=lines, humans_only=True
        )


def check_flow_references(
    ctx: ParseContext, flows: ApprovalFlowsFile, lines: LineMap, directory: RoleDirectory
) -> None:
    for path, who, humans_only in _flow_principals(flows):
        check_principal(
            ctx, APPROVAL_FLOWS_FILE, path, who, directory=directory, lines=lines, humans_only=humans_only
        )


def check_principal(
    ctx: ParseContext,
    rel: str,
    path: KeyPath,
    who: str,
    *,
    directory: RoleDirectory,
    lines: LineMap,
    humans_only: bool,
) -> None:
    kind, _, name = who.partition(":")
    line = lines.line_of(path)
    if kind == "agent":
        role_kind = directory.roles.get(name, "")
        if humans_only:
            ctx.add(
                rel,
                line,
                path,
                f"{who!r}: only humans are notified (human_group:<group> or user:<login>)",
            )
        elif name not in directory.roles:
            ctx.add(rel, line, path, f"unknown role {name!r}{did_you_mean(name, directory.roles)}")
        elif role_kind and role_kind != "review":
            ctx.add(rel, line, path, f"role {name!r} is a {role_kind} role; reviews need a review role")
    elif kind == "human_group" and name not in directory.human_groups:
        ctx.add(
            rel,
            line,
            path,
            f"unknown human group {name!r} (define it under human_groups in {CONFIG_FILE})"
            + did_you_mean(name, directory.human_groups),
        )


@dataclass(frozen=True)
class RoleDirectory:
    """Role kinds and human group names, from the valid config or, if it is invalid, from its raw data."""

    roles: Mapping[str, str]
    human_groups: frozenset[str]

    @classmethod
    def of(cls, config: RepoConfig | None, raw: Any) -> RoleDirectory:
        if config is not None:
            return cls({n: r.kind for n, r in config.roles.items()}, frozenset(config.human_groups))
        raw = raw if isinstance(raw, dict) else {}
        roles = raw.get("roles") if isinstance(raw.get("roles"), dict) else {}
        groups = raw.get("human_groups") if isinstance(raw.get("human_groups"), dict) else {}
        kinds: dict[str, str] = {
            str(n): str(r.get("kind")) if isinstance(r, dict) and isinstance(r.get("kind"), str) else ""
            for n, r in roles.items()
        }
        return cls(kinds, frozenset(str(g) for g in groups))


def _flow_principals(flows: ApprovalFlowsFile) -> Iterator[tuple[KeyPath, str, bool]]:
    parts: list[tuple[KeyPath, ApprovalFlow | BranchRule]] = [(("default",), flows.default)]
    parts += [(("branch_rules", index), rule) for index, rule in enumerate(flows.branch_rules)]
    for prefix, flow in parts:
        for index, review in enumerate(flow.required_reviews or []):
            yield (*prefix, "required_reviews", index, "role"), review.role, False
        for p_index, protected in enumerate(flow.protected_paths or []):
            for index, review in enumerate(protected.required_reviews):
                yield (
                    (*prefix, "protected_paths", p_index, "required_reviews", index, "role"),
                    review.role,
                    False,
                )
        if flow.escalation is not None:
            for rule_name in ("on_ci_failure", "on_review_rejection", "on_timeout"):
                rule = getattr(flow.escalation, rule_name)
                for index, who in enumerate(rule.notify if rule is not None else []):
                    yield (*prefix, "escalation", rule_name, "notify", index), who, True
