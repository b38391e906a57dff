"""Mermaid diagrams parsed by Mermaid's own parser (the npm ``mermaid`` package, under Node).

``make test`` installs it with the other Node tools (``npm ci``: package.json pins ``mermaid``
and ``linkedom``, the DOM its label sanitiser needs). One Node process parses a whole batch.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("mermaid_parse.mjs")
PACKAGE = ROOT / "node_modules" / "mermaid" / "package.json"
#: A whole batch is parsed in well under this on a loaded machine; it only stops a hung Node.
DEADLINE_SECONDS = 120
_FENCED = re.compile(r"^```mermaid\n(.*?)\n```$", re.MULTILINE | re.DOTALL)


class MermaidUnavailableError(RuntimeError):
    """Node or the mermaid package is missing (``make setup`` installs both)."""


@dataclass(frozen=True)
class Parsed:
    """What Mermaid's parser made of one diagram."""

    ok: bool
    type: str | None
    error: str | None
    #: node id -> its label (flowcharts)
    nodes: dict[str, str] = field(default_factory=dict)
    #: (from, to, label) of each edge (flowcharts)
    edges: list[tuple[str, str, str]] = field(default_factory=list)


def version() -> str:
    if not PACKAGE.exists():
        raise MermaidUnavailableError(f"{PACKAGE.parent} is missing: run `make setup` (npm ci installs it)")
    return str(json.loads(PACKAGE.read_text(encoding="utf-8"))["version"])


def parse(diagrams: Sequence[str]) -> list[Parsed]:
    """Each diagram as Mermaid parses it, in order."""
    version()
    node = shutil.which("node")
    if node is None:
        raise MermaidUnavailableError("node is not on PATH: Mermaid's parser runs under Node")
    done = subprocess.run(
        [node, str(SCRIPT)],
        input=json.dumps(list(diagrams)),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise MermaidUnavailableError(f"Mermaid's parser failed to run: {done.stderr.strip()[-2000:]}")
    return [
        Parsed(
            ok=bool(r["ok"]),
            type=r["type"],
            error=r["error"],
            nodes=dict(r["nodes"]),
            edges=[(str(a), str(b), str(label)) for a, b, label in r["edges"]],
        )
        for r in json.loads(done.stdout)
    ]


def fenced(markdown: str) -> list[str]:
    """The diagrams of a Markdown document's ```mermaid blocks, as GitHub finds them."""
    return _FENCED.findall(markdown)
