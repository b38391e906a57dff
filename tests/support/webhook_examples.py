"""GitHub's published webhook examples (npm @octokit/webhooks-examples, api.github.com).

`make test` installs the package with `npm ci`; a missing package is a setup
error, reported as such, never a silent skip.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "node_modules" / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"


@dataclass(frozen=True)
class WebhookExample:
    event: str
    index: int
    payload: dict[str, Any]

    @property
    def id(self) -> str:
        action = self.payload.get("action")
        return (
            f"{self.event}.{action}#{self.index}" if isinstance(action, str) else f"{self.event}#{self.index}"
        )


@functools.cache
def load_examples() -> tuple[WebhookExample, ...]:
    if not INDEX.exists():
        raise RuntimeError(
            f"{INDEX} is missing: run `make test` (or `npm ci`) to install @octokit/webhooks-examples"
        )
    entries = json.loads(INDEX.read_text(encoding="utf-8"))
    return tuple(
        WebhookExample(entry["name"], index, example)
        for entry in entries
        for index, example in enumerate(entry["examples"])
    )


def example(event: str, action: str | None = None) -> dict[str, Any]:
    """A deep copy of the first example of ``event`` (with ``action``, when given)."""
    for item in load_examples():
        if item.event == event and (action is None or item.payload.get("action") == action):
            copy: dict[str, Any] = json.loads(json.dumps(item.payload))
            return copy
    raise LookupError(f"no published example for {event}.{action}")
