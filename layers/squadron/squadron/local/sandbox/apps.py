"""The App's own endpoints: installation tokens, the App itself, webhook deliveries and redelivery, its repositories.

An installation token acts as the App's ``<slug>[bot]``.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from squadron.local.sandbox import grants
from squadron.local.sandbox.base import ApiError, Delivery, Json, PagedObject, github_now
from squadron.local.sandbox.webhooks import WebhookOps


class AppOps(WebhookOps):
    def _op_apps__create_installation_access_token(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        if int(params["installation_id"]) != self.installation_id:
            raise ApiError(404, "Not Found")
        scope = self._narrowed(body.get("repositories") or [], body.get("repository_ids") or [])
        holds = grants.held(body.get("permissions"), self.installation_permissions)
        token = f"ghs_{secrets.token_hex(18)}"  # unguessable, as GitHub's are
        self.tokens[token] = self.bot_login
        self.token_permissions[token] = holds
        if scope:
            self.token_scopes[token] = scope
        return 201, {
            "token": token,
            "expires_at": datetime.fromtimestamp(time.time() + 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": holds,
            "repository_selection": "selected" if scope else "all",
        }

    def _narrowed(self, names: list[str], ids: list[int]) -> list[str]:
        """The full names a token is narrowed to (GitHub's ``repositories`` are names without the
        owner, ``repository_ids`` ids): each must be one the installation covers, else 422."""
        installed = [r for r in self.repos.values() if r.installed]
        chosen: list[str] = []
        for wanted, key in [*((n, "name") for n in names), *((i, "id") for i in ids)]:
            found = next((r for r in installed if getattr(r, key) == wanted), None)
            if found is None:
                raise ApiError(
                    422,
                    "There is at least one repository that does not exist or is not accessible "
                    "to the parent installation.",
                )
            if found.full_name not in chosen:
                chosen.append(found.full_name)
        return chosen

    def _op_apps__get_authenticated(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        if not caller.startswith("app:"):
            raise ApiError(401, "A JSON web token could not be decoded")
        return 200, self._app()

    def _op_apps__list_webhook_deliveries(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        return 200, [
            {
                "id": d.id,
                "guid": d.guid,
                "delivered_at": d.delivered_at,
                "redelivery": d.redelivery,
                "duration": d.duration,
                "status": "OK" if 200 <= d.status_code < 300 else str(d.status_code),
                "status_code": d.status_code,
                "event": d.event,
                "action": d.action,
                "installation_id": self.installation_id,
                "repository_id": (d.payload.get("repository") or {}).get("id"),
            }
            for d in reversed(self.deliveries)
            if not d.lost
        ]

    def _op_apps__redeliver_webhook_delivery(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        original = next(
            (d for d in self.deliveries if d.id == int(params["delivery_id"]) and not d.lost), None
        )
        if original is None:
            raise ApiError(404, "Not Found")
        again = Delivery(
            next(self._ids),
            original.guid,
            original.event,
            original.action,
            original.payload,
            github_now(),
            redelivery=True,
        )
        self.deliveries.append(again)
        self._outbox.put(again)
        return 202, {}

    def _op_apps__get_repo_installation(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        if not caller.startswith("app:"):
            raise ApiError(401, "A JSON web token could not be decoded")
        repo = self.repos.get(f"{params['owner']}/{params['repo']}")
        if repo is None or not repo.installed:
            raise ApiError(404, "Not Found")
        return 200, self._installation()

    def _op_apps__get_webhook_config_for_app(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        if not caller.startswith("app:"):
            raise ApiError(401, "A JSON web token could not be decoded")
        config: Json = {"content_type": "json", "insecure_ssl": "0", "url": self.webhook_url or ""}
        if self.webhook_secret:
            config["secret"] = "********"  # noqa: S105 (GitHub never shows it)
        return 200, config

    def _op_apps__list_repos_accessible_to_installation(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        # The token's own repositories (a narrowed token lists only those), a page at a time.
        credential = self._credential or ""
        repos = [self.repository(r) for r in self.repos.values() if self.reaches(credential, r.full_name)]
        per_page = max(1, min(int(query.get("per_page") or 30), 100))
        page = max(1, int(query.get("page") or 1))
        answer = PagedObject(
            {"total_count": len(repos), "repositories": repos[(page - 1) * per_page : page * per_page]}
        )
        if page * per_page < len(repos):
            answer.next_url = (
                f"{self.base_url}/installation/repositories?{urlencode({**query, 'page': page + 1})}"
            )
        return 200, answer
