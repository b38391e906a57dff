"""A repository's pipelines beside the built-in default pipelines — pure (docs/pipelines.md,
"Default pipelines").

A repository overrides a built-in pipeline by defining one of the same name under ``pipelines:``:
the repository's replaces the built-in whole (nothing of the built-in is merged into it). A
same-named pipeline that cannot be meant as a replacement is refused: a sub-pipeline (no
trigger) named like a built-in that has one would silently drop the built-in, since nothing
starts a sub-pipeline but a stage.
"""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.pipelines.models import Pipeline

KeyPath = tuple[str | int, ...]


def overridden(pipelines: Mapping[str, Pipeline], builtins: Mapping[str, Pipeline]) -> list[str]:
    """The built-in pipelines the repository's ``pipelines`` override, in the built-ins' order."""
    return [name for name in builtins if name in pipelines]


def override_problems(
    pipelines: Mapping[str, Pipeline], builtins: Mapping[str, Pipeline]
) -> list[tuple[KeyPath, str]]:
    """Each repository pipeline whose name is a built-in's but that cannot replace it."""
    found: list[tuple[KeyPath, str]] = []
    for name, pipeline in pipelines.items():
        builtin = builtins.get(name)
        if builtin is None or builtin.trigger is None or pipeline.trigger is not None:
            continue
        found.append(
            (
                ("pipelines", name),
                f"{name!r} is the name of a built-in default pipeline (started on "
                f"{builtin.trigger.event}), which a pipeline of the same name overrides; this one is a "
                "sub-pipeline (no trigger), so nothing would start it in the built-in's place: rename "
                'it, or give it a trigger to override the built-in (docs/pipelines.md, "Default pipelines")',
            )
        )
    return found
