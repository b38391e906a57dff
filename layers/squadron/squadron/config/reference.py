"""The configuration reference (``docs/configuration.md``), generated from the JSON Schemas.

The models are the truth; ``squadron schema`` writes their JSON Schemas to
``.squadron/schemas/`` and this module turns those into one Markdown page: a table
per file and per object it nests (key, type, default, description). Tests keep
each step in step with the one before, so the page never says what the code does not.

Regenerate it after changing a model::

    .venv/bin/squadron schema && .venv/bin/python -m squadron.config.reference
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from squadron.config.schema import SCHEMAS

#: Where the page goes and where the schemas are read from, relative to the repository root.
PAGE = Path("docs/configuration.md")
SCHEMA_DIR = Path(".squadron/schemas")
REGENERATE = "`.venv/bin/squadron schema && .venv/bin/python -m squadron.config.reference`"

#: The file each schema describes, for the page's headings (schema file name → configuration file).
FILES: dict[str, str] = {
    "config.schema.json": ".squadron/config.yaml",
    "agent.schema.json": ".squadron/agents/<name>.md (front matter)",
    "approval-flows.schema.json": ".squadron/workflows/approval-flows.yaml",
}

_CODE = re.compile(r"(`+[^`]*`+)")
_CONSTRAINTS: tuple[tuple[str, str], ...] = (
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
)


def _text(text: str) -> str:
    """Schema prose as one table cell: one line, pipes escaped, angle brackets kept as text."""
    parts = _CODE.split(" ".join(text.split()))
    out = []
    for part in parts:
        shown = (
            part
            if _CODE.fullmatch(part)
            else part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        )
        out.append(shown.replace("|", "\\|"))
    return "".join(out)


def _code(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False, sort_keys=True)
    ticks = "``" if "`" in shown else "`"
    return f"{ticks}{shown}{ticks}".replace("|", "\\|")


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


class _Page:
    """One schema's part of the page: its objects, each under a heading of its own."""

    def __init__(self, schema_name: str, schema: Mapping[str, Any]) -> None:
        self.file = FILES.get(schema_name, schema_name)
        self.stem = schema_name.removesuffix(".schema.json")
        self.defs: Mapping[str, Any] = schema.get("$defs", {})

    def heading(self, name: str) -> str:
        return f"`{name}` ({self.stem})"

    def link(self, ref: str) -> str:
        name = ref.rsplit("/", 1)[-1]
        return f"[{name}](#{_slug(self.heading(name))})"

    def description(self, node: Mapping[str, Any]) -> str:
        """A key's own description, or else the description of the object it holds."""
        if "description" in node:
            return _text(node["description"])
        ref = node.get("$ref", "")
        return _text(self.defs.get(ref.rsplit("/", 1)[-1], {}).get("description", ""))

    def type_of(self, node: Mapping[str, Any]) -> str:
        if "$ref" in node:
            return self.link(node["$ref"])
        if "const" in node:
            return _code(node["const"])
        if "enum" in node:
            return "one of " + ", ".join(_code(value) for value in node["enum"])
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = [self.type_of(option) for option in node[key] if option != {"type": "null"}]
                if len(options) < len(node[key]):
                    options.append("null")
                return " or ".join(options)
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(self.type_of({**node, "type": one}) for one in kind)
        if kind == "array":
            item = self.type_of(node.get("items", {}))
            shown = ("list, each " if item.startswith("one of ") else "list of ") + item
        elif kind == "object" and ("additionalProperties" in node or "patternProperties" in node):
            values = node.get("additionalProperties")
            if not isinstance(values, Mapping):
                values = next(iter(node.get("patternProperties", {}).values()), {})
            keys = next(iter(node.get("patternProperties", {})), None)
            named = "`{}`".format(keys.replace("|", "\\|")) if keys else "name"
            shown = f"map of {named} to " + self.type_of(values)
        else:
            shown = str(kind) if kind else "any"
        limits = [
            "not empty" if (key, node[key]) == ("minLength", 1) else form.format(node[key])
            for key, form in _CONSTRAINTS
            if key in node
        ]
        if "pattern" in node and kind == "string":
            limits.append("matching `{}`".format(node["pattern"].replace("|", "\\|")))
        if "description" in node and kind in {"string", "integer", "number"} and "title" not in node:
            limits.append(_text(node["description"]))
        return shown + (f" ({', '.join(limits)})" if limits else "")

    def table(self, obj: Mapping[str, Any]) -> list[str]:
        properties: Mapping[str, Any] = obj.get("properties", {})
        if not properties:
            return ["No keys."]
        required = set(obj.get("required", []))
        rows = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
        for key in sorted(properties):
            node = properties[key]
            default = _code(node["default"]) if "default" in node else "required" if key in required else "—"
            rows.append(f"| `{key}` | {self.type_of(node)} | {default} | {self.description(node)} |")
        extra = obj.get("additionalProperties")
        if extra is False:
            rows += ["", "Any other key is refused."]
        return rows

    def render(self, schema: Mapping[str, Any]) -> list[str]:
        lines = [f"## `{self.file}`", ""]
        if "description" in schema:
            lines += [_text(schema["description"]), ""]
        lines += [*self.table(schema), ""]
        for name in sorted(self.defs):
            obj = self.defs[name]
            lines += [f"### {self.heading(name)}", ""]
            if "description" in obj:
                lines += [_text(obj["description"]), ""]
            if "enum" in obj:
                lines += ["One of " + ", ".join(_code(value) for value in obj["enum"]) + ".", ""]
            else:
                lines += [*self.table(obj), ""]
        return lines


def render_reference(schemas: Mapping[str, Mapping[str, Any]]) -> str:
    """The whole page, from {schema file name: JSON Schema}, in the order of :data:`SCHEMAS`."""
    lines = [
        "<!-- Generated from .squadron/schemas/*.json by squadron.config.reference: do not edit. -->",
        "",
        "# Configuration reference",
        "",
        "Every key of a repository's `.squadron/` files, generated from their JSON Schemas",
        "(`.squadron/schemas/`, themselves generated from the models). What the files mean",
        "together, their limits and what an invalid one does are in",
        "[Repository configuration](repository-configuration.md). Durations are seconds or",
        "text such as `90s`, `30m`, `2h`, `1d`. Regenerate this page after changing a model:",
        "",
        f"    {REGENERATE.strip('`')}",
        "",
    ]
    for name in sorted(schemas, key=lambda n: list(SCHEMAS).index(n) if n in SCHEMAS else len(SCHEMAS)):
        lines += _Page(name, schemas[name]).render(schemas[name])
    return "\n".join(lines).rstrip("\n") + "\n"


def read_schemas(directory: Path) -> dict[str, dict[str, Any]]:
    """{file name: JSON Schema} of every schema :data:`SCHEMAS` names, read from ``directory``."""
    return {
        name: json.loads((directory / name).read_text(encoding="utf-8"))
        for name in SCHEMAS
        if (directory / name).exists()
    }


def main(argv: Sequence[str] | None = None, root: Path | None = None) -> int:
    """Write the page from the committed schemas (run from the repository's root)."""
    del argv
    base = root or Path.cwd()
    schemas = read_schemas(base / SCHEMA_DIR)
    if len(schemas) != len(SCHEMAS):
        missing = sorted(set(SCHEMAS) - set(schemas))
        sys.stderr.write(f"{base / SCHEMA_DIR}: missing {', '.join(missing)}: run `squadron schema` first\n")
        return 1
    (base / PAGE).write_text(render_reference(schemas), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
