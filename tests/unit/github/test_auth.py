"""App JWT and installation tokens: claims, caching and refresh timing on a frozen clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from squadron.adapters.errors import SecretUnavailableError
from squadron.adapters.github.auth import GitHubApp, app_jwt
from squadron.adapters.github.http import GitHubHttp
from tests.support.github_fake import FakeGitHub, app_private_key

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
EXPIRY = "2026-11-23T13:00:00Z"  # the tokens these tests get expire an hour after T0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _app(fake: FakeGitHub, clock: Clock) -> GitHubApp:
    private, _ = app_private_key()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    return GitHubApp(app_id=42, http=http, private_key=lambda: private, clock=clock)


def test_app_jwt_claims_follow_github_rules() -> None:
    private, public = app_private_key()
    token = app_jwt(42, private, T0)
    assert jwt.get_unverified_header(token) == {"alg": "RS256", "typ": "JWT"}
    claims = jwt.decode(
        token, public, algorithms=["RS256"], options={"verify_exp": False, "verify_iat": False}
    )
    assert claims == {
        "iss": "42",
        "iat": int((T0 - timedelta(seconds=60)).timestamp()),
        "exp": int((T0 + timedelta(minutes=9)).timestamp()),
    }
    assert claims["exp"] - claims["iat"] <= 600


@pytest.mark.parametrize(
    ("later", "fetches"),
    [
        (timedelta(minutes=0), 1),
        (timedelta(minutes=54), 1),
        (timedelta(minutes=55), 2),  # exactly 5 minutes left: refreshed
        (timedelta(minutes=56), 2),
        (timedelta(hours=2), 2),
    ],
    ids=["at once", "54 min: reused", "55 min: refreshed", "56 min: refreshed", "expired: refreshed"],
)
def test_installation_tokens_are_cached_until_five_minutes_before_expiry(
    later: timedelta, fetches: int
) -> None:
    fake, clock = FakeGitHub(token_expiry=EXPIRY), Clock()
    app = _app(fake, clock)
    first = app.installation_token(7)
    clock.now = T0 + later
    second = app.installation_token(7)
    assert second.token == first.token == "ghs_7"
    assert len(fake.requests) == fetches
    request = fake.requests[0]
    assert request.url.path == "/app/installations/7/access_tokens"
    assert request.headers["authorization"].startswith("Bearer ey")  # the App JWT


def test_narrowed_tokens_are_separate_and_say_what_they_cover() -> None:
    fake, clock = FakeGitHub(token_expiry=EXPIRY), Clock()
    app = _app(fake, clock)
    app.installation_token(7)
    narrowed = app.installation_token(7, repositories=("octo/app",), permissions={"issues": "write"})
    app.installation_token(7, repositories=("octo/app",), permissions={"issues": "write"})  # cached
    assert len(fake.requests) == 2
    assert fake.requests[0].content == b""
    assert json.loads(fake.requests[1].content) == {
        "repositories": ["app"],
        "permissions": {"issues": "write"},
    }
    assert narrowed.repositories == ("octo/app",)


def test_keys_and_tokens_never_print() -> None:
    fake, clock = FakeGitHub(token_expiry=EXPIRY), Clock()
    app = _app(fake, clock)
    token = app.installation_token(7)
    private, _ = app_private_key()
    for shown in (repr(app), repr(token), str(token)):
        assert "ghs_7" not in shown
        assert "PRIVATE KEY" not in shown
    assert private not in repr(vars(app).get("_private_key"))


class Secrets:
    """A SecretSource holding the App key; counts reads."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.reads: list[str] = []

    def get(self, secret_id: str) -> str:
        self.reads.append(secret_id)
        if secret_id not in self.values:
            raise SecretUnavailableError(f"secret {secret_id} cannot be read")
        return self.values[secret_id]


def test_the_key_comes_from_the_secret_store_when_first_needed() -> None:
    private, public = app_private_key()
    secrets, fake = Secrets({"squadron/app-key": private}), FakeGitHub(token_expiry=EXPIRY)
    app = GitHubApp.from_secret(
        app_id=42,
        http=GitHubHttp(transport=fake.transport(), sleep=lambda s: None),
        secrets=secrets,
        secret_id="squadron/app-key",
        clock=Clock(),
    )
    assert secrets.reads == []
    claims = jwt.decode(
        app.jwt(), public, algorithms=["RS256"], options={"verify_exp": False, "verify_iat": False}
    )
    assert claims["iss"] == "42"
    assert secrets.reads == ["squadron/app-key"]
    assert "PRIVATE KEY" not in repr(app)


def test_an_unreadable_key_fails_before_any_request() -> None:
    fake = FakeGitHub(token_expiry=EXPIRY)
    app = GitHubApp.from_secret(
        app_id=42,
        http=GitHubHttp(transport=fake.transport(), sleep=lambda s: None),
        secrets=Secrets({}),
        secret_id="squadron/app-key",
        clock=Clock(),
    )
    with pytest.raises(SecretUnavailableError, match="squadron/app-key"):
        app.installation_token(7)
    assert fake.requests == []


def test_tokens_past_their_refresh_time_are_dropped_from_the_cache() -> None:
    fake, clock = FakeGitHub(token_expiry=EXPIRY), Clock()
    app = _app(fake, clock)
    for repo in ("octo/a", "octo/b", "octo/c"):
        app.installation_token(7, repositories=(repo,))
    assert repr(app) == "GitHubApp(app_id=42, tokens cached=3)"
    clock.now = T0 + timedelta(minutes=56)
    app.installation_token(7, repositories=("octo/a",))
    assert repr(app) == "GitHubApp(app_id=42, tokens cached=1)"
