"""The documented vocabulary of ``.squadron/``: file names, tool names, prompt placeholders.

These sets are the contract between a repository's configuration and the
framework: a tool or placeholder not listed here is a configuration error, so a
typo is caught by ``squadron validate`` instead of silently doing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: Where BYOK provider keys live in Secrets Manager: agent tasks may read secrets under this
#: prefix only, so a provider's ``api_key_secret`` names one (``squadron/byok/<name>``, or its ARN).
BYOK_SECRET_PREFIX = "squadron/byok/"  # noqa: S105 (a secret's name prefix, not a secret)

#: The directory holding a repository's configuration, relative to its root.
CONFIG_DIR = ".squadron"
CONFIG_FILE = "config.yaml"
AGENTS_DIR = "agents"
APPROVAL_FLOWS_FILE = "workflows/approval-flows.yaml"
#: The project's shared context: every agent's session starts with it (from the default branch).
CONTEXT_FILE = "context.md"

#: Custom tools the framework offers agents: the only bridge between an agent
#: session and Squadron (AD-017). Every GitHub action goes through them, so the
#: role-checked client sees it.
FRAMEWORK_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "check_for_events": "Read the events waiting in the agent's inbox.",
        "report_blocked": "Report that work cannot go on until other issues close; the agent sleeps.",
        "create_blocker_issue": "Open a new issue that blocks the current one, and register the edge.",
        "register_blocker": "Register an existing issue as a blocker of the current one.",
        "report_complete": "Report the assignment done (with the outputs a pipeline stage asks for); the agent's task ends.",
        "escalate_to_human": "Hand the issue to the humans (needs-human label, notification).",
        "open_pr": "Open a pull request from the agent's branch.",
        "git_push": "Push the agent's branch (only its own branch).",
        "comment": "Comment on the agent's issue or pull request.",
        "submit_review": "Submit a pull request review (review roles).",
        "post_status": "Post the role's commit status (squadron/<role>).",
        "read_issue": "Read an issue or pull request with its comments.",
        "read_pull_request": "Read the agent's pull request: description and every file's diff.",
        "label_issue": "Add labels of the label taxonomy to an issue.",
        "assign_issue": "Assign an issue to a dev role (its agent starts).",
        "create_issue": "Open a new issue.",
        "remember": "Propose a fact to the repository's memory, with the evidence that taught it.",
        "recall": "Search the repository's memory for facts the agent may see.",
        "publish_artifact": "Publish an artifact (e.g. the PM's plan for an issue tree) for other agents.",
        "read_artifact": "Read an artifact another agent produced (its read is recorded).",
        "propose_change_set": "Propose a change set across repositories of the installation (the PM only).",
    }
)

#: Built-in tools of the Copilot CLI that act on the task's host (shell, files).
#: They are never offered by default: an agent definition opts into each one
#: explicitly under ``host_tools``, because a prompt-injected shell can do
#: anything the task can.
HOST_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "bash": "Run shell commands in the working copy.",
        "view": "Read a file or list a directory.",
        "create": "Create a file.",
        "edit": "Edit a file in place.",
        "grep": "Search file contents.",
        "glob": "Find files by name pattern.",
    }
)

#: Placeholders an agent's system prompt (the Markdown body) may use. The agent
#: host fills them when it starts a session; write ``{{`` and ``}}`` for literal braces.
PROMPT_PLACEHOLDERS: Mapping[str, str] = MappingProxyType(
    {
        "project_name": "project.name from config.yaml.",
        "project_description": "project.description from config.yaml.",
        "repo_full_name": "The repository, as owner/name.",
        "default_branch": "The repository's default branch.",
        "role": "The agent's role name (feat-dev, pr-review...).",
        "agent_id": "The agent's short name, e.g. feat-dev-38.",
        "bot_login": "The App's bot login (bot_login in config.yaml).",
        "issue_number": "The issue the agent works on (empty for the PM).",
        "issue_title": "Its title.",
        "issue_url": "Its web address.",
        "branch_name": "The agent's working branch (branch_naming in config.yaml).",
        "base_branch": "The branch its pull request targets.",
        "pr_number": "The pull request under review or opened by the agent (empty if none).",
        "labels": "The label taxonomy, one 'name: description' per line.",
        "roles": "The configured roles, one 'name (kind): description' per line.",
        "human_groups": "The human groups and their members.",
        "needs_human_label": "escalation.label from config.yaml.",
        "max_issue_depth": "max_issue_depth from config.yaml.",
        "max_iterations": "The role's circuit-breaker limit on test/fix iterations.",
        "max_tool_calls": "The role's circuit-breaker limit on tool calls.",
        "max_turns": "The role's circuit-breaker limit on conversation turns.",
        "max_active_duration": "The role's limit on wall-clock time awake, e.g. '2h'.",
    }
)

#: Placeholders only the wake prompt may use, in addition to PROMPT_PLACEHOLDERS.
WAKE_PLACEHOLDERS: Mapping[str, str] = MappingProxyType(
    {
        "wake_reason": "Why the agent was woken (blocker closed, review submitted, comment...).",
        "wake_events": "The events waiting in the inbox, one summary per line.",
        "resolved_blockers": "The blocker issues that closed while the agent slept.",
    }
)

#: Placeholders a branch naming template may use; {issue_number} is required.
BRANCH_PLACEHOLDERS: frozenset[str] = frozenset({"issue_number", "role"})

#: Prefixes of a principal: who reviews, who is notified, who is assigned.
PRINCIPAL_KINDS: frozenset[str] = frozenset({"agent", "human_group", "user"})
