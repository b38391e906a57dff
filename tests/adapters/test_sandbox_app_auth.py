"""The sandbox answers the App's own endpoints as GitHub does: ``GET /app`` in the shape of GitHub's
``integration`` (its OpenAPI description), only for a JWT signed with the App's key and naming the
App's id, and ``GET /repos/{owner}/{repo}/installation`` only where the App is installed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from squadron.adapters.github.auth import app_jwt
from squadron.domain.app_manifest import app_events, app_permissions
from squadron.local import openapi
from squadron.local.sandbox import GitHubSandbox
from tests.support.github_openapi import spec

APP_ID = 4242


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


APP_KEY, OTHER_KEY = _key(), _key()
PUBLIC = (
    APP_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)


@pytest.fixture
def github(tmp_path: Path) -> Iterator[GitHubSandbox]:
    sandbox = GitHubSandbox(
        tmp_path, app_id=APP_ID, app_slug="acme-bot", webhook_secret="s", app_public_key=PUBLIC
    )
    sandbox.add_repository("octo/app", {"README.md": "hi\n"})
    sandbox.add_repository("octo/elsewhere", {"README.md": "hi\n"}).installed = False
    sandbox.start()
    yield sandbox
    sandbox.stop()


def _answer_schema(path: str) -> Any:
    """GitHub's 200 answer to GET ``path``, closed: no key GitHub does not describe."""
    schema = spec()["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return openapi.closed_schema(schema)  # the sandbox reads it so too


def _now() -> datetime:
    return datetime.now(UTC)


def _signed(claims: dict[str, Any], key: rsa.RSAPrivateKey = APP_KEY, algorithm: str = "RS256") -> str:
    return jwt.encode(claims, _pem(key), algorithm=algorithm)


def _claims(**change: Any) -> dict[str, Any]:
    now = int(_now().timestamp())
    return {"iat": now - 60, "exp": now + 540, "iss": str(APP_ID), **change}


TOKENS = [
    ("the-apps-own", lambda: app_jwt(APP_ID, _pem(APP_KEY), _now()), 200),
    ("another-apps-key", lambda: app_jwt(APP_ID, _pem(OTHER_KEY), _now()), 401),
    ("another-apps-id", lambda: app_jwt(5151, _pem(APP_KEY), _now()), 401),
    (
        "expired",
        lambda: _signed(_claims(iat=int(_now().timestamp()) - 1200, exp=int(_now().timestamp()) - 600)),
        401,
    ),
    ("lives-over-ten-minutes", lambda: _signed(_claims(exp=int(_now().timestamp()) + 3600)), 401),
    ("no-issuer", lambda: _signed({k: v for k, v in _claims().items() if k != "iss"}), 401),
    ("hmac-with-the-public-key", lambda: jwt.encode(_claims(), "not-the-key", algorithm="HS256"), 401),
    ("garbage-with-two-dots", lambda: "a.b.c", 401),
]


@pytest.mark.parametrize(("make", "status"), [row[1:] for row in TOKENS], ids=[row[0] for row in TOKENS])
def test_only_a_jwt_signed_with_the_apps_key_and_naming_its_id_gets_the_app(
    github: GitHubSandbox, make: Any, status: int
) -> None:
    answer = httpx.get(f"{github.base_url}/app", headers={"Authorization": f"Bearer {make()}"})
    assert answer.status_code == status, answer.text
    if status == 401:
        assert "id" not in answer.json()


def test_the_app_is_answered_in_githubs_shape_with_its_permissions_and_events(github: GitHubSandbox) -> None:
    token = app_jwt(APP_ID, _pem(APP_KEY), _now())
    answer = httpx.get(f"{github.base_url}/app", headers={"Authorization": f"Bearer {token}"}).json()
    jsonschema.validate(answer, _answer_schema("/app"))
    assert (answer["id"], answer["slug"]) == (APP_ID, "acme-bot")
    assert answer["permissions"] == app_permissions()
    assert answer["events"] == app_events()


def test_an_installation_is_found_only_where_the_app_is_installed(github: GitHubSandbox) -> None:
    headers = {"Authorization": f"Bearer {app_jwt(APP_ID, _pem(APP_KEY), _now())}"}
    found = httpx.get(f"{github.base_url}/repos/octo/app/installation", headers=headers)
    assert found.status_code == 200
    jsonschema.validate(found.json(), _answer_schema("/repos/{owner}/{repo}/installation"))
    assert found.json()["repository_selection"] == "selected"
    for name in ("octo/elsewhere", "octo/nowhere"):
        assert httpx.get(f"{github.base_url}/repos/{name}/installation", headers=headers).status_code == 404
    listed = httpx.post(
        f"{github.base_url}/app/installations/77/access_tokens", headers=headers, json={}
    ).json()["token"]
    repos = httpx.get(
        f"{github.base_url}/installation/repositories", headers={"Authorization": f"token {listed}"}
    ).json()
    assert [r["full_name"] for r in repos["repositories"]] == ["octo/app"]


def test_another_apps_key_gets_no_installation(github: GitHubSandbox) -> None:
    token = app_jwt(APP_ID, _pem(OTHER_KEY), _now() - timedelta(seconds=1))
    answer = httpx.get(
        f"{github.base_url}/repos/octo/app/installation", headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 401
