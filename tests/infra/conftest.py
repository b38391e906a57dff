"""One synthesis of the whole app, shared by every infra test (synth takes seconds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from infra.app import build
from tests.infra.synth import SETTINGS_CONTEXT, Synthesized, cdk_json_context


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Synthesize once, with cdk-nag: app.synth() raises if any finding is unacknowledged."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(context={**cdk_json_context(), **SETTINGS_CONTEXT}, outdir=str(outdir))
    stack = build(app)
    assembly = app.synth()
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    template_json: Mapping[str, Any] = artifact.template
    return Synthesized(
        stack=stack,
        template=assertions.Template.from_json(dict(template_json)),
        template_json=template_json,
        template_path=outdir / artifact.template_file,
        outdir=outdir,
    )
