"""The routing policy of a repository, derived from its configuration — pure."""

from __future__ import annotations

from squadron.config.default_pipelines import default_pipelines
from squadron.config.parse import SquadronConfig
from squadron.domain.agents import RoleKind
from squadron.domain.orchestration import effective_pipelines
from squadron.domain.repo_config.flows import agent_review_roles
from squadron.domain.repo_config.models import RepoConfig
from squadron.domain.routing import RoutingPolicy


def routing_policy(config: SquadronConfig) -> RoutingPolicy:
    """What routing needs to know of ``config``: roles, labels, branch names, reviewers, limits.

    Review roles are the auto-assigned ``agent:<role>`` reviews of the default flow,
    plus per base-branch pattern those its rules add; only roles of kind ``review``
    are started as reviewers (a flow naming another kind is a configuration error
    caught when the files are parsed).
    """
    repo = config.config
    kinds = {name: RoleKind(role.kind) for name, role in repo.roles.items()}
    pm_roles = [name for name, kind in kinds.items() if kind is RoleKind.PM]
    flows = config.approval_flows

    def reviewers(roles: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(role for role in roles if kinds.get(role) is RoleKind.REVIEW)

    default_reviewers = reviewers(agent_review_roles(flows.default.required_reviews))
    by_branch = tuple(
        (rule.pattern, extra)
        for rule in flows.branch_rules
        if (
            extra := tuple(
                r
                for r in reviewers(agent_review_roles(rule.required_reviews or ()))
                if r not in default_reviewers
            )
        )
    )
    return RoutingPolicy(
        bot_login=repo.bot_login,
        pm_role=pm_roles[0] if pm_roles else "pm",
        pm_mentions=tuple(repo.pm_mentions),
        default_dev_role=repo.default_dev_role,
        label_roles=repo.label_roles(),
        role_kinds=kinds,
        branch_templates=dict(repo.branch_naming.roles),
        label_branch_templates=dict(repo.branch_naming.labels),
        default_branch_template=repo.branch_naming.default,
        review_roles=default_reviewers,
        branch_review_roles=by_branch,
        max_issue_depth=repo.max_issue_depth,
        escalation_label=repo.escalation.label,
        escalation_assignees=tuple(repo.escalation.assign),
        escalation_issue=repo.escalation.create_issue,
        escalation_mentions=tuple(_mentions(repo)),
        flows=flows,
        human_groups={name: tuple(group.members) for name, group in repo.human_groups.items()},
        issue_budget_usd=repo.issue_budget_usd,
        prices=repo.pricing,
        dashboard=repo.dashboard,
        memory=repo.memory,
        retrospective=repo.retrospective,
        triage=repo.triage,
        pipelines=effective_pipelines(repo.pipelines, default_pipelines(), repo.orchestration),
        orchestration=repo.orchestration,
    )


def _mentions(repo: RepoConfig) -> list[str]:
    """``@login`` of everyone escalation.notify names (groups expanded), each once, in order."""
    logins: list[str] = []
    for principal in repo.escalation.notify:
        kind, _, name = str(principal).partition(":")
        members = (
            repo.human_groups[name].members if kind == "human_group" and name in repo.human_groups else [name]
        )
        logins += [f"@{login}" for login in members if f"@{login}" not in logins]
    return logins
