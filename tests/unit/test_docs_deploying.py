"""The deploy steps (docs/operations.md), as a deployer follows them top to bottom."""

from __future__ import annotations

import re
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
