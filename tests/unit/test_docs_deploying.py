"""The deploy steps (docs/operations.md), as a deployer follows them top to bottom."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGION = re.compile(r"\b[a-z]{2}(?:-[a-z]+)+-\d\b")


def _deploying() -> str:
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    start = page.index("\n## Deploying\n")
    return page[start : page.index("\n## ", start + 1)]


def test_the_deploy_steps_use_one_region_throughout() -> None:
    """A bootstrap in one region and a stack in another (or secrets filled in a third) fail late
    and confusingly; every command of the steps names the same region, and the aws CLI gets it."""
    section = _deploying()
    assert set(REGION.findall(section)) == {"eu-west-1"}
    assert "export AWS_REGION=eu-west-1" in section


def test_the_node_version_asked_for_is_supported() -> None:
    """aws-cdk-lib's jsii reports Node 20 end-of-life: the guide asks for Node 22 LTS."""
    section = _deploying()
    assert "Node 22 LTS" in section
    assert not re.search(r"Node 20\+|Node 18", section)


def test_make_runs_the_cdk_on_node_22_and_silences_no_node_warning() -> None:
    """`make setup` brings Node 22 LTS (the npm registry's node-<platform>-<arch> package) and every
    target runs with it first on PATH, instead of silencing jsii's end-of-life warning for Node 20."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "JSII_SILENCE_WARNING" not in makefile
    version = re.search(r"^NODE_VERSION := (22\.\d+\.\d+)$", makefile, re.M)
    assert version is not None, "make setup must bring Node 22 LTS"
    assert re.search(r"^export PATH := \$\(NODE_BIN\):\$\(PATH\)$", makefile, re.M)
    assert re.search(r"^\$\(NODE_STAMP\): .*\$\(NODE\)$", makefile, re.M)  # npm ci and the CLIs run on it
    for node in (ROOT / ".node" / "node_modules").glob("node-*/bin/node"):  # after `make setup`
        said = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
        assert said.strip() == f"v{version.group(1)}"
