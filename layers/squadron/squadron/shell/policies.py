"""Per-repository configuration (and the routing policy derived from it), read from .squadron/.

The configuration on the default branch is re-checked at most every
``ttl`` (one contents-API call for the head commit; the parse itself is
cached per commit by :class:`~squadron.config.ConfigLoader`). A repository
whose configuration is invalid keeps routing with its last valid policy — or
the documented defaults if it never had one — and the problem is logged with
every file, key and line, so one typo never stops a team's agents.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from squadron.config import ConfigError, ConfigLoader, with_bot_login
from squadron.config.parse import SquadronConfig, parse_files
from squadron.config.policy import routing_policy
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy

logger = logging.getLogger(__name__)

DEFAULT_POLICY_TTL = timedelta(seconds=60)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Entry:
    config: SquadronConfig
    policy: RoutingPolicy
    checked_at: datetime
    #: The problem of the configuration now on the default branch, if it is invalid.
    problem: str | None = None


class PolicyCache:
    """``event -> RoutingPolicy`` for :class:`~squadron.shell.router.RouterService`."""

    def __init__(
        self,
        loader: ConfigLoader,
        *,
        ttl: timedelta = DEFAULT_POLICY_TTL,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._loader = loader
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        defaults = with_bot_login(parse_files({}), loader.bot_login)
        self._defaults = (defaults, routing_policy(defaults))

    def __call__(self, event: EventEnvelope) -> RoutingPolicy:
        return self.policy_for(event.repository.full_name)

    def policy_for(self, repo: str) -> RoutingPolicy:
        return self._entry(repo).policy

    def config_for(self, repo: str) -> SquadronConfig:
        """The whole configuration behind ``repo``'s policy (approval flows, limits, groups)."""
        return self._entry(repo).config

    def _entry(self, repo: str) -> _Entry:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(repo)
        if entry is not None and now - entry.checked_at < self._ttl:
            return entry
        try:
            config = self._loader.load(repo)
            policy, problem = routing_policy(config), None
        except ConfigError as exc:
            config, policy = (entry.config, entry.policy) if entry is not None else self._defaults
            problem = str(exc)
            logger.error(
                "invalid .squadron configuration in %s; routing with the %s policy: %s",
                repo,
                "last valid" if entry is not None else "default",
                problem,
            )
        fresh = _Entry(config, policy, now, problem)
        with self._lock:
            self._entries[repo] = fresh
        return fresh

    def problem(self, repo: str) -> str | None:
        """Why ``repo``'s current configuration was refused, if it was."""
        with self._lock:
            entry = self._entries.get(repo)
        return entry.problem if entry is not None else None
