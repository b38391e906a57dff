"""What the agent host reads from GitHub, by its author's trust (:mod:`squadron.domain.trust`).

The rule and the rendering are pure (domain); here GitHub is asked for the permissions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubError
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.authority import Authority
from squadron.domain.trust import Reads, authority_of, issue_text, reveal

Authors = Callable[[Mapping[str, Any] | None], Authority]


def authors(github: GitHubClient, bot_login: str) -> Authors:
    """The trust of a text's author (a GitHub user object), by the one authority rule.

    Make one per tool call or prompt: each login's permission is asked of GitHub once, and
    afresh the next time (a writer whose access was taken away is one no more).
    """
    asked: dict[str, str | None] = {}

    def permission(login: str) -> str | None:
        if login not in asked:
            try:
                asked[login] = github.collaborator_permission(login)
            except GitHubError:
                asked[login] = None  # unknown: no authority, the text is not shown as a writer's
        return asked[login]

    return lambda user: authority_of(user, bot_login=bot_login, permission=permission)


def vetted(items: Iterable[InboxItem], author: Authors, reads: Reads) -> list[InboxItem]:
    """Inbox items with every body nobody vetted (an issue opened by anyone) withheld or fenced
    unless its author has write access."""
    out: list[InboxItem] = []
    for item in items:
        if item.unvetted_author is None or not item.body:
            out.append(item)
            continue
        who = author({"login": item.unvetted_author})
        body = reveal(item.kind.replace("_", " ") + " text", item.body, who, reads)
        out.append(item.model_copy(update={"body": body, "unvetted_author": None}))
    return out


def prompt_title(github: GitHubClient, issue: Mapping[str, Any], agent: AgentRecord, bot_login: str) -> str:
    """The issue's title for the agent's prompts: a trusted one (a writer's, or the one a writer
    vouched for), else none — a prompt carries no fenced text."""
    title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
    author = authors(github, bot_login)(issue.get("user"))
    text = issue_text(title, body, author, agent.vouched, "writers")
    return text.title if text.title_trusted else ""
