"""A repository's history: its committed domain events over a period, and how long they are kept — pure.

Every domain event a decision commits stays in the registry as its repository's history
(:meth:`squadron.ports.Registry.history`) for the stage's retention, ordered by the decision's
time and then the event's id. Retrospectives read it over a period ``[start, end)``: the start
belongs to the period, the end to the next one, so consecutive periods never count an event
twice nor drop one (:mod:`squadron.domain.retrospective` computes their figures).

Standard library only: the settings of every Lambda (the lean ingress's too) read the default
retention from here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from squadron.errors import SquadronError

if TYPE_CHECKING:
    from squadron.domain.domain_events import DomainEvent

#: How long a repository's committed events stay readable as its history, in days; each stage
#: may set its own (``SQUADRON_HISTORY_DAYS`` of the router, the CDK context's ``history_days``).
DEFAULT_HISTORY_DAYS = 120
#: Most events one history read returns by default (a week of a busy repository is far fewer).
MAX_HISTORY_EVENTS = 5000


class PeriodError(SquadronError, ValueError):
    """A period that is not ``[start, end)`` of two timezone-aware times, start not after end."""

    def __init__(self, start: datetime, end: datetime, problem: str) -> None:
        self.start = start
        self.end = end
        self.problem = problem
        super().__init__(f"period [{start.isoformat()}, {end.isoformat()}): {problem}")


def _naive(at: datetime) -> bool:
    return at.tzinfo is None or at.utcoffset() is None


def check_period(start: datetime, end: datetime) -> None:
    """Raise :class:`PeriodError` unless ``[start, end)`` names a period of instants.

    Both ends must carry a time zone (a naive time names no instant: where a week starts would
    depend on the machine's zone); ``start == end`` is an empty period.
    """
    naive = [name for name, at in (("start", start), ("end", end)) if _naive(at)]
    if naive:
        raise PeriodError(start, end, f"{' and '.join(naive)} must be timezone-aware")
    if start > end:
        raise PeriodError(start, end, "start is after end")


def utc_instant(at: datetime) -> datetime:
    """``at`` in UTC; a naive time is taken as UTC (the router's clock is UTC)."""
    return at.replace(tzinfo=UTC) if _naive(at) else at.astimezone(UTC)


def history_order(event: DomainEvent) -> tuple[datetime, str]:
    """The order of a repository's history: by the decision's time, then the event's id."""
    return utc_instant(event.time), event.id
