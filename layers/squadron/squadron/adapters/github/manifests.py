"""The manifest flow's exchange: ``POST /app-manifests/{code}/conversions`` (no authentication).

The code works once, within an hour of GitHub's redirect. A request that never reached GitHub
(the connection failed) is tried again; anything else is not, since GitHub may have used the
code already. Failures are the transport's named errors, with GitHub's message; the code is
not repeated in them, nor is anything of the answer that is secret.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from squadron.adapters.github.errors import BY_STATUS, GitHubError, GitHubUnavailableError
from squadron.adapters.github.http import API_URL, rest_client
from squadron.domain.app_manifest import CreatedApp

SHOWN_PATH = "/app-manifests/{code}/conversions"


class ManifestConversions:
    """Exchanges manifest-flow codes for the Apps GitHub created, on one GitHub (its REST API)."""

    def __init__(
        self,
        *,
        base_url: str = API_URL,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        connect_retries: int = 2,
        timeout: float = 30.0,
    ) -> None:
        self.sleep = sleep
        self.connect_retries = connect_retries
        self._client = rest_client(base_url, transport=transport, timeout=timeout)

    def convert(self, code: str) -> CreatedApp:
        """The App ``code`` stands for, with its private key and secrets; a GitHubError otherwise."""
        path = f"/app-manifests/{quote(code, safe='')}/conversions"
        failures = 0
        while True:
            try:
                response = self._client.post(path)
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failures += 1
                if failures > self.connect_retries:
                    raise GitHubUnavailableError(
                        0, f"cannot connect to {self._client.base_url}: {exc}", method="POST", path=SHOWN_PATH
                    ) from exc
                self.sleep(2.0**failures)
            except httpx.TransportError as exc:
                raise GitHubUnavailableError(
                    0, f"network failure: {exc}", method="POST", path=SHOWN_PATH
                ) from exc
        if response.status_code >= 400:
            raise _error(response)
        try:
            return CreatedApp.model_validate(response.json())
        except ValueError as exc:  # not JSON, or not an App: name the fields, never their values
            missing = (
                ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors())
                if isinstance(exc, ValidationError)
                else "its body"
            )
            raise GitHubError(
                response.status_code,
                f"unexpected answer: not an App with its secrets ({missing})",
                method="POST",
                path=SHOWN_PATH,
            ) from None  # the validation error quotes the answer, private key included

    def close(self) -> None:
        self._client.close()


def _error(response: httpx.Response) -> GitHubError:
    try:
        body = response.json()
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    kind = GitHubUnavailableError if response.status_code >= 500 else BY_STATUS.get(response.status_code)
    return (kind or GitHubError)(
        response.status_code,
        str(body.get("message") or response.reason_phrase),
        method="POST",
        path=SHOWN_PATH,
        documentation_url=body.get("documentation_url"),
        errors=body.get("errors") if isinstance(body.get("errors"), list) else None,
    )
