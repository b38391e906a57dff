"""GitHub's published webhook examples (npm @octokit/webhooks-examples): the shapes sandbox webhooks take."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

INDEX_RELATIVE = Path("node_modules") / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"


def index_path() -> Path:
    for directory in (Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents):
        candidate = directory / INDEX_RELATIVE
        if candidate.exists():
            return candidate
    return Path.cwd() / INDEX_RELATIVE


@functools.cache
def first_examples() -> dict[tuple[str, str | None], dict[str, Any]]:
    """The first published example of each (event, action)."""
    path = index_path()
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing: run `make local` or `npm ci` to install @octokit/webhooks-examples"
        )
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for entry in json.loads(path.read_text(encoding="utf-8")):
        for example in entry["examples"]:
            action = example.get("action") if isinstance(example.get("action"), str) else None
            out.setdefault((entry["name"], action), example)
    return out
