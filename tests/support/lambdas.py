"""Loading Lambda handler modules from functions/ and building the events AWS sends them."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from squadron.local import lambda_events
from squadron.local.lambda_events import FakeLambdaContext, http_api_event, sqs_lambda_event

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "FakeLambdaContext", "http_api_event", "load_handler", "sqs_lambda_event"]


def load_handler(name: str) -> ModuleType:
    """Import functions/<name>/handler.py as the module ``<name>_handler`` (once)."""
    return lambda_events.load_handler(ROOT, name)
