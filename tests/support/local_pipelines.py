"""Pipelines in the local stack (tests/e2e): a repository's ``pipelines:`` written into the GitHub
sandbox's default branch, branches pushed as a person pushes them, and a pipeline's executions
followed on the stack's moto server (their status and history), every wait for a condition.

A test of another stage type (agent, human) starts the stack with ``files={CONFIG:
config_with(pipelines)}`` (or pushes one mid-run with :meth:`LocalPipelines.write_config`), opens
what triggers it (:meth:`LocalPipelines.open_pull`, or an issue), and follows the run with
:meth:`LocalPipelines.run_of`, :meth:`LocalPipelines.entered` and :meth:`LocalPipelines.finished`
(tests/e2e/test_local_pipelines.py shows each).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import boto3
import httpx
import yaml

from squadron.adapters.step_functions import Pipelines, RunView
from squadron.local.stack import LocalStack
from tests.support.git_remote import IDENTITY

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ".squadron/config.yaml"
FLOWS = ".squadron/workflows/approval-flows.yaml"
#: Long enough for a loaded machine; every wait ends as soon as its condition holds.
DEADLINE = 90.0

T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], deadline: float = DEADLINE) -> T:
    """``probe()``'s first answer that is neither None nor False, polled until ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"waited {deadline:.0f} s for {what}")
        time.sleep(0.2)


def config_with(pipelines: dict[str, Any]) -> str:
    """This repository's own ``.squadron/config.yaml`` (the sandbox's seed) with ``pipelines``."""
    own = (ROOT / CONFIG).read_text(encoding="utf-8")
    assert "\npipelines:" not in own, "the seed has pipelines of its own: merge them here"
    return own + "\n" + yaml.safe_dump({"pipelines": pipelines}, sort_keys=False)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=IDENTITY, capture_output=True, text=True, check=True)
    return done.stdout.strip()


class LocalPipelines:
    """One local stack's sandbox repository and the state machines its pipelines run on."""

    def __init__(self, stack: LocalStack, repo: str | None = None) -> None:
        assert stack.sandbox is not None and stack.resources is not None
        self.stack = stack
        self.repo = stack.sandbox.repos[repo or stack.options.repo]
        resources = stack.resources
        self.sfn = boto3.client("stepfunctions", endpoint_url=resources.endpoint, region_name="us-east-1")
        self.pipelines = Pipelines(
            prefix=resources.pipelines_prefix, role_arn=resources.pipelines_role_arn, client=self.sfn
        )

    # --- the repository ------------------------------------------------------------------------

    def push(self, branch: str, files: dict[str, str], message: str) -> str:
        """A person commits ``files`` on ``branch`` (from the default branch when it is new) and
        pushes it to the sandbox; the new head's sha."""
        default = self.repo.default_branch
        with tempfile.TemporaryDirectory(prefix="sq-push-") as scratch:
            work = Path(scratch)
            _git(work, "clone", "--quiet", str(self.repo.store.path), ".")
            start = branch if self.repo.store.sha(f"refs/heads/{branch}") else default
            _git(work, "checkout", "--quiet", "-B", branch, f"origin/{start}")
            for name, text in files.items():
                (work / name).parent.mkdir(parents=True, exist_ok=True)
                (work / name).write_text(text, encoding="utf-8")
            _git(work, "add", "--all")
            _git(work, "commit", "--quiet", "-m", message)
            _git(work, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
            return _git(work, "rev-parse", "HEAD")

    def open_pull(self, branch: str, title: str, *, login: str = "octo-human") -> dict[str, Any]:
        """``login`` pushes a branch with one new file and opens a pull request of it into the
        default branch (the sandbox sends ``pull_request.opened``); GitHub's answer."""
        sandbox = self.stack.sandbox
        assert sandbox is not None
        self.push(branch, {f"docs/{branch}.md": f"# {title}\n"}, title)
        answer = httpx.post(
            f"{sandbox.base_url}/repos/{self.repo.full_name}/pulls",
            headers={"authorization": f"token human:{login}"},
            json={"title": title, "head": branch, "base": self.repo.default_branch, "body": title},
            timeout=30,
        )
        assert answer.is_success, answer.text
        pull: dict[str, Any] = answer.json()
        return pull

    def write_config(self, pipelines: dict[str, Any], message: str = "Change the pipelines") -> str:
        """Push a configuration with ``pipelines`` to the default branch (what the router reads)."""
        return self.push(self.repo.default_branch, {CONFIG: config_with(pipelines)}, message)

    def comments(self, number: int) -> list[str]:
        """The bodies of the comments on issue or pull request ``number``, oldest first."""
        return [str(c["body"]) for c in self.repo.comments.get(number, [])]

    def said(self, number: int, text: str) -> bool:
        """Whether the App commented ``text`` on issue or pull request ``number``."""
        return any(
            text in str(c["body"]) and c["user"]["login"] == self.bot
            for c in self.repo.comments.get(number, [])
        )

    @property
    def bot(self) -> str:
        """The App's login in the sandbox."""
        sandbox = self.stack.sandbox
        assert sandbox is not None
        return sandbox.bot_login

    def labels(self, number: int) -> set[str]:
        return {str(label["name"]) for label in self.repo.issues[number].get("labels", [])}

    def routed(self, event: str, action: str, number: int) -> bool:
        """Whether the router has handled (and its outbox carried out) the sandbox's ``event``
        ``action`` webhook about ``number``."""
        sandbox = self.stack.sandbox
        assert sandbox is not None
        guids = {
            d.guid
            for d in list(sandbox.deliveries)
            if d.event == event
            and d.action == action
            and (d.payload.get("pull_request") or d.payload.get("issue") or {}).get("number") == number
        }
        return any(r["delivery"] in guids and not r["failed"] for r in list(self.stack.routed))

    # --- the runs ------------------------------------------------------------------------------

    def machine(self, pipeline: str) -> str:
        return self.pipelines.state_machine_arn(self.repo.id, pipeline)

    def executions(self, pipeline: str) -> list[dict[str, Any]]:
        """The pipeline's executions, newest first (none before its first run publishes it)."""
        try:
            found: list[dict[str, Any]] = self.sfn.list_executions(stateMachineArn=self.machine(pipeline))[
                "executions"
            ]
        except self.sfn.exceptions.StateMachineDoesNotExist:
            return []
        return sorted(found, key=lambda e: e["startDate"], reverse=True)

    def run_of(self, pipeline: str, number: int) -> str:
        """The ARN of the pipeline's run about issue or pull request ``number``, once it started."""

        def probe() -> str | None:
            for execution in self.executions(pipeline):
                held = json.loads(
                    self.sfn.describe_execution(executionArn=execution["executionArn"])["input"]
                )
                if held.get("squadron", {}).get("issue_number") == number:
                    return str(execution["executionArn"])
            return None

        return until(f"a run of {pipeline!r} about #{number}", probe)

    def versions(self, pipeline: str) -> int:
        """How many versions of the pipeline's state machine are published (1, 2, ...)."""
        count = 0
        while True:
            try:
                self.sfn.describe_state_machine(stateMachineArn=f"{self.machine(pipeline)}:{count + 1}")
            except self.sfn.exceptions.StateMachineDoesNotExist:
                return count
            count += 1

    def view(self, execution_arn: str) -> RunView:
        seen = self.pipelines.describe(execution_arn)
        assert seen is not None, execution_arn
        return seen

    def finished(self, execution_arn: str) -> RunView:
        """The run's view once it is no longer running."""

        def probe() -> RunView | None:
            seen = self.view(execution_arn)
            return None if seen.status == "RUNNING" else seen

        return until(f"{execution_arn} to end", probe)

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self.sfn.get_execution_history(
                executionArn=execution_arn, **({"nextToken": token} if token else {})
            )
            events += page["events"]
            token = page.get("nextToken")
            if not token:
                return events

    def entered(self, execution_arn: str) -> list[str]:
        """The states the run entered, in order (a state entered twice is listed twice)."""
        return [
            e[key]["name"]
            for e in self.history(execution_arn)
            for key in e
            if key == "stateEnteredEventDetails"
        ]

    def exited_at(self, execution_arn: str, state: str) -> datetime:
        """When the run last left ``state``."""
        (*_, last) = [
            e["timestamp"]
            for e in self.history(execution_arn)
            if e.get("stateExitedEventDetails", {}).get("name") == state
        ]
        return cast(datetime, last)

    def outputs(self, execution_arn: str, state: str) -> list[Any]:
        """What each exit of ``state`` gave, as JSON."""
        return [
            json.loads(e["stateExitedEventDetails"]["output"])
            for e in self.history(execution_arn)
            if e.get("stateExitedEventDetails", {}).get("name") == state
        ]
