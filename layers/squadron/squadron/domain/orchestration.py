"""Who orchestrates a repository's issues: the fixed routing or the default pipelines — pure
(docs/pipelines.md, "Default pipelines").

``orchestration`` in ``.squadron/config.yaml`` chooses. With ``pipelines`` (the default) the
built-in pipelines (``squadron/config/default_pipelines.yaml``) run beside the repository's own
``pipelines:``, each overridable by name, and an event that starts a run leaves its work to the run
(:mod:`squadron.domain.routing.orchestration`). With ``fixed`` the router's fixed routing
(:mod:`squadron.domain.routing`) starts every agent, and only the repository's own ``pipelines:``
run beside it.

Two built-ins stay the framework's under ``pipelines`` (:data:`KEPT_BY_FRAMEWORK`), each for the
reason given there; a repository that defines a pipeline of the same name runs its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from squadron.domain.pipelines.models import Pipeline

Orchestration = Literal["fixed", "pipelines"]
#: The project's default: the default pipelines are every repository's behaviour unless it chooses
#: ``fixed``.
DEFAULT_ORCHESTRATION: Orchestration = "pipelines"

#: Built-ins that are not run under ``orchestration: pipelines``, and why (the fixed routing
#: keeps doing what they describe).
KEPT_BY_FRAMEWORK: Mapping[str, str] = {
    "triage": (
        "the PM is the repository's one agent, not an issue's: an agent stage starts an issue's "
        "agent, so new issues reach the PM through the fixed routing"
    ),
    "approval-default": (
        "a pull request a person opens gets its agent reviews and the merge gate from the fixed "
        "routing (the approval flow); a gate would only wait for those reviews"
    ),
}


def effective_pipelines(
    own: Mapping[str, Pipeline], builtins: Mapping[str, Pipeline], orchestration: Orchestration
) -> dict[str, Pipeline]:
    """The pipelines a repository runs: its own; under ``pipelines`` also the built-ins it does not
    override by name (but :data:`KEPT_BY_FRAMEWORK`)."""
    if orchestration != "pipelines":
        return dict(own)
    kept = {name: p for name, p in builtins.items() if name not in own and name not in KEPT_BY_FRAMEWORK}
    return {**kept, **own}
