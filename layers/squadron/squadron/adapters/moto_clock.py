"""A test clock for the local stack's moto server: its Step Functions ``Wait`` states pass faster.

A pipeline's waits are hours long by design: a human stage reminds its people at most once an
hour (``MIN_REMINDER_INTERVAL``), a delay or a poll waits minutes. A test of the local stack that
plays a reminder cannot wait an hour, and must not sleep for a guessed time either: it waits for
the reminder's comment. With a scale of N, every ``Wait`` state of moto's interpreter (``Seconds``,
``SecondsPath``, ``Timestamp``) waits ``ceil(seconds / N)`` seconds, at least one when it waits at
all: the run's states keep their order, only time is compressed. Task timeouts
(``TimeoutSeconds``) and the state machine's own are untouched, so a stage still times out when
its configuration says: a timeout is measured against work this clock does not compress (an
agent's real run, CI, the test's own steps), and scaled it would time out a stage the test plays
at real speed (issue 30 asked; a test of a timeout writes a short one, ``timeout: 1s``).

Only the local stack's moto server takes it (:class:`squadron.adapters.local_aws.MotoProcess` sets
:data:`SCALE_ENV` from ``LocalOptions.wait_scale``; docs/local-stack.md): the definitions the
router publishes are the same as in a deployment, and AWS's Step Functions never sees a scale.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

#: The moto server's environment variable: how many times faster its ``Wait`` states pass.
SCALE_ENV = "SQUADRON_LOCAL_WAIT_SCALE"


def scaled(seconds: int, scale: int) -> int:
    """How long a ``Wait`` of ``seconds`` lasts at ``scale``: never zero for a wait that waits (moto
    counts waited time in whole seconds), never longer than written."""
    if seconds <= 0:
        return seconds
    return max(1, math.ceil(seconds / scale))


def scale_of(environ: Mapping[str, str]) -> int:
    """The scale :data:`SCALE_ENV` asks for (1 when unset). Raises ValueError for anything but a
    positive whole number."""
    text = environ.get(SCALE_ENV, "1").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{SCALE_ENV}={text!r}: a whole number of at least 1")
    return int(text)


def compress_waits(scale: int) -> None:
    """Make every ``Wait`` state of this process's moto interpreter ``scale`` times shorter
    (idempotent for the same scale; 1 leaves them as they are)."""
    if scale < 1:
        raise ValueError(f"a wait scale is at least 1, not {scale}")
    # moto's, imported here: the local stack reads SCALE_ENV without loading moto
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (  # noqa: PLC0415
        WaitFunction,
    )

    held = getattr(WaitFunction._eval_body, "_scale", None)
    if held is not None:
        if held != scale:
            raise ValueError(f"moto's waits are already {held} times shorter")
        return
    if scale == 1:
        return
    original = WaitFunction._eval_body

    @functools.wraps(original)
    def eval_body(self: Any, env: Any) -> None:
        # moto's own _wait_interval, with the scaled time (it waits again after an interruption
        # for what is left of that time, never of the written one)
        self._wait_interval(env=env, wait_seconds=scaled(self._get_wait_seconds(env=env), scale))

    eval_body._scale = scale  # type: ignore[attr-defined]
    WaitFunction._eval_body = eval_body  # type: ignore[method-assign]
