"""GitHub's ``revertPullRequest`` GraphQL mutation (there is no REST endpoint for it).

``mutation($input: RevertPullRequestInput!) { revertPullRequest(input: $input) {...} }`` with
``pullRequestId`` (a merged pull request's node id), ``title``, ``body``, ``draft`` and
``clientMutationId``: GitHub commits the revert of the pull request's merge onto its base, on a
new branch ``revert-<number>-<head ref>`` (the web's Revert button names it so), and opens a pull
request from it, written by the caller. Refused (HTTP 200, ``errors``, the field null) when the
pull request is not merged, its revert branch exists already (a second revert), or the revert
conflicts with the base as it is now. The answer carries ``pullRequest`` (the reverted one) and
``revertPullRequest`` (the new one): ``id``, ``number``, ``headRefName``, ``url``, ``state``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squadron.local.git_store import GitStoreError
from squadron.local.sandbox.base import ApiError, Json, Repo

#: RevertPullRequestInput's fields (GitHub's schema.docs.graphql).
REVERT_INPUT = ("RevertPullRequestInput", {"body", "clientMutationId", "draft", "pullRequestId", "title"})


class RevertRefusedError(Exception):
    """GitHub's refusal of the mutation (``UNPROCESSABLE``), in its words."""


def _shown(repo: Repo, pr: Json) -> Json:
    return {
        "id": pr["node_id"],
        "number": pr["number"],
        "headRefName": pr["head"]["ref"],
        "url": pr["html_url"],
        "state": "MERGED" if pr.get("merged") else str(pr["state"]).upper(),
    }


#: The sandbox's ``POST /repos/{owner}/{repo}/pulls``: (params, query, body, caller) -> (status, pull).
OpenPull = Callable[[Json, Json, Json, str], tuple[int, Any]]


def revert_pull_request(open_pull: OpenPull, repo: Repo, pr: Json, given: Json, caller: str) -> Json:
    """Revert merged ``pr`` of ``repo`` as ``caller``, opening the revert with ``open_pull`` (the
    sandbox's lock held)."""
    number = int(pr["number"])
    if not pr.get("merged") or not pr.get("merge_commit_sha"):
        raise RevertRefusedError("Pull request is not merged.")
    branch = f"revert-{number}-{pr['head']['ref']}"
    title = str(given.get("title") or f'Revert "{pr["title"]}"')
    body = str(given.get("body") or f"Reverts {repo.full_name}#{number}")
    try:
        repo.store.revert(pr["base"]["ref"], str(pr["merge_commit_sha"]), branch=branch, message=title)
    except GitStoreError as exc:
        raise RevertRefusedError(
            f"Sorry, this pull request couldn't be reverted automatically: {exc}"
        ) from exc
    try:
        _, opened = open_pull(
            {"owner": repo.owner, "repo": repo.name},
            {},
            {
                "title": title,
                "head": branch,
                "base": pr["base"]["ref"],
                "body": body,
                "draft": bool(given.get("draft")),
            },
            caller,
        )
    except ApiError as exc:
        repo.store.delete_branch(branch)
        raise RevertRefusedError(exc.message) from exc
    return {
        "clientMutationId": given.get("clientMutationId"),
        "pullRequest": _shown(repo, pr),
        "revertPullRequest": _shown(repo, opened),
    }
