"""JSON Schemas of the ``.squadron`` files, generated from the models (for editors).

``squadron schema`` writes them to ``.squadron/schemas/``; a test keeps the
committed copies in step with the models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from squadron.domain.repo_config.models import AgentFrontMatter, ApprovalFlowsFile, RepoConfig

_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: Schema file name → (model, title).
SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    "config.schema.json": (RepoConfig, "Squadron .squadron/config.yaml"),
    "agent.schema.json": (AgentFrontMatter, "Squadron .squadron/agents/*.md front matter"),
    "approval-flows.schema.json": (ApprovalFlowsFile, "Squadron .squadron/workflows/approval-flows.yaml"),
}


def json_schemas() -> dict[str, dict[str, Any]]:
    """{file name: JSON Schema} of every configuration file."""
    schemas = {}
    for name, (model, title) in SCHEMAS.items():
        schema = model.model_json_schema(mode="validation")
        schemas[name] = {"$schema": _DIALECT, **schema, "title": title}
    return schemas


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema into ``directory`` (created if needed); return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in json_schemas().items():
        path = directory / name
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    return written
