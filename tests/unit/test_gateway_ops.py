"""The agent gateway dispatches each request's ``op`` from one table: every operation a task may
ask for has exactly one handler, and nothing answers an op no request names."""

from __future__ import annotations

from typing import get_args

from squadron.shell.gateway import HANDLERS, Request


def test_every_request_has_its_handler_and_every_handler_its_request() -> None:
    ops = {model.model_fields["op"].annotation.__args__[0] for model in get_args(Request)}
    assert len(ops) == len(get_args(Request)) == 21
    assert set(HANDLERS) == ops
