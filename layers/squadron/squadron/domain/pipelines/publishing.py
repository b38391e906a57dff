"""Which pipelines are published, and in what order — pure.

A pipeline's definition names each sub-pipeline's published version (a run keeps its children's
versions too: docs/pipelines.md), so sub-pipelines are published before the pipelines that run
them: :func:`publish_order`. A run starts only what it needs published: :func:`needed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from squadron.domain.pipelines.models import ParallelStage, Pipeline, PipelineBranch, PipelineStage


def children(pipeline: Pipeline) -> list[str]:
    """The sub-pipelines ``pipeline`` runs (its pipeline stages and branches), sorted."""
    found: set[str] = set()
    for stage in pipeline.stages:
        if isinstance(stage, PipelineStage):
            found.add(stage.pipeline)
        elif isinstance(stage, ParallelStage):
            found |= {branch.pipeline for branch in stage.branches if isinstance(branch, PipelineBranch)}
    return sorted(found)


def publish_order(pipelines: Mapping[str, Pipeline], names: Iterable[str] | None = None) -> list[str]:
    """``names`` (every pipeline when None) and the sub-pipelines they run, each after its own
    sub-pipelines; in name order otherwise. A name that is not a pipeline, or a cycle (refused when
    the configuration is read, so only a model built by hand has one), is left out with what
    depends on it: its compilation reports the missing version."""
    order: list[str] = []
    done: set[str] = set()
    refused: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> bool:
        if name in done:
            return True
        if name in refused or name in path or name not in pipelines:
            refused.add(name)
            return False
        ok = all(visit(child, (*path, name)) for child in children(pipelines[name]))
        if not ok:
            refused.add(name)
            return False
        done.add(name)
        order.append(name)
        return True

    for name in sorted(pipelines if names is None else set(names)):
        visit(name, ())
    return order


def needed(pipelines: Mapping[str, Pipeline], name: str) -> list[str]:
    """What a run of ``name`` needs published, in the order to publish it (``name`` last)."""
    return publish_order(pipelines, [name])
