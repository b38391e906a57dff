"""Per-repository configuration (and the routing policy derived from it), read from .squadron/.

The configuration on the default branch is re-checked at most every
``ttl`` (one contents-API call for the head commit; the parse itself is
cached per commit by :class:`~squadron.config.ConfigLoader`).

A repository whose configuration is invalid is **paused** (:mod:`squadron.domain.pause`):
its events are routed with its last valid policy — or the documented defaults if
it never had one — but nothing new starts; :meth:`PolicyCache.pause_reason` says
why. An invalid configuration is a handled outcome, cached per commit like any
other: its events are never retried for it and never reach the dead-letter queue,
and other repositories are not affected. With ``notices`` (the router's), the
repository is told through one issue, kept in step whenever the configuration's
validity or problems change (:mod:`squadron.domain.config_notice`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from squadron.config import ConfigError, ConfigLoader, Problem, with_bot_login
from squadron.config.parse import SquadronConfig, parse_files
from squadron.config.policy import routing_policy
from squadron.domain.config_notice import problems_digest
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy

logger = logging.getLogger(__name__)

DEFAULT_POLICY_TTL = timedelta(seconds=60)

#: Tells ``repo`` that its configuration at (``branch``, ``sha``) has ``problems`` (None: it is valid).
NoticeSink = Callable[[str, Sequence[Problem] | None, str, str], object]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Entry:
    config: SquadronConfig
    policy: RoutingPolicy
    checked_at: datetime
    branch: str = ""
    sha: str = ""
    #: The problems of the configuration now on the default branch, if it is invalid.
    problems: tuple[Problem, ...] | None = None

    @property
    def problem(self) -> str | None:
        return None if self.problems is None else str(ConfigError(self.problems))


class PolicyCache:
    """``event -> RoutingPolicy`` for :class:`~squadron.shell.router.RouterService`."""

    def __init__(
        self,
        loader: ConfigLoader,
        *,
        ttl: timedelta = DEFAULT_POLICY_TTL,
        clock: Callable[[], datetime] = _now,
        notices: NoticeSink | None = None,
    ) -> None:
        self._loader = loader
        self._ttl = ttl
        self._clock = clock
        self._notices = notices
        self._entries: dict[str, _Entry] = {}
        #: What each repository was last told (a problems digest, or "valid").
        self._told: dict[str, str] = {}
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

    def pause_reason(self, repo: str) -> str | None:
        """Why ``repo`` is paused (its default-branch configuration is invalid), or None."""
        entry = self._entry(repo)
        if entry.problems is None:
            return None
        count = len(entry.problems)
        return (
            f"the configuration on {entry.branch} at {entry.sha[:7]} is invalid "
            f"({count} problem{'s' if count != 1 else ''})"
        )

    def _entry(self, repo: str) -> _Entry:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(repo)
        if entry is not None and now - entry.checked_at < self._ttl:
            return entry
        branch, sha = self._loader.head(repo)
        try:
            config = self._loader.load_at(repo, sha)
            fresh = _Entry(config, routing_policy(config), now, branch, sha)
        except ConfigError as exc:
            config, policy = (entry.config, entry.policy) if entry is not None else self._defaults
            fresh = _Entry(config, policy, now, branch, sha, exc.problems)
            logger.error(
                "invalid .squadron configuration in %s at %s; paused, with the %s policy: %s",
                repo,
                sha,
                "last valid" if entry is not None else "default",
                exc,
            )
        with self._lock:
            self._entries[repo] = fresh
        self._tell(repo, fresh)
        return fresh

    def _tell(self, repo: str, entry: _Entry) -> None:
        """Tell the repository when its configuration's validity or problems changed."""
        if self._notices is None:
            return
        state = "valid" if entry.problems is None else problems_digest(entry.problems)
        with self._lock:
            if self._told.get(repo) == state:
                return
        try:
            self._notices(repo, entry.problems, entry.branch, entry.sha)
        except Exception:  # telling is never worth an event: the next check tries again
            logger.exception("could not update the configuration notice of %s", repo)
            return
        with self._lock:
            self._told[repo] = state

    def problem(self, repo: str) -> str | None:
        """Why ``repo``'s current configuration was refused, if it was."""
        with self._lock:
            entry = self._entries.get(repo)
        return entry.problem if entry is not None else None
