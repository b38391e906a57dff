"""The docs behind the README: they build, a broken link fails the build, and what is generated is current.

`make docs` (part of `make test`) builds them with MkDocs in strict mode; these tests prove that
strict mode really refuses what a reader would trip on, that docs/configuration.md is what its
generator makes of the committed JSON Schemas, and that the README stays a short front door.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from squadron.config import reference
from squadron.config.reference import read_schemas, render_reference
from squadron.config.schema import SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(config),
            "--site-dir",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy(tmp_path: Path) -> Path:
    """A copy of the docs and their configuration, to break without touching the real ones."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path / "mkdocs.yml"


# --- the build -------------------------------------------------------------------------------


def test_the_docs_build_in_strict_mode(tmp_path: Path) -> None:
    built = _build(ROOT / "mkdocs.yml", tmp_path / "site")

    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "architecture" / "index.html").exists()


BROKEN = [
    ("a missing page", "[gone](no-such-page.md)", "no-such-page.md"),
    (
        "an anchor another page lacks",
        "[gone](architecture.md#no-such-heading)",
        "architecture.md#no-such-heading",
    ),
    ("an anchor this page lacks", "[gone](#nor-this-one)", "#nor-this-one"),
    ("a file outside the docs", "[gone](../README.md)", "../README.md"),
]


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Each kind of broken link is named, and any one of them fails the build (strict mode turns
    every warning into a failure); one build for all of them keeps this test to seconds."""
    config = _copy(tmp_path)
    page = tmp_path / "docs" / "security.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\n" + "\n".join(link for _, link, _ in BROKEN) + "\n",
        encoding="utf-8",
    )

    built = _build(config, tmp_path / "site")

    assert built.returncode != 0
    said = built.stdout + built.stderr
    assert "Aborted with 4 warnings in strict mode" in said, said
    for case, _, named in BROKEN:
        assert f"'security.md' contains a link '{named}'" in said, case


def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path: Path) -> None:
    """A new page (an ADR too) must be listed, or no reader finds it."""
    config = _copy(tmp_path)
    (tmp_path / "docs" / "adr" / "0099-forgotten.md").write_text("# ADR 0099: Forgotten\n", encoding="utf-8")

    built = _build(config, tmp_path / "site")

    assert built.returncode != 0
    assert "adr/0099-forgotten.md" in built.stdout + built.stderr


# --- the generated configuration reference ------------------------------------------------------


def test_the_configuration_reference_is_current() -> None:
    committed = (DOCS / "configuration.md").read_text(encoding="utf-8")

    assert committed == render_reference(read_schemas(ROOT / ".squadron" / "schemas")), (
        "stale docs/configuration.md: run " + reference.REGENERATE
    )


def test_the_reference_names_every_key_of_every_schema() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for name, schema in read_schemas(ROOT / ".squadron" / "schemas").items():
        objects = [schema, *schema.get("$defs", {}).values()]
        for obj in objects:
            for key in obj.get("properties", {}):
                assert f"| `{key}` |" in page, (name, key)


def _page(properties: dict[str, Any], defs: dict[str, Any] | None = None) -> str:
    schema: dict[str, Any] = {"properties": properties, "additionalProperties": False}
    if defs:
        schema["$defs"] = defs
    return render_reference({"config.schema.json": schema})


TYPES = [
    (
        "a nested object links to its table",
        {"$ref": "#/$defs/MemoryConfig"},
        "[MemoryConfig](#memoryconfig-config)",
    ),
    (
        "nullable",
        {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]},
        "number (> 0) or null",
    ),
    ("a list", {"type": "array", "items": {"type": "string"}}, "list of string"),
    ("a map", {"type": "object", "additionalProperties": {"type": "integer"}}, "map of name to integer"),
    ("choices", {"enum": ["merge", "squash"]}, 'one of `"merge"`, `"squash"`'),
    ("a list of choices", {"type": "array", "items": {"enum": ["a", "b"]}}, 'list, each one of `"a"`, `"b"`'),
    ("text that must not be empty", {"type": "string", "minLength": 1}, "string (not empty)"),
    ("a constant", {"const": 1}, "`1`"),
    ("bounds", {"type": "integer", "minimum": 1, "maximum": 10}, "integer (≥ 1, ≤ 10)"),
    (
        "a pattern with a pipe stays in its cell",
        {"type": "string", "pattern": "^(a|b)$"},
        "string (matching `^(a\\|b)$`)",
    ),
]


@pytest.mark.parametrize(("case", "node", "shown"), TYPES, ids=[case for case, _, _ in TYPES])
def test_each_kind_of_type_is_shown(case: str, node: dict[str, Any], shown: str) -> None:
    page = _page({"key": node}, {"MemoryConfig": {"properties": {}}})

    row = next(line for line in page.splitlines() if line.startswith("| `key` |"))
    assert row.split(" | ")[1] == shown, case


def test_prose_stays_text_in_its_cell() -> None:
    """Angle brackets outside code are text, not HTML a renderer would swallow; a pipe does not
    split the cell; code keeps its brackets."""
    page = _page({"key": {"type": "string", "description": "as <slug>[bot] | or ``<name>.md``"}})

    row = next(line for line in page.splitlines() if line.startswith("| `key` |"))
    assert row.endswith("| as &lt;slug&gt;[bot] \\| or ``<name>.md`` |")


def test_defaults_and_required_keys() -> None:
    page = render_reference(
        {
            "config.schema.json": {
                "properties": {
                    "a": {"type": "integer", "default": 3},
                    "b": {"type": "string"},
                    "c": {"type": "string"},
                },
                "required": ["b"],
            }
        }
    )
    rows = {
        line.split(" | ")[0]: line.split(" | ")[2] for line in page.splitlines() if line.startswith("| `")
    }

    assert rows == {"| `a`": "`3`", "| `b`": "required", "| `c`": "—"}


def test_a_changed_model_changes_the_page(tmp_path: Path) -> None:
    """The staleness check can fail: a key added to a schema is a row the committed page lacks."""
    schemas = read_schemas(ROOT / ".squadron" / "schemas")
    schemas["config.schema.json"]["properties"]["brand_new"] = {"type": "boolean", "default": False}

    page = render_reference(schemas)

    assert "| `brand_new` | boolean | `false` |" in page
    assert page != (DOCS / "configuration.md").read_text(encoding="utf-8")


def test_the_generator_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(ROOT / ".squadron" / "schemas", tmp_path / ".squadron" / "schemas")
    (tmp_path / "docs").mkdir()

    assert reference.main([], root=tmp_path) == 0
    assert (tmp_path / "docs" / "configuration.md").read_text(encoding="utf-8") == (
        DOCS / "configuration.md"
    ).read_text(encoding="utf-8")
    assert capsys.readouterr().out == "wrote docs/configuration.md\n"


def test_the_generator_names_a_missing_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".squadron" / "schemas").mkdir(parents=True)
    (tmp_path / ".squadron" / "schemas" / "config.schema.json").write_text(json.dumps({}), encoding="utf-8")

    assert reference.main([], root=tmp_path) == 1
    assert not (tmp_path / "docs" / "configuration.md").exists()
    err = capsys.readouterr().err
    assert "missing agent.schema.json, approval-flows.schema.json" in err and "squadron schema" in err
    assert sorted(SCHEMAS) == ["agent.schema.json", "approval-flows.schema.json", "config.schema.json"]


# --- the README: a short front door ----------------------------------------------------------


README = ROOT / "README.md"


def test_the_readme_is_a_short_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)

    assert len(text.splitlines()) < 300
    assert headings == ["Quick start", "What you will see", "Where to read next"]


def test_the_quick_start_is_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Quick start\n\n```sh\n(.*?)```", text, flags=re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]

    assert commands == ["make local", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("local", "test"):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target


def test_every_link_of_the_readme_leads_somewhere() -> None:
    """The build checks the pages' links; the README is outside it, so its own are checked here."""
    text = README.read_text(encoding="utf-8")
    links = [target for target in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in target]

    assert links, "the README points into docs/"
    for target in links:
        assert (ROOT / target.split("#")[0]).is_file(), target
    assert {link.split("#")[0] for link in links} >= {
        "docs/architecture.md",
        "docs/security.md",
        "docs/operations.md",
    }


# --- decision records --------------------------------------------------------------------------


def test_every_decision_the_code_cites_has_a_record() -> None:
    cited = set()
    for path in [*(ROOT / "layers").rglob("*.py"), *(ROOT / "infra").rglob("*.py")]:
        cited |= set(re.findall(r"\bAD-0(\d\d)\b", path.read_text(encoding="utf-8")))
    records = {path.name[:4] for path in (DOCS / "adr").glob("0*.md")}

    assert cited, "the code cites decisions"
    assert {f"00{number}" for number in cited} <= records
    index = (DOCS / "adr" / "index.md").read_text(encoding="utf-8")
    for path in (DOCS / "adr").glob("0*.md"):
        assert f"]({path.name})" in index, path.name
