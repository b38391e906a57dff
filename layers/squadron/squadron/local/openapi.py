"""GitHub's REST OpenAPI description (npm @octokit/openapi) as a request validator.

Used by the tests' stand-ins for GitHub and by the local stack's GitHub
sandbox: a request that GitHub would not accept (unknown operation, parameter
or body key, wrong type) is refused with the reason. `make` fetches
``api.github.com.json`` once into tests/.cache (``SQUADRON_GITHUB_OPENAPI``
points elsewhere); a missing file is a setup error, never a skip.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema

#: Where `make` puts the description, relative to the repository root.
SPEC_RELATIVE = Path("tests") / ".cache" / "openapi-23.0.2" / "api.github.com.json"


class InvalidRequestError(AssertionError):
    """A request GitHub's REST API description does not allow."""


def _require(condition: object, message: str) -> None:
    if not condition:
        raise InvalidRequestError(message)


def spec_path() -> Path:
    """``$SQUADRON_GITHUB_OPENAPI``, else the repository's tests/.cache copy (searched upward)."""
    configured = os.environ.get("SQUADRON_GITHUB_OPENAPI")
    if configured:
        return Path(configured)
    for directory in (Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents):
        candidate = directory / SPEC_RELATIVE
        if candidate.exists():
            return candidate
    return Path.cwd() / SPEC_RELATIVE


@functools.cache
def spec() -> dict[str, Any]:
    path = spec_path()
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing: run `make test` or `make local` to fetch GitHub's OpenAPI description"
        )
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _deref(node: Any, depth: int = 0) -> Any:
    """Inline ``$ref``s and turn OpenAPI 3.0 ``nullable`` into JSON Schema's null type."""
    if depth > 40:
        return {}
    if isinstance(node, list):
        return [_deref(item, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _deref(target, depth + 1)
    out = {key: _deref(value, depth + 1) for key, value in node.items() if key not in ("example", "examples")}
    if out.pop("nullable", False):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def _closed(schema: Any) -> Any:
    """Stricter than GitHub's schemas: objects take only the properties they declare.

    GitHub silently ignores unknown keys, so a misspelt field would do nothing at
    all; the contract treats it as the error it is.
    """
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _closed(value) for key, value in schema.items()}
    combined = any(key in schema for key in ("allOf", "anyOf", "oneOf"))
    if "properties" in schema and "additionalProperties" not in schema and not combined:
        out["additionalProperties"] = False
    return out


def closed_schema(schema: Any) -> Any:
    """A schema of GitHub's description as the sandbox checks against it: ``$ref``s inlined,
    ``nullable`` as JSON Schema's null type, and closed (:func:`_closed`)."""
    return _closed(_deref(schema))


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    operation_id: str
    definition: dict[str, Any]

    @property
    def parameters(self) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = _deref(self.definition.get("parameters", []))
        return params


@functools.cache
def _routes() -> list[tuple[re.Pattern[str], str]]:
    routes = []
    for template in spec()["paths"]:
        pattern = re.sub(r"\{path\}", "(?P<path>.+)", template)
        pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern)
        routes.append((re.compile(pattern), template))
    # Literal segments win over parameters: /issues/comments before /issues/{issue_number}.
    routes.sort(key=lambda route: (route[1].count("{"), -len(route[1])))
    return routes


def operation_for(method: str, path: str) -> tuple[Operation, dict[str, str]]:
    for pattern, template in _routes():
        match = pattern.fullmatch(path)
        if match and method.lower() in spec()["paths"][template]:
            definition = spec()["paths"][template][method.lower()]
            return Operation(method, template, definition["operationId"], definition), {
                k: unquote(v) for k, v in match.groupdict().items()
            }
    raise InvalidRequestError(f"{method} {path} is not an operation of GitHub's REST API")


def _check_value(name: str, value: Any, schema: dict[str, Any]) -> None:
    kind = schema.get("type")
    if kind == "integer" and isinstance(value, str):
        _require(value.lstrip("-").isdigit(), f"parameter {name}={value!r} is not an integer")
        value = int(value)
    if kind == "boolean" and isinstance(value, str):
        _require(value in ("true", "false"), f"parameter {name}={value!r} is not a boolean")
        return
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        raise InvalidRequestError(f"parameter {name}: {exc.message}") from exc


@dataclass(frozen=True)
class Call:
    """The parts of an HTTP request the validator reads."""

    method: str
    #: The path as sent (percent-encoding kept: ``%2F`` stays one segment, as GitHub sees it).
    raw_path: str
    query: dict[str, str]
    content: bytes


def validate_call(call: Call) -> tuple[Operation, dict[str, str]]:
    """``call`` as a valid GitHub REST operation and its path values; InvalidRequestError otherwise."""
    operation, path_values = operation_for(call.method, call.raw_path)
    declared = {(p["in"], p["name"]): p for p in operation.parameters}
    for name, value in path_values.items():
        param = declared.get(("path", name))
        if param is None:
            raise InvalidRequestError(f"{operation.operation_id}: undeclared path parameter {name}")
        _check_value(name, value, param.get("schema", {}))
    for (where, name), param in declared.items():
        if where == "query" and param.get("required"):
            _require(name in call.query, f"{operation.operation_id}: missing required query parameter {name}")
    for name, value in call.query.items():
        param = declared.get(("query", name))
        if param is None:
            raise InvalidRequestError(f"{operation.operation_id}: unknown query parameter {name}")
        _check_value(name, value, param.get("schema", {}))
    body_spec = operation.definition.get("requestBody")
    if call.content:
        if body_spec is None:
            raise InvalidRequestError(f"{operation.operation_id} takes no body")
        schema = closed_schema(body_spec["content"]["application/json"]["schema"])
        try:
            jsonschema.validate(json.loads(call.content), schema)
        except jsonschema.ValidationError as exc:
            raise InvalidRequestError(f"{operation.operation_id}: {exc.message}") from exc
    else:
        _require(not (body_spec and body_spec.get("required")), f"{operation.operation_id} needs a body")
    return operation, path_values
