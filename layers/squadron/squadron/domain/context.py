"""The shared project context every agent's session starts with — pure.

Two parts, both read from the repository's default branch only (a branch or a pull request
cannot change what agents are told): the ``project`` section of ``.squadron/config.yaml`` and
``.squadron/context.md`` (at most ``MAX_CONTEXT_CHARS`` characters, refused beyond with a
precise problem like every other configuration file). Only people with write access change
the default branch, so this is the one text agents may treat as the project's own word.
"""

from __future__ import annotations

from squadron.domain.repo_config.models import ProjectConfig

HEADING = "## Project context (from the default branch's .squadron/)"


def shared_context(project: ProjectConfig, repo_full_name: str, context_md: str) -> str:
    """The context block a session starts with ("" when the repository says nothing)."""
    lines: list[str] = []
    name = project.name or repo_full_name.rsplit("/", maxsplit=1)[-1]
    if project.description.strip():
        lines.append(f"{name}: {project.description.strip()}")
    if context_md.strip():
        lines.append(context_md.strip())
    if not lines:
        return ""
    return "\n\n".join([HEADING, *lines])
