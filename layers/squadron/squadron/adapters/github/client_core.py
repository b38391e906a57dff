"""The plumbing every role-checked GitHub call goes through: one repository, one installation, one caller.

:class:`ClientCore` sends a request (or pages through a list) with the installation's token
and throttle; the topic classes (:mod:`.issue_calls`, :mod:`.pull_calls`) and
:class:`~squadron.adapters.github.client.GitHubClient` build on it. Its methods are not the
client's API: a caller uses the public methods, each checked against the permission table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from squadron.adapters.github.errors import GraphQLError, LookupIncompleteError
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.permissions import Caller
from squadron.domain.repo_config.limits import MAX_LISTED

Json = dict[str, Any]


def github_time(at: datetime) -> str:
    """GitHub's ISO 8601 timestamp (``YYYY-MM-DDTHH:MM:SSZ``), cut to the second (still at or before ``at``)."""
    return at.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClientCore:
    """A repository's calls as one caller, before any topic: the request, the page, the GraphQL query."""

    def __init__(
        self,
        *,
        http: GitHubHttp,
        token: Callable[[], str],
        installation_id: int,
        repo: str,
        caller: Caller,
    ) -> None:
        owner, _, name = repo.partition("/")
        if not owner or not name:
            raise ValueError(f"repo must be 'owner/name', got {repo!r}")
        self.http = http
        self._token = token
        self.installation_id = installation_id
        self.repo = repo
        self.caller = caller
        self._base = f"/repos/{quote(owner)}/{quote(name)}"

    def __repr__(self) -> str:
        return f"GitHubClient({self.repo}, installation {self.installation_id}, as {self.caller.name})"

    # --- plumbing ------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> Any:
        """One request; ``idempotent`` (a write GitHub applying twice leaves as once) lets the
        transport re-send it after a 5xx or a lost answer, else it raises MaybeAppliedError."""
        response = self.http.request(
            method,
            self._base + path,
            token=self._token(),
            throttle_key=f"installation-{self.installation_id}",
            params=params,
            json=json,
            idempotent=idempotent,
        )
        return response.json() if response.content else None

    def _list(
        self, path: str, *, params: Mapping[str, Any] | None = None, items_key: str | None = None
    ) -> list[Json]:
        """At most :data:`MAX_LISTED` items of a list (a caller that must see them all checks)."""
        return list(
            self.http.paginate(
                self._base + path,
                token=self._token(),
                throttle_key=f"installation-{self.installation_id}",
                params=params,
                items_key=items_key,
                limit=MAX_LISTED,
            )
        )

    def _every(self, path: str, what: str, *, params: Mapping[str, Any] | None = None) -> Iterable[Json]:
        """Every item of a list, page after page, for a lookup: past :data:`MAX_LISTED` it
        raises :class:`LookupIncompleteError` rather than let "not found" be a guess."""
        items = self.http.paginate(
            self._base + path,
            token=self._token(),
            throttle_key=f"installation-{self.installation_id}",
            params=params,
        )
        for count, item in enumerate(items, start=1):
            if count > MAX_LISTED:
                raise LookupIncompleteError(
                    200, f"more than {MAX_LISTED} {what} to look through", method="GET", path=path
                )
            yield item

    def _graphql(self, query: str, variables: Json, *, read: bool) -> Json:
        """``data`` of GitHub's answer; its ``errors`` (sent with HTTP 200) raise :class:`GraphQLError`.

        ``read``: a query, which the transport may send again like a GET; a mutation GitHub may
        have applied without answering raises MaybeAppliedError (the caller looks it up)."""
        response = self.http.request(
            "POST",
            self.http.graphql_path,
            token=self._token(),
            throttle_key=f"installation-{self.installation_id}",
            json={"query": query, "variables": variables},
            idempotent=read,
        )
        body = response.json() if response.content else {}
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors or not isinstance(body, dict) or not isinstance(body.get("data"), dict):
            listed = errors if isinstance(errors, list) else []
            said = "; ".join(str(e.get("message") or e) for e in listed if isinstance(e, dict))
            raise GraphQLError(
                200,
                said or "no data in GitHub's GraphQL answer",
                method="POST",
                path="graphql",
                errors=listed,
            )
        data: Json = body["data"]
        return data
