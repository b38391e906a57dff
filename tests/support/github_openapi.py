"""GitHub's REST OpenAPI description as a validator of httpx requests (see :mod:`squadron.local.openapi`)."""

from __future__ import annotations

import json
import re

import httpx

from squadron.local.openapi import Call, InvalidRequestError, Operation, operation_for, spec, validate_call

__all__ = ["InvalidRequestError", "Operation", "operation_for", "spec", "validate", "validate_graphql"]


def validate(request: httpx.Request) -> Operation:
    """Assert ``request`` is a valid call of a GitHub REST operation; return the operation."""
    call = Call(
        method=request.method,
        raw_path=request.url.raw_path.decode().split("?")[0],
        query=dict(request.url.params),
        content=request.content,
    )
    return validate_call(call)[0]


#: GitHub's GraphQL operations the client sends, and the fields of each one's input (GitHub's
#: published schema, schema.docs.graphql): there is no OpenAPI description of them.
GRAPHQL_INPUTS: dict[str, frozenset[str] | None] = {
    "enqueuePullRequest": frozenset({"clientMutationId", "expectedHeadOid", "jump", "pullRequestId"}),
    "dequeuePullRequest": frozenset({"clientMutationId", "id"}),
    "revertPullRequest": frozenset({"body", "clientMutationId", "draft", "pullRequestId", "title"}),
    "repository": None,  # a query: owner, name and the pull request's number
}


def validate_graphql(request: httpx.Request) -> str:
    """Assert ``request`` is one of the GraphQL operations the client may send; return its root field."""
    assert request.method == "POST", request.method
    body = json.loads(request.content)
    query, variables = str(body.get("query") or ""), body.get("variables") or {}
    roots = [name for name in GRAPHQL_INPUTS if re.search(rf"\{{\s*{name}\s*\(", query)]
    assert len(roots) == 1, f"not one known root field: {query}"
    fields = GRAPHQL_INPUTS[roots[0]]
    if fields is None:
        assert set(variables) == {"owner", "name", "number"}, variables
        assert isinstance(variables["number"], int)
    else:
        given = variables.get("input")
        assert isinstance(given, dict) and set(given) <= fields, given
    return roots[0]
