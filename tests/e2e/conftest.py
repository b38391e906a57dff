"""The local stack for end-to-end tests: started per test, stopped with no agent process left.

``local_stack(...)`` starts a :class:`LocalStack` with a scripted model policy and options;
:class:`Human` acts on the GitHub sandbox through its REST API as a person would.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.domain.agents import AgentRecord
from squadron.local.model import Json, Policy
from squadron.local.stack import LocalStack
from squadron.local.wiring import LocalOptions

ROOT = Path(__file__).resolve().parents[2]
StackFactory = Callable[..., LocalStack]


def eventually(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StackFactory]:
    """Start a local stack with ``policy`` and any other :class:`LocalOptions` field."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    started: list[LocalStack] = []

    def start(policy: Policy | None = None, **options: Any) -> LocalStack:
        options.setdefault("reconcile_seconds", 3600)  # tests run the reconciler themselves
        options.setdefault("pm_linger_seconds", 1)  # tests wait for the PM to finish
        local = LocalStack(
            LocalOptions(root=ROOT, state_dir=tmp_path / "state", model_policy=policy, **options)
        )
        started.append(local)
        local.start()
        return local

    try:
        yield start
    finally:
        for local in started:
            local.stop()
            assert local.launcher is None or local.launcher.running() == []  # no orphan agent


@pytest.fixture
def stack(local_stack: StackFactory) -> LocalStack:
    return local_stack()


class Human:
    """A person acting on one sandbox repository through GitHub's REST API."""

    def __init__(self, stack: LocalStack, login: str = "octo-human", repo: str | None = None) -> None:
        assert stack.sandbox is not None
        self.stack = stack
        self.repo = repo or stack.options.repo
        self.http = httpx.Client(
            base_url=f"{stack.sandbox.base_url}/repos/{self.repo}",
            headers={"authorization": f"token human:{login}"},
            timeout=30,
        )

    def call(self, method: str, path: str, **body: Any) -> Any:
        answer = self.http.request(method, path, json=body or None)
        assert answer.is_success, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else None

    def open_issue(self, title: str, *, body: str = "", assign: bool = False) -> int:
        issue = self.call("POST", "/issues", title=title, body=body or title)
        if assign:
            self.assign(int(issue["number"]))
        return int(issue["number"])

    def assign(self, number: int, login: str = "squadron[bot]") -> None:
        self.call("POST", f"/issues/{number}/assignees", assignees=[login])

    def close(self, number: int) -> None:
        self.call("PATCH", f"/issues/{number}", state="closed")

    def comment(self, number: int, body: str) -> None:
        self.call("POST", f"/issues/{number}/comments", body=body)


def registry(stack: LocalStack) -> DynamoRegistry:
    assert stack.resources is not None
    return DynamoRegistry(stack.resources.table_name)


def agent(stack: LocalStack, agent_id: str) -> AgentRecord | None:
    return registry(stack).get_agent(agent_id)


def launches(stack: LocalStack, agent_id: str) -> list[str]:
    """The purposes of every process started for ``agent_id`` (start, wake, recover...)."""
    assert stack.launcher is not None
    return [purpose for who, purpose in stack.launcher.launches if who == agent_id]


def issue_of(request: Json) -> int | None:
    """The issue a dev agent's conversation is about (its first prompt names it)."""
    for message in request.get("messages", []):
        if message.get("role") == "user":
            found = re.search(r"Start on issue #(\d+)", _text(message.get("content")))
            if found:
                return int(found.group(1))
    return None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def prompts(request: Json) -> list[str]:
    return [_text(m.get("content")) for m in request.get("messages", []) if m.get("role") == "user"]
