"""Rendering an agent's system prompt and wake prompt from its role's definition — pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from squadron.config.parse import ResolvedRole, SquadronConfig
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.authority import Authority


@dataclass(frozen=True)
class IssueFacts:
    """What the host read about the agent's issue and repository before starting."""

    #: The issue's title if a person with write access wrote it or vouched for it, else "".
    title: str = ""
    url: str = ""
    default_branch: str = "main"
    base_branch: str = "main"
    #: A reviewer's pull request head commit ("" for other roles).
    head_sha: str = ""
    #: The author of a reviewer's pull request when they have no write access (None: a writer's,
    #: the App's, or no pull request): their commits' messages reach the agent by their trust.
    head_author: Authority | None = None


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


def prompt_values(
    config: SquadronConfig, role: ResolvedRole, agent: AgentRecord, facts: IssueFacts
) -> dict[str, Any]:
    """Every documented placeholder's value (see squadron.domain.repo_config.constants.PROMPT_PLACEHOLDERS)."""
    repo = config.config
    limits = role.limits
    return {
        "project_name": repo.project.name or agent.repo_full_name.split("/")[-1],
        "project_description": repo.project.description,
        "repo_full_name": agent.repo_full_name,
        "default_branch": facts.default_branch,
        "role": agent.role,
        "agent_id": agent.display_name,
        "bot_login": repo.bot_login,
        "issue_number": "" if agent.issue_number is None else agent.issue_number,
        "issue_title": facts.title,
        "issue_url": facts.url,
        "branch_name": agent.branch or "",
        "base_branch": facts.base_branch,
        "pr_number": "" if agent.pr_number is None else agent.pr_number,
        "labels": "\n".join(f"{name}: {label.description}" for name, label in repo.labels.items()),
        "roles": "\n".join(f"{name} ({r.kind}): {r.description}" for name, r in repo.roles.items()),
        "human_groups": "\n".join(f"{name}: {', '.join(g.members)}" for name, g in repo.human_groups.items()),
        "needs_human_label": repo.escalation.label,
        "max_issue_depth": repo.max_issue_depth,
        "max_iterations": limits.max_iterations,
        "max_tool_calls": limits.max_tool_calls,
        "max_turns": limits.max_turns,
        "max_active_duration": _duration(limits.max_active_duration),
    }


def system_prompt(role: ResolvedRole, values: Mapping[str, Any]) -> str:
    return role.agent.prompt.format_map(values)


def start_prompt(agent: AgentRecord, facts: IssueFacts) -> str:
    if agent.issue_number is None:
        return "New events are waiting for you: call check_for_events and handle each of them."
    # The title only when trusted (IssueFacts): read_issue shows the rest by its authors' trust.
    title = f': "{facts.title}"' if facts.title else ""
    return (
        f"Start on issue #{agent.issue_number}{title}. Call check_for_events first for "
        "anything already said about it."
    )


def wake_prompt(
    role: ResolvedRole,
    values: Mapping[str, Any],
    *,
    reason: str,
    events: Iterable[InboxItem],
    resolved_blockers: Iterable[int],
) -> str:
    lines = [f"- {item.summary}" + (f": {item.body}" if item.body else "") for item in events]
    return role.wake_prompt.format_map(
        {
            **values,
            "wake_reason": reason,
            "wake_events": "\n".join(lines) or "(none)",
            "resolved_blockers": ", ".join(f"#{n}" for n in sorted(resolved_blockers)) or "(none)",
        }
    )
