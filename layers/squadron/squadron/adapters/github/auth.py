"""GitHub App authentication: the App JWT and per-installation access tokens.

The App's private key is read from Secrets Manager (through a SecretSource) when
first needed and never logged: the classes holding it or a token print without
it. Installation tokens last an hour; they are cached per (installation,
narrowing) and replaced once less than :data:`REFRESH_MARGIN` of their life is left.
A token can be narrowed to repositories and a subset of permissions — what an
agent task receives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import jwt

from squadron.adapters.github.http import GitHubHttp
from squadron.ports import SecretSource

JWT_BACKDATE = timedelta(seconds=60)  # GitHub: iat 60 s in the past against clock drift
JWT_LIFETIME = timedelta(minutes=9)  # GitHub: at most 10 minutes
REFRESH_MARGIN = timedelta(minutes=5)


def _now() -> datetime:
    return datetime.now(UTC)


def app_jwt(app_id: int, private_key_pem: str, now: datetime) -> str:
    """The App's RS256 JWT: ``iss`` the App id, issued 60 s ago, valid 9 more minutes."""
    claims = {
        "iat": int((now - JWT_BACKDATE).timestamp()),
        "exp": int((now + JWT_LIFETIME).timestamp()),
        "iss": str(app_id),
    }
    return jwt.encode(claims, private_key_pem, algorithm="RS256")


@dataclass(frozen=True)
class InstallationToken:
    token: str = field(repr=False)
    expires_at: datetime
    installation_id: int
    repositories: tuple[str, ...] = ()
    permissions: tuple[tuple[str, str], ...] = ()

    def fresh_at(self, now: datetime) -> bool:
        return self.expires_at - now > REFRESH_MARGIN


class GitHubApp:
    """Mints App JWTs and installation tokens (cached) for one GitHub App."""

    def __init__(
        self,
        *,
        app_id: int,
        http: GitHubHttp,
        private_key: Callable[[], str],
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.app_id = app_id
        self.http = http
        self._private_key = private_key
        self.clock = clock
        self._tokens: dict[tuple[int, tuple[str, ...], tuple[tuple[str, str], ...]], InstallationToken] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_secret(
        cls,
        *,
        app_id: int,
        http: GitHubHttp,
        secrets: SecretSource,
        secret_id: str,
        clock: Callable[[], datetime] = _now,
    ) -> GitHubApp:
        """The App whose PEM key is the secret ``secret_id`` (read on use, cached by the source)."""
        return cls(app_id=app_id, http=http, private_key=lambda: secrets.get(secret_id), clock=clock)

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.app_id}, tokens cached={len(self._tokens)})"

    def jwt(self) -> str:
        return app_jwt(self.app_id, self._private_key(), self.clock())

    def installation_token(
        self,
        installation_id: int,
        *,
        repositories: tuple[str, ...] = (),
        permissions: Mapping[str, str] | None = None,
    ) -> InstallationToken:
        """A token for ``installation_id``, narrowed to ``repositories`` (names) and ``permissions``."""
        key = (installation_id, tuple(sorted(repositories)), tuple(sorted((permissions or {}).items())))
        with self._lock:
            cached = self._tokens.get(key)
        now = self.clock()
        if cached is not None and cached.fresh_at(now):
            return cached
        body: dict[str, object] = {}
        if repositories:
            body["repositories"] = [name.split("/")[-1] for name in key[1]]
        if permissions:
            body["permissions"] = dict(key[2])
        response = self.http.request(
            "POST",
            f"/app/installations/{installation_id}/access_tokens",
            token=self.jwt(),
            throttle_key=f"app-{self.app_id}",
            json=body or None,
            # A second token is as good as the first; one whose answer was lost expires unused.
            idempotent=True,
        )
        data = response.json()
        token = InstallationToken(
            token=data["token"],
            expires_at=datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00")),
            installation_id=installation_id,
            repositories=key[1],
            permissions=key[2],
        )
        with self._lock:
            # Drop what can no longer be handed out, so many narrowings do not pile up.
            self._tokens = {k: t for k, t in self._tokens.items() if t.fresh_at(now)}
            self._tokens[key] = token
        return token
