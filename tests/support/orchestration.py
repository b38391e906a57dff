"""A ``.squadron`` directory's routing policy under ``orchestration: fixed``, for the tests of the
fixed routing that wire the router to fakes without Step Functions (under the default, the
pipelines', an assignment's work is left to a run nothing here would carry out)."""

from __future__ import annotations

from pathlib import Path

from squadron.config import parse_files, read_directory
from squadron.config.policy import routing_policy
from squadron.domain.routing import RoutingPolicy

#: What a test's own ``config.yaml`` adds to choose the fixed routing.
FIXED = "\norchestration: fixed\n"


def fixed_policy(directory: Path) -> RoutingPolicy:
    """The policy of the ``.squadron`` at ``directory`` (which sets no ``orchestration``), fixed."""
    files = read_directory(directory)
    files["config.yaml"] = files.get("config.yaml", "version: 1\n") + FIXED
    return routing_policy(parse_files(files))
