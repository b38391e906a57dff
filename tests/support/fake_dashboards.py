"""Fakes of the dashboards' ports: the slots (as DynamoDB keeps them, see the contract test), a
queue whose delays run on a simulated clock, and one repository's issues on GitHub."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.domain_events import SOURCE, DomainEvent
from squadron.ports import RenderClaim

BOT = "squadron[bot]"


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


@dataclass
class FakeDashboardSlots:
    """repo id -> (last rendering, deferred rendering due), in epoch milliseconds like DynamoDB's."""

    rendered: dict[int, int] = field(default_factory=dict)
    deferred: dict[int, int] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)

    def claim(self, repo_id: int, now: datetime, cutoff: datetime) -> RenderClaim:
        self.calls["claim"] += 1
        last = self.rendered.get(repo_id)
        if last is not None and last > _ms(cutoff):
            return RenderClaim(False, datetime.fromtimestamp(last / 1000, now.tzinfo))
        self.rendered[repo_id] = _ms(now)
        self.deferred.pop(repo_id, None)
        return RenderClaim(
            True, now, None if last is None else datetime.fromtimestamp(last / 1000, now.tzinfo)
        )

    def release(self, repo_id: int, claimed_at: datetime, previous: datetime | None) -> None:
        self.calls["release"] += 1
        if self.rendered.get(repo_id) != _ms(claimed_at):
            return
        if previous is None:
            del self.rendered[repo_id]
        else:
            self.rendered[repo_id] = _ms(previous)

    def defer(self, repo_id: int, until: datetime, now: datetime, *, again: bool = False) -> bool:
        self.calls["defer"] += 1
        marked = self.deferred.get(repo_id)
        if not again and marked is not None and marked >= _ms(now):
            return False
        self.deferred[repo_id] = _ms(until)
        return True


@dataclass
class SimulatedQueue:
    """The dashboards queue on a simulated clock: a request is visible ``delay_seconds`` after it
    was queued (SQS's DelaySeconds), and received in the order it becomes visible."""

    clock: Any  # () -> datetime
    waiting: list[tuple[datetime, int, RefreshRequest]] = field(default_factory=list)
    sent: list[tuple[datetime, int, RefreshRequest]] = field(default_factory=list)
    _order: Iterator[int] = field(default_factory=itertools.count)

    def request(self, request: RefreshRequest, *, delay_seconds: int = 0) -> None:
        assert 0 <= delay_seconds <= 900, delay_seconds  # SQS's bounds
        RefreshRequest.model_validate_json(request.message())  # it travels as its message
        entry = (self.clock() + timedelta(seconds=delay_seconds), next(self._order), request)
        self.waiting.append(entry)
        self.sent.append(entry)

    def request_all(self, requests: Sequence[RefreshRequest]) -> None:
        for request in requests:
            self.request(request)

    def put(self, request: RefreshRequest, at: datetime) -> None:
        """A request the bus's rule delivers at ``at`` (no delay)."""
        self.waiting.append((at, next(self._order), request))

    def next_visible(self) -> datetime | None:
        return min((at for at, _, _ in self.waiting), default=None)

    def receive(self, until: datetime) -> list[RefreshRequest]:
        """Every request visible at ``until``, oldest first (removed)."""
        ready = sorted(entry for entry in self.waiting if entry[0] <= until)
        self.waiting = [entry for entry in self.waiting if entry[0] > until]
        return [request for _, _, request in ready]


def bus_message(event: DomainEvent, stage: str = "test") -> str:
    """``event`` as the bus's rule delivers it to the dashboards queue (the whole EventBridge event)."""
    return json.dumps(
        {
            "version": "0",
            "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
            "detail-type": event.detail_type,
            "source": SOURCE,
            "account": "123456789012",
            "time": event.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-east-1",
            "resources": [],
            "detail": event.published(stage).detail(),
        }
    )


@dataclass
class DashboardGitHub:
    """One repository's issues as the dashboards see them: what the App opened, and each edit."""

    repo: str = "octo/repo"
    installation: int | None = 77
    opened: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: (number, body) of every creation and edit, in order.
    writes: list[tuple[int, str]] = field(default_factory=list)
    listings: int = 0

    def reader(self, installation_id: int | None, repo: str) -> DashboardGitHub:
        assert (installation_id, repo) == (self.installation, self.repo), (installation_id, repo)
        return self

    def list_issues(
        self, *, labels: Iterable[str] = (), state: str = "open", limit: int = 100
    ) -> list[dict[str, Any]]:
        self.listings += 1
        wanted = set(labels)
        return [
            issue
            for _, issue in sorted(self.opened.items(), reverse=True)
            if wanted <= {label["name"] for label in issue["labels"]} and state in ("all", issue["state"])
        ][:limit]

    def create_issue(
        self, title: str, body: str, *, labels: Iterable[str] = (), assignees: Iterable[str] = ()
    ) -> dict[str, Any]:
        number = 500 + len(self.opened)
        self.opened[number] = {
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "labels": [{"name": name} for name in labels],
            "user": {"login": BOT, "type": "Bot"},
        }
        self.writes.append((number, body))
        return self.opened[number]

    def update_issue(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> dict[str, Any]:
        if body is not None:
            self.opened[number]["body"] = body
            self.writes.append((number, body))
        return self.opened[number]

    @property
    def body(self) -> str:
        (issue,) = self.opened.values()
        return str(issue["body"])
