"""The JSON Schemas in .squadron/schemas/ are generated from the models and kept up to date."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from squadron.config import json_schemas, read_directory, write_schemas
from squadron.config.agents import split_front_matter
from squadron.config.schema import SCHEMAS, render

SCHEMA_DIR = Path(__file__).resolve().parents[3] / ".squadron" / "schemas"
REFERENCE = SCHEMA_DIR.parent


@pytest.mark.parametrize("name", sorted(SCHEMAS), ids=sorted(SCHEMAS))
def test_committed_schema_is_up_to_date(name: str) -> None:
    committed = SCHEMA_DIR / name

    assert committed.exists(), "run `squadron schema` to generate it"
    assert committed.read_text(encoding="utf-8") == render(json_schemas()[name]), (
        "stale schema: run `squadron schema`"
    )


def test_write_schemas(tmp_path: Path) -> None:
    written = write_schemas(tmp_path / "out")

    assert sorted(path.name for path in written) == sorted(SCHEMAS)
    for path in written:
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


def _reference_documents() -> list[tuple[str, Any]]:
    files = read_directory(REFERENCE)
    docs: list[tuple[str, Any]] = [
        ("config.schema.json", yaml.safe_load(files["config.yaml"])),
        ("approval-flows.schema.json", yaml.safe_load(files["workflows/approval-flows.yaml"])),
    ]
    for rel, text in sorted(files.items()):
        if rel.startswith("agents/"):
            docs.append(("agent.schema.json", yaml.safe_load(split_front_matter(text, rel).front_matter)))
    return docs


def test_reference_files_validate_against_the_schemas() -> None:
    schemas = json_schemas()
    for name, document in _reference_documents():
        jsonschema.validate(document, schemas[name])


def test_schema_rejects_a_typo_like_the_models() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"roles": {"pm": {"kind": "pm", "lifecylce": "ephemeral"}}}, json_schemas()["config.schema.json"]
        )
