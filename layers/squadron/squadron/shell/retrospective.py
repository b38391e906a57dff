"""A retrospective, held: the figures computed from the repository's history, its issue opened,
its period recorded, and its issue handed to the retrospective role's agent.

The router carries out an :class:`~squadron.domain.effects.OpenRetrospective` here, after the
decision that asked for it was committed. Everything it does is keyed by the effect: a retry
finds the issue it opened (by its hidden marker) instead of opening another, records the same
period, and hands the issue over under the same delivery id (events.fifo drops the repeat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from squadron.domain.commands import AgentAssignedIssue
from squadron.domain.cost import PriceTable
from squadron.domain.effects import OpenRetrospective
from squadron.domain.event_fields import IssueFields
from squadron.domain.events import command_envelope
from squadron.domain.retrospective import (
    CONTEXT,
    LABEL,
    MAX_ACTION_ITEMS,
    RetroRecord,
    follow_up,
    issue_body,
    period,
    title,
)
from squadron.domain.retrospective_figures import compute_figures
from squadron.ports import EventQueue, RetroStore, RouterGitHub
from squadron.registry_ports import History

logger = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


class Retrospectives:
    def __init__(
        self,
        *,
        history: History,
        store: RetroStore,
        github: RouterGitHub,
        queue: EventQueue,
        bot_login: str,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.history = history
        self.store = store
        self.github = github
        self.queue = queue
        self.bot_login = bot_login
        self.clock = clock

    def previous(self, repo_id: int, before: datetime) -> RetroRecord | None:
        """The latest retrospective whose period ended by ``before``."""
        earlier = [r for r in self.store.retrospectives(repo_id) if r.window_end <= before]
        return max(earlier, key=lambda r: (r.window_end, r.issue_number), default=None)

    def open(
        self, effect: OpenRetrospective, key: str, look_since: datetime | None, prices: PriceTable
    ) -> int:
        """Hold the retrospective ``effect`` asks for; its issue's number."""
        repo, inst = effect.repo_full_name, effect.installation_id
        previous = self.previous(effect.repo_id, effect.window_end)
        start, end = period(
            effect.window_end, start=effect.window_start, previous=previous, days=effect.window_days
        )
        events = self.history.history(effect.repo_id, start - CONTEXT, end)
        figures = compute_figures(events, start, end, prices)
        items = previous.items[:MAX_ACTION_ITEMS] if previous is not None else ()
        states = {item.number: self.github.issue_state(inst, repo, item.number) for item in items}
        body = issue_body(
            figures,
            trigger=effect.trigger,
            previous=previous,
            follow=follow_up(items, states),
            milestone=effect.milestone_title,
        )
        name = title(start, end, effect.milestone_title)
        found = (
            self.github.find_issue(inst, repo, key, (LABEL,), look_since) if look_since is not None else None
        )
        number = (
            found
            if found is not None
            else self.github.create_issue(
                inst, repo, title=name, body=body, labels=(LABEL,), assignees=(), key=key
            )
        )
        record = RetroRecord(
            repo_id=effect.repo_id,
            repo_full_name=repo,
            issue_number=number,
            window_start=start,
            window_end=end,
            trigger=effect.trigger,
            milestone_number=effect.milestone_number,
            milestone_title=effect.milestone_title,
            opened_at=self.clock(),
        )
        if not any(r.issue_number == number for r in self.store.retrospectives(effect.repo_id)):
            self.store.put_retrospective(record, None)
        # The App's own issue webhooks are dropped at the ingress: the router hears of the issue,
        # as the App's assignment, from here; its label routes it to the retrospective role.
        issue = IssueFields(
            number=number, title=name, body="", state="open", labels=(LABEL,), author=self.bot_login
        )
        self.queue.send(
            command_envelope(
                AgentAssignedIssue(issue=issue),
                repository={"id": effect.repo_id, "full_name": repo, "default_branch": None},
                installation_id=inst,
                delivery_id=f"cmd-retro-{key}",
                now=self.clock(),
            )
        )
        logger.info(
            "retrospective of %s (%s to %s, %s) opened as #%s: %d events",
            repo,
            start,
            end,
            effect.trigger,
            number,
            figures.events,
        )
        return number
