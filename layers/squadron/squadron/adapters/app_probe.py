"""What `squadron doctor` asks GitHub as the App: who it is, where it is installed, its webhook.

Every request carries an RS256 JWT signed with the private key the stack holds and ``iss`` the
configured App id, so GitHub's answer proves the key, the id and the App's settings together
(:mod:`squadron.domain.app_check` judges them). What cannot be asked raises PreflightError.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import jwt

from squadron.adapters.github.auth import app_jwt
from squadron.adapters.preflight import PreflightError
from squadron.domain.app_check import AppSeen, DeliverySeen

TIMEOUT_SECONDS = 10
#: The App's latest webhook deliveries the doctor reads (newest first).
DELIVERIES = 10


class AppRefused(PreflightError):
    """GitHub refused the App's JWT (401): the key is not the App's, or the id is another's."""


class AppProbe:
    def __init__(
        self,
        *,
        api_url: str,
        app_id: str,
        private_key: str,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.app_id = app_id
        try:
            self._jwt = app_jwt(int(app_id), private_key, datetime.now(UTC))
        except (ValueError, TypeError, jwt.PyJWTError) as exc:  # not a PEM key jwt can sign with
            raise PreflightError(f"cannot sign the App's JWT with the stored key: {exc}") from exc
        self._client = httpx.Client(
            base_url=api_url.rstrip("/"),
            timeout=TIMEOUT_SECONDS,
            transport=transport,
            headers={
                "Authorization": f"Bearer {self._jwt}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "squadron-doctor",
            },
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> AppProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _get(self, path: str, *, absent_ok: bool = False, **params: Any) -> Any:
        try:
            answer = self._client.get(path, params=params or None)
        except httpx.HTTPError as exc:
            raise PreflightError(f"GET {path}: {exc or type(exc).__name__}") from exc
        if answer.status_code == 404 and absent_ok:
            return None
        if answer.status_code == 401:
            raise AppRefused(f"401 {_message(answer)}")
        if answer.status_code >= 400:
            raise PreflightError(f"GET {path}: {answer.status_code} {_message(answer)}")
        try:
            return answer.json()
        except ValueError as exc:
            raise PreflightError(f"GET {path}: not JSON") from exc

    def app(self) -> AppSeen:
        data = self._get("/app")
        return AppSeen(
            id=str(data.get("id")),
            slug=str(data.get("slug")),
            permissions=dict(data.get("permissions") or {}),
            events=list(data.get("events") or []),
        )

    def installation(self, repository: str) -> dict[str, Any] | None:
        """The App's installation on ``owner/name`` (None: not installed there)."""
        owner, _, name = repository.partition("/")
        data = self._get(f"/repos/{owner}/{name}/installation", absent_ok=True)
        return dict(data) if isinstance(data, dict) else None

    def hook(self) -> dict[str, Any]:
        return dict(self._get("/app/hook/config"))

    def deliveries(self) -> list[DeliverySeen]:
        data = self._get("/app/hook/deliveries", per_page=DELIVERIES)
        return [
            DeliverySeen(
                event=str(d.get("event")),
                status_code=int(d.get("status_code") or 0),
                delivered_at=str(d.get("delivered_at")),
            )
            for d in data or []
        ]


def _message(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("message") or "")
    except (ValueError, AttributeError):
        return answer.text[:200]
