"""What a model used for an agent: tokens per model, added up exactly (the basis of its cost)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelTokens(BaseModel):
    """The tokens one model read and wrote for an agent, as the Copilot SDK reports each call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, max_length=100)
    input_tokens: int = Field(default=0, ge=0, le=10**12)
    output_tokens: int = Field(default=0, ge=0, le=10**12)


#: Most models one agent's usage keeps apart (more are added to the last one's count as "other").
MAX_MODELS = 20


def add_tokens(kept: tuple[ModelTokens, ...], more: tuple[ModelTokens, ...]) -> tuple[ModelTokens, ...]:
    """``kept`` and ``more`` added up per model (sorted by model; past :data:`MAX_MODELS`, "other")."""
    totals: dict[str, tuple[int, int]] = {}
    for entry in (*kept, *more):
        name = entry.model if entry.model in totals or len(totals) < MAX_MODELS - 1 else "other"
        before = totals.get(name, (0, 0))
        totals[name] = (before[0] + entry.input_tokens, before[1] + entry.output_tokens)
    return tuple(
        ModelTokens(model=name, input_tokens=i, output_tokens=o) for name, (i, o) in sorted(totals.items())
    )
