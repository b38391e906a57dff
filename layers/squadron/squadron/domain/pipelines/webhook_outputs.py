"""A webhook stage's ``expected_outputs``, read from its answer — pure (docs/pipelines.md,
"Webhooks").

The answer's body is an outside service's words: the adapter reads at most 64 KiB of it
(:data:`squadron.adapters.webhooks.MAX_BODY`), and :func:`outputs_of` takes from it only the keys
the stage names, each a JSON scalar (a string of at most :data:`MAX_VALUE` characters, a number, a
boolean or null). Anything else — a body that is not one JSON object (or was cut at the bound), a
missing key, a nested value, a longer string — is a reason the stage fails, so its ``on_error``
applies as an agent stage's missing output does. What it takes is data for later templates
(``stages.<id>.outputs.<key>``), never evaluated again, and an agent stage whose instruction
renders it gets it quoted as information (:mod:`.agent_stage`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

#: The most keys taken from one answer (as many as an agent's ``report_complete`` may give).
MAX_KEYS = 20
#: The longest string value taken (characters; an agent's output value's bound).
MAX_VALUE = 2_000


def outputs_of(expected: Sequence[str], body: bytes, *, cut: bool = False) -> dict[str, Any] | str:
    """The expected keys' values from ``body``, or why they cannot be taken (``cut``: the body
    was longer than the adapter reads)."""
    if len(expected) > MAX_KEYS:
        return f"it names {len(expected)} expected outputs, more than {MAX_KEYS}"
    if cut:
        return "its answer is longer than the most read, so its outputs cannot be taken"
    try:
        answer = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "its answer is not JSON, so its outputs cannot be taken"
    if not isinstance(answer, dict):
        return f"its answer is a JSON {type(answer).__name__}, not an object with its outputs"
    missing = [key for key in expected if key not in answer]
    if missing:
        given = ", ".join(sorted(map(str, answer))[:MAX_KEYS]) or "none"
        return f"its answer lacks the expected output(s) {', '.join(missing)} (it gave {given})"
    taken: dict[str, Any] = {}
    for key in expected:
        value = answer[key]
        if isinstance(value, (dict, list)):
            return f"its output {key!r} is a JSON {'object' if isinstance(value, dict) else 'array'}, not a value"
        if isinstance(value, str) and len(value) > MAX_VALUE:
            return f"its output {key!r} is longer than {MAX_VALUE} characters"
        if isinstance(value, float) and not math.isfinite(value):
            return f"its output {key!r} is not a finite number"
        taken[key] = value
    return taken
