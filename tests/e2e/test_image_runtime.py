"""The agent image's runtime, without a container engine: a dev agent's whole turn through it.

The package installed with pip into a clean environment (not this checkout), the one Copilot
binary and its read-only package cache, the environment stripped to the Dockerfile's and the task
definition's (plus the local stack's stand-ins for AWS, GitHub and the model), run as root as
the task definition says: the agent starts, edits, pushes its branch and opens its pull request.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from squadron.local.model import Json, Turn, calls_since_prompt
from squadron.local.wiring import AgentRuntime
from tests.e2e.conftest import Human, StackFactory, eventually, issue_of
from tests.support.git_remote import let_others_pass
from tests.support.image_runtime import ROOT, assemble, dockerfile_env

pytestmark = pytest.mark.e2e

CACHE = ROOT / "tests" / ".cache" / "image-runtime"


@pytest.fixture(scope="module")
def runtime() -> tuple[AgentRuntime, Path]:
    built = assemble(CACHE)
    let_others_pass(built[1])
    return built


def test_the_runtime_is_the_installed_package_and_the_images_environment_only(
    runtime: tuple[AgentRuntime, Path],
) -> None:
    agent_runtime, prefix = runtime
    python = agent_runtime.command[0]
    found = subprocess.run(
        [python, "-c", "import squadron, copilot; print(squadron.__file__)"],
        env=agent_runtime.environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found.startswith(str(prefix)) and str(ROOT / "layers") not in found  # not this checkout
    image = dockerfile_env()
    assert set(agent_runtime.environment) == {
        "PATH",
        "HOME",
        *image,
        "AGENT_GATEWAY_FUNCTION",
        "SQUADRON_AGENTS_ROOT",
        "XDG_CACHE_HOME",
    }
    cli = Path(agent_runtime.environment["COPILOT_CLI_PATH"])
    assert cli.is_file() and cli.stat().st_size > 50 * 1024 * 1024  # the one binary


class DevTurn:
    """A dev agent that edits a file, pushes its branch and opens its PR."""

    def __init__(self) -> None:
        self.root = Path("/nonexistent")
        self.answered: list[Turn] = []

    def __call__(self, request: Json) -> Turn | None:
        if issue_of(request) != 1:
            return None
        plan: list[Turn] = [
            (
                "create",
                {
                    "path": str(self.root / "agents" / "1-1-feat-dev" / "work" / "export.py"),
                    "file_text": "x = 1\n",
                },
            ),
            ("open_pr", {"title": "Export", "body": "Closes #1. Built in the image's runtime."}),
            ("report_complete", {"summary": "PR open"}),
        ]
        done = calls_since_prompt(request)
        turn = plan[len(done)] if len(done) < len(plan) else "Done."
        self.answered.append(turn)
        return turn


@pytest.mark.skipif(os.geteuid() != 0, reason="the task definition runs the host as root (CI runs as root)")
def test_a_dev_agent_works_through_the_images_runtime(
    runtime: tuple[AgentRuntime, Path], local_stack: StackFactory
) -> None:
    policy = DevTurn()
    stack = local_stack(policy, agent_runtime=runtime[0])
    policy.root = stack.repo_root(1)
    assert stack.sandbox is not None
    Human(stack).open_issue("Export the registry", assign=True)
    eventually(
        lambda: any(isinstance(t, tuple) and t[0] == "report_complete" for t in policy.answered), "the PR"
    )
    store = stack.sandbox.repos[stack.options.repo].store
    assert store.read("feat/issue-1", "export.py") == "x = 1\n"
    (pull,) = stack.sandbox.repos[stack.options.repo].pulls.values()
    assert pull["head"]["ref"] == "feat/issue-1"
