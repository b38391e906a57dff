"""Which issues someone with write access vouched for — pure. No confused deputies.

The PM reads strangers' issues by design (triage is its job), so anything it does may be a
stranger's doing: a hijacked PM is a deputy with the App's rights. The router cannot know what
the PM read before it acted, so what the PM (or an agent's blocker issue) does reaches only
issues a writer stood behind. An issue is *vouched* for when someone with write access:

- opened it (its author's permission is asked when the router hears of it),
- assigned the App to it (that assignment starts its agent at once), or
- added the approval label (``triage.approval_label``) to it;

or when an agent working on a vouched issue filed it (its blocker issue): what an agent files
is as trusted as the issue it works for. The router records the vouch (``VouchIssue``); an issue
stays vouched. With ``triage.trust: everyone`` every issue is (for repositories where everyone
who can open an issue is trusted).

What needs a vouched issue:

- a dev agent starts only on one: the PM's assignment of an issue nobody vouched for is
  recorded and waits; a writer's approval label then starts the agent;
- the PM's acts across issues: registering one issue as blocked by another (both), publishing
  an artifact into an issue's brief;
- an agent's blocker issue is vouched only when the agent's own issue is.

The PM may still triage, label and comment on any issue: none of that starts work.
"""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.app_acts import is_app
from squadron.domain.authority import WRITE_PERMISSIONS
from squadron.domain.repo_config.models import TriageConfig

#: Who vouched for every issue where the repository trusts everyone.
EVERYONE = "everyone (triage.trust)"


def voucher(vouched_by: str | None, triage: TriageConfig) -> str | None:
    """Who vouched for an issue (``vouched_by`` as the registry holds it); None: nobody yet."""
    if triage.trust == "everyone":
        return EVERYONE
    return vouched_by


def is_writer(login: str | None, permissions: Mapping[str, str], bot_login: str) -> bool:
    """``login`` is a person (no bot, not the App) whose repository permission is write or more."""
    if not login or is_app(login, bot_login) or login.endswith("[bot]"):
        return False
    return permissions.get(login) in WRITE_PERMISSIONS


def waits(number: int, triage: TriageConfig) -> str:
    """Why an act on issue ``number`` waits (what a writer does to approve it)."""
    return (
        f"no one with write access vouched for #{number}: it waits until one opens it, assigns the App "
        f"to it or adds the label '{triage.approval_label}'"
    )
