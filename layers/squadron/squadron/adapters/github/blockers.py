"""Whether an issue may be a blocker, as GitHub has it now: the one check the agent's
``report_blocked`` asks before it says anything and the agent gateway asks before it registers
the blocker (:func:`squadron.domain.write_policy.blocker_refusal` is the rule)."""

from __future__ import annotations

from typing import Any

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import NotFoundError
from squadron.domain.write_policy import blocker_refusal


def blocker_refused(client: GitHubClient, number: int) -> str | None:
    """Why #``number`` of ``client``'s repository cannot be a blocker (it does not exist, is a pull
    request, or is not open), or None. Any other failure to read it is raised
    (:class:`~squadron.adapters.github.errors.GitHubError`): never read as "not there"."""
    try:
        issue: dict[str, Any] | None = client.get_issue(number)
    except NotFoundError:
        issue = None
    return blocker_refusal(number, issue)
