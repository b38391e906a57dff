"""What an installation token may do, as GitHub holds it: the permissions it was minted with.

A token minted with ``permissions`` (``POST /app/installations/{id}/access_tokens``) holds those
and nothing more: an operation needs its permission at ``read`` (a GET) or ``write`` (anything
else), and a token without it is answered ``403 Resource not accessible by integration``, as
GitHub answers. Asking for a permission the installation was not granted, or at a higher level, is
``422 The permissions requested are not granted to this installation.`` A token minted without
``permissions`` holds the installation's. ``metadata: read`` every token holds.

The permissions guard private resources only: GitHub's "Permissions required for GitHub Apps"
says "These permissions are required to access private resources. Some endpoints can also be used
to access public resources without these permissions", and each read in :data:`PUBLIC_READS` is
documented "can be used without authentication or the aforementioned permissions if only public
resources are requested". So a token without ``issues`` reads a public repository's issues (any
public repository: its repositories narrow what it may write and what private it may read, see
``SandboxBase.check_scope``); it never writes one.

:data:`NEEDS` names, per REST operation the sandbox serves, the permissions any one of which
allows it (GitHub's "Permissions required for GitHub Apps" per endpoint); GraphQL's merge-queue
mutations need ``merge_queues: write`` (:func:`graphql_need`).
"""

from __future__ import annotations

from collections.abc import Mapping

from squadron.local.sandbox.base import ApiError

FORBIDDEN = "Resource not accessible by integration"
NOT_GRANTED = "The permissions requested are not granted to this installation."
_LEVELS = {"read": 1, "write": 2}

#: Operation id -> the permissions any one of which allows it (at read for GET, write otherwise).
NEEDS: dict[str, tuple[str, ...]] = {
    "issues/create": ("issues",),
    "issues/list-for-repo": ("issues",),
    "issues/get": ("issues", "pull_requests"),
    "issues/update": ("issues", "pull_requests"),
    "issues/add-labels": ("issues", "pull_requests"),
    "issues/remove-label": ("issues", "pull_requests"),
    "issues/add-assignees": ("issues", "pull_requests"),
    "issues/remove-assignees": ("issues", "pull_requests"),
    "issues/list-comments": ("issues", "pull_requests"),
    "issues/update-comment": ("issues", "pull_requests"),
    "issues/create-comment": ("issues", "pull_requests"),
    "pulls/create": ("pull_requests",),
    "pulls/list": ("pull_requests",),
    "pulls/get": ("pull_requests",),
    "pulls/update": ("pull_requests",),
    "pulls/list-files": ("pull_requests",),
    "pulls/list-reviews": ("pull_requests",),
    "pulls/create-review": ("pull_requests",),
    "pulls/update-branch": ("pull_requests",),
    "pulls/merge": ("contents",),
    "repos/create-commit-status": ("statuses",),
    "repos/get-combined-status-for-ref": ("statuses",),
    "checks/create": ("checks",),
    "checks/update": ("checks",),
    "checks/list-for-ref": ("checks",),
    "repos/get-content": ("contents",),
    "git/delete-ref": ("contents",),
    "repos/create-or-update-file-contents": ("contents",),
    "repos/update-branch-protection": ("administration",),
    "repos/get": ("metadata",),
    "repos/list-branches": ("metadata",),
    "repos/get-branch": ("metadata",),
    "repos/get-branch-rules": ("metadata",),
    "repos/get-collaborator-permission-level": ("metadata",),
}


#: The reads GitHub serves on a public repository whatever the token's permissions.
PUBLIC_READS = frozenset(
    {
        "issues/list-for-repo",
        "issues/get",
        "issues/list-comments",
        "pulls/list",
        "pulls/get",
        "pulls/list-files",
        "pulls/list-reviews",
        "repos/get-combined-status-for-ref",
        "checks/list-for-ref",
        "repos/get-content",
        "repos/get",
        "repos/list-branches",
        "repos/get-branch",
        "repos/get-branch-rules",
    }
)


def held(asked: Mapping[str, str] | None, installation: Mapping[str, str]) -> dict[str, str]:
    """The permissions a token minted with ``asked`` holds (the installation's when none are
    asked); 422 when one asked for is more than the installation was granted."""
    if not asked:
        return {**installation, "metadata": "read"}
    for name, level in asked.items():
        if _LEVELS.get(str(level), 99) > _LEVELS.get(installation.get(name, ""), 0):
            raise ApiError(422, NOT_GRANTED)
    return {"metadata": "read", **asked}


def allows(permissions: Mapping[str, str], needs: tuple[str, ...], write: bool) -> bool:
    """Whether ``permissions`` hold one of ``needs`` at the level the request needs."""
    wanted = _LEVELS["write" if write else "read"]
    return any(_LEVELS.get(permissions.get(name, ""), 0) >= wanted for name in needs)


def check(
    permissions: Mapping[str, str] | None, operation: str, method: str, *, public: bool = False
) -> None:
    """403 as GitHub answers when a token's permissions do not allow ``operation`` (on a public
    repository, :data:`PUBLIC_READS` need none)."""
    needs = NEEDS.get(operation)
    if permissions is None or needs is None:
        return  # a person, an App JWT, or an operation with no repository permission (apps/*)
    if public and method in ("GET", "HEAD") and operation in PUBLIC_READS:
        return
    if not allows(permissions, needs, write=method not in ("GET", "HEAD")):
        raise ApiError(403, FORBIDDEN)


def graphql_need(mutation: bool) -> tuple[tuple[str, ...], bool]:
    """What a merge-queue GraphQL request needs: its mutations ``merge_queues: write``, reading a
    pull request's entry ``pull_requests`` or ``merge_queues`` at read."""
    return (("merge_queues",), True) if mutation else (("pull_requests", "merge_queues"), False)
