"""The ingress loads what a request needs when it needs it (issue 21): behaviour, never timing.

Each case runs a fresh interpreter (imports are process-wide) and asserts on which modules it
loaded: X-Ray only when tracing is on, no envelope models before an event is accepted, and no
settings models, ports or routing tables at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from squadron.shell.tracing import Tracing, tracing_enabled
from tests.support.webhook_examples import example

ROOT = Path(__file__).resolve().parents[2]
INGRESS = ROOT / "functions" / "ingress"

#: Modules a webhook does not need at import: the X-Ray SDK, pydantic's models of the envelope
#: and of the settings, the ports (every domain model), the routing core and the config loader.
NOT_AT_IMPORT = (
    "aws_xray_sdk",
    "pydantic",
    "squadron.domain.events",
    "squadron.domain.event_fields",
    "squadron.domain.event_trimming",
    "squadron.domain.commands",
    "squadron.settings",
    "squadron.ports",
    "squadron.domain.routing",
    "squadron.config",
)


def _loaded(code: str, *, cwd: Path = ROOT, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT / "layers" / "squadron"),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _lambda_env(*, trace_disabled: str) -> dict[str, str]:
    return {
        "LAMBDA_TASK_ROOT": str(INGRESS),
        "AWS_LAMBDA_FUNCTION_NAME": "squadron-ingress",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": trace_disabled,
        "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
    }


def test_importing_the_ingress_handler_leaves_out_what_a_webhook_does_not_need() -> None:
    loaded = _loaded("import handler", cwd=INGRESS, env=_lambda_env(trace_disabled="true"))
    assert "handler" in loaded  # the import did happen
    assert "boto3" in loaded  # every signed request reads the secret: boto3 is no surprise
    assert [m for m in NOT_AT_IMPORT if m in loaded] == []


def test_the_ingress_imports_xray_when_its_environment_turns_tracing_on() -> None:
    loaded = _loaded("import handler", cwd=INGRESS, env=_lambda_env(trace_disabled="false"))
    assert "aws_xray_sdk.core" in loaded


# A signed body, triaged by the pure core in a fresh interpreter: which modules did it need?
_TRIAGE = """
from datetime import UTC, datetime
import json
from squadron.domain.webhook import AppIdentity, sign, triage_webhook
body = json.dumps({payload}).encode()
decision = triage_webhook(
    headers={{"x-github-event": "{event}", "x-github-delivery": "d-1", "x-hub-signature-256": sign(body, "s")}},
    body=body, secret="s", app=AppIdentity(app_id=7, slug="squadron"), max_body_bytes=1 << 20,
    received_at=datetime.now(UTC),
)
assert type(decision).__name__ == "{kind}", decision
"""

_ISSUE = example("issues", "opened")


@pytest.mark.parametrize(
    ("event", "payload", "kind", "envelope_models"),
    [
        ("ping", {"zen": "Keep it simple.", "hook_id": 1}, "Pong", False),
        ("star", {"action": "created", "sender": {"login": "a", "id": 1}}, "Dropped", False),
        ("issues", {**_ISSUE, "action": "milestoned"}, "Dropped", False),
        ("issues", {**_ISSUE, "sender": {"login": "squadron[bot]", "id": 9}}, "Dropped", False),
        ("issues", _ISSUE, "Accepted", True),
    ],
    ids=["ping", "unrouted-event", "unrouted-action", "own-event", "accepted"],
)
def test_only_an_accepted_event_builds_the_envelope_models(
    event: str, payload: dict[str, object], kind: str, envelope_models: bool
) -> None:
    loaded = _loaded(_TRIAGE.format(payload=repr(payload), event=event, kind=kind))
    assert ("squadron.domain.events" in loaded) is envelope_models
    assert ("pydantic" in loaded) is envelope_models


@pytest.mark.parametrize(
    ("environ", "enabled"),
    [
        ({}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "1"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"}, False),
        ({"POWERTOOLS_TRACE_DISABLED": "false"}, False),
    ],
    ids=[
        "outside-lambda",
        "lambda",
        "disabled",
        "disabled-1",
        "not-disabled",
        "sam-local",
        "false-not-lambda",
    ],
)
def test_tracing_follows_powertools_rule(environ: dict[str, str], enabled: bool) -> None:
    assert tracing_enabled(environ) is enabled


def test_without_tracing_the_decorators_return_the_function_itself() -> None:
    tracing = Tracing({})

    def handler(event: dict[str, object], context: object) -> dict[str, object]:
        return event

    assert tracing.tracer is None
    assert tracing.capture_lambda_handler(handler) is handler
    assert tracing.capture_method(handler) is handler
