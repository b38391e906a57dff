"""GitHub's answers as named errors, each carrying the status and GitHub's own message."""

from __future__ import annotations

from typing import Any

from squadron.errors import SquadronError


def _detail(error: Any) -> str:
    """One entry of GitHub's ``errors`` list in words (a message, or resource/field/code)."""
    if isinstance(error, str):
        return error
    if not isinstance(error, dict):
        return ""
    if error.get("message"):
        return str(error["message"])
    return " ".join(str(error[k]) for k in ("resource", "field", "code") if error.get(k))


class GitHubError(SquadronError):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        method: str = "",
        path: str = "",
        documentation_url: str | None = None,
        errors: list[Any] | None = None,
    ) -> None:
        self.status = status
        self.message = message
        self.method = method
        self.path = path
        self.documentation_url = documentation_url
        self.errors = errors or []
        where = f"{method} {path}: " if method else ""
        details = "; ".join(_detail(error) for error in self.errors if _detail(error))
        super().__init__(f"{where}GitHub answered {status}: {message}" + (f" ({details})" if details else ""))


class AuthenticationError(GitHubError):
    """401: the App JWT or installation token was refused."""


class ForbiddenError(GitHubError):
    """403 that is not a rate limit: the installation lacks a permission."""


class NotFoundError(GitHubError):
    """404 (GitHub also answers 404 for what the token may not see)."""


class GitHubConflictError(GitHubError):
    """409: e.g. the head moved, or the pull request cannot be merged."""


class ValidationFailedError(GitHubError):
    """422: GitHub rejected the request body; ``errors`` holds its details."""


class RateLimitedError(GitHubError):
    """Still rate limited after the bounded waits."""


class GitHubUnavailableError(GitHubError):
    """5xx or a network failure, after the bounded retries."""


class MaybeAppliedError(GitHubUnavailableError):
    """A write GitHub may have applied though it never said so: a 5xx, a read timeout or a
    dropped connection after the request went out (GitHub's front end can time out while the
    write commits). The transport never re-sends such a write; the caller looks it up by its
    key and sends it again only when the lookup says it was not applied."""


class GraphQLError(GitHubError):
    """GitHub's GraphQL refused a query or mutation: HTTP 200 with ``errors`` (each with its
    ``type``, e.g. UNPROCESSABLE, NOT_FOUND, FORBIDDEN, and ``message``), kept in ``errors``."""


class LookupIncompleteError(GitHubError):
    """A lookup of what a keyed write created could not read everything it had to (a list
    longer than it may read): "not found" would be a guess, so it says so instead."""


class NotModifiedWithoutCacheError(GitHubError):
    """304 Not Modified to a request that had no cached answer to stand for (no ``If-None-Match``)."""


BY_STATUS: dict[int, type[GitHubError]] = {
    401: AuthenticationError,
    403: ForbiddenError,
    404: NotFoundError,
    409: GitHubConflictError,
    422: ValidationFailedError,
}
