"""X-Ray tracing by configuration, not by import.

Building Powertools' ``Tracer`` imports the X-Ray SDK (the largest single import of a handler,
bench/results/cold_start.json) even when tracing is off. :class:`Tracing` builds it only when the
function's environment turns tracing on, by Powertools' own rule: inside Lambda, unless
``POWERTOOLS_TRACE_DISABLED`` is true (and never under SAM's or Chalice's local emulators). When
tracing is off its decorators return the function unchanged, which is what a disabled ``Tracer``
amounts to (it records nothing), without the SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

#: Powertools' switch (aws_lambda_powertools.shared.constants.TRACER_DISABLED_ENV).
TRACE_DISABLED_ENV = "POWERTOOLS_TRACE_DISABLED"
_LAMBDA_ENV = "LAMBDA_TASK_ROOT"
_EMULATOR_ENVS = ("AWS_SAM_LOCAL", "AWS_CHALICE_CLI_MODE")
_TRUE = frozenset({"1", "y", "yes", "t", "true", "on"})  # Powertools' strtobool

F = TypeVar("F", bound=Callable[..., Any])


def tracing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process traces with X-Ray: in Lambda, and not turned off."""
    env = os.environ if environ is None else environ
    if env.get(TRACE_DISABLED_ENV, "false").strip().lower() in _TRUE:
        return False
    return bool(env.get(_LAMBDA_ENV)) and not any(env.get(name) for name in _EMULATOR_ENVS)


class Tracing:
    """Powertools' ``Tracer`` decorators when tracing is on; the function itself when it is off."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.tracer: Tracer | None = None
        if tracing_enabled(environ):
            from aws_lambda_powertools import Tracer  # noqa: PLC0415 (imports the X-Ray SDK)

            self.tracer = Tracer()

    def capture_lambda_handler(self, handler: F) -> F:
        if self.tracer is None:
            return handler
        return cast("F", self.tracer.capture_lambda_handler(handler))

    def capture_method(self, method: F) -> F:
        if self.tracer is None:
            return method
        return self.tracer.capture_method(method)
