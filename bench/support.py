"""What several benchmarks share: a scoped environment and freshly loaded Lambda handler modules."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType

from tests.support.lambdas import load_handler

#: Never real AWS: moto answers, with throwaway credentials in one region.
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
AWS_UNSET = ("AWS_PROFILE", "AWS_ENDPOINT_URL")

#: The in-process Lambdas neither print metrics nor trace, and log only what is critical, so
#: writing to the terminal does not dominate what is measured.
QUIET_LAMBDA = {
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "CRITICAL",
    "POWERTOOLS_SERVICE_NAME": "bench",
    "POWERTOOLS_METRICS_NAMESPACE": "SquadronBench",
    "POWERTOOLS_DEV": "0",
}


@contextmanager
def scoped_env(values: Mapping[str, str], unset: tuple[str, ...] = ()) -> Iterator[None]:
    """``values`` set and ``unset`` removed in ``os.environ``, all restored on the way out."""
    saved = {name: os.environ.get(name) for name in (*values, *unset)}
    try:
        for name in unset:
            os.environ.pop(name, None)
        os.environ.update(values)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def fresh_handler(name: str) -> Iterator[ModuleType]:
    """functions/<name>/handler.py loaded now (reading the current environment), then forgotten.

    Forgotten so that a later benchmark (the local stack) loads its own, wired to its own AWS.
    """
    module_name = f"{name}_handler"
    sys.modules.pop(module_name, None)
    try:
        yield load_handler(name)
    finally:
        sys.modules.pop(module_name, None)
