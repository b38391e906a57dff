"""A repository's pipelines on AWS Step Functions (boto3 ``stepfunctions``; the only importer).

- :meth:`Pipelines.ensure` keeps a repository's pipeline's state machine in step with its compiled
  definition and publishes a version per change: the same definition publishes nothing (the
  state machine's ``squadron:definition`` tag holds the digest of its latest version's
  definition, ``squadron:version`` that version's number).
- :meth:`Pipelines.start` starts a run on a version ARN (a run keeps the definition it started
  with) under a deterministic name: a retried start is the same run (Standard workflows: same
  name and input while it runs is the same execution; afterwards ``ExecutionAlreadyExists``, read
  here as "already started"; the same name with another input is a :class:`RunConflictError`).
- :meth:`Pipelines.answer` and :meth:`Pipelines.heartbeat` answer a stage's task token; a token
  whose task is over (timed out, its run stopped or finished: ``TaskTimedOut``,
  ``InvalidToken``, ``TaskDoesNotExist``) is answered "gone" with the service's reason, never an
  error to retry forever.
- :meth:`Pipelines.stop` stops a run and, after it, the child runs it started (sub-pipelines:
  their input names the parent under ``AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID``), to any depth;
  :meth:`Pipelines.stop_children` only the child runs.

See docs/architecture.md, "Pipelines on Step Functions".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError
from squadron.domain.pipeline_wire import (
    STARTED_BY,
    StageFailed,
    StageSucceeded,
    definition_digest,
    machine_head,
    machines_head,
    state_machine_name,
)

DIGEST_TAG = "squadron:definition"
VERSION_TAG = "squadron:version"
REPOSITORY_TAG = "squadron:repository"
PIPELINE_TAG = "squadron:pipeline"
#: Token answers that mean the task is over: nothing to retry.
GONE = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})
#: How many runs :meth:`Pipelines.stop` looks through for children, per state machine.
MAX_RUNNING_LISTED = 1000

Published = Literal["created", "published", "unchanged"]
Started = Literal["started", "already started"]
RunStatus = Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE"]


class StepFunctionsUnavailableError(AdapterError):
    """A Step Functions call failed; the message says which call and why (retry later)."""


class RunConflictError(AdapterError):
    """A run's deterministic name is taken by a run with another input: a different start."""


@dataclass(frozen=True)
class Pipeline:
    state_machine_arn: str
    version_arn: str
    outcome: Published
    digest: str


@dataclass(frozen=True)
class Run:
    execution_arn: str
    outcome: Started


@dataclass(frozen=True)
class Answer:
    delivered: bool
    #: Why the answer found no task waiting (the service's error code), when it did not.
    gone: str | None = None


@dataclass(frozen=True)
class RunView:
    execution_arn: str
    name: str
    state_machine_arn: str
    status: RunStatus
    started_at: datetime
    stopped_at: datetime | None
    input: dict[str, Any]
    output: Any
    error: str | None
    cause: str | None

    @property
    def parent(self) -> str | None:
        """The execution that started this one (a sub-pipeline's), if any."""
        value = self.input.get(STARTED_BY)
        return value if isinstance(value, str) else None


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class Pipelines:
    """Pipelines of one deployment: state machines named ``<prefix>_<repository id>-<pipeline>``,
    run by ``role_arn`` (the execution role)."""

    def __init__(self, *, prefix: str, role_arn: str, client: Any = None) -> None:
        self.prefix = prefix
        self.role_arn = role_arn
        self._client = client
        parts = role_arn.split(":")
        if len(parts) < 6 or parts[2] != "iam" or not parts[4].isdigit():
            raise ValueError(f"not an IAM role ARN: {role_arn!r}")
        self._partition, self._account = parts[1], parts[4]

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("stepfunctions")
        return self._client

    def _call(self, operation: str, *, quiet: frozenset[str] = frozenset(), **kwargs: Any) -> Any:
        """The call's answer; None when it failed with one of the ``quiet`` codes."""
        try:
            return getattr(self.client, operation)(**kwargs)
        except ClientError as exc:
            code = _code(exc)
            if code in quiet:
                return None
            raise StepFunctionsUnavailableError(
                f"Step Functions {operation} failed: {exc}", code=code
            ) from exc
        except BotoCoreError as exc:
            raise StepFunctionsUnavailableError(f"Step Functions {operation} failed: {exc}") from exc

    def state_machine_arn(self, repository_id: int, pipeline: str) -> str:
        region = self.client.meta.region_name
        name = state_machine_name(self.prefix, repository_id, pipeline)
        return f"arn:{self._partition}:states:{region}:{self._account}:stateMachine:{name}"

    # --- definitions and versions -------------------------------------------------------------

    def ensure(self, repository_id: int, pipeline: str, definition: str | dict[str, Any]) -> Pipeline:
        """The pipeline's state machine with ``definition`` as its latest published version."""
        text = definition if isinstance(definition, str) else _canonical(definition)
        digest = definition_digest(text)
        arn = self.state_machine_arn(repository_id, pipeline)
        held = self._call(
            "describe_state_machine", quiet=frozenset({"StateMachineDoesNotExist"}), stateMachineArn=arn
        )
        if held is None:
            created = self._call(
                "create_state_machine",
                quiet=frozenset({"StateMachineAlreadyExists"}),  # made meanwhile: read it below
                name=arn.rsplit(":", 1)[1],
                definition=text,
                roleArn=self.role_arn,
                type="STANDARD",
                publish=True,
                versionDescription=f"definition {digest}",
                tags=[
                    {"key": DIGEST_TAG, "value": digest},
                    {"key": VERSION_TAG, "value": "1"},
                    {"key": REPOSITORY_TAG, "value": str(repository_id)},
                    {"key": PIPELINE_TAG, "value": pipeline[:256]},
                ],
            )
            if created is not None and created.get("stateMachineVersionArn"):
                return Pipeline(arn, created["stateMachineVersionArn"], "created", digest)
            held = self._call("describe_state_machine", stateMachineArn=arn)
        version = self._latest_version(arn, digest)
        if version is not None and held.get("roleArn") == self.role_arn:
            return Pipeline(arn, version, "unchanged", digest)
        updated = self._call(
            "update_state_machine",
            stateMachineArn=arn,
            definition=text,
            roleArn=self.role_arn,
            publish=True,
            versionDescription=f"definition {digest}",
        )
        version_arn = updated["stateMachineVersionArn"]
        self._call(
            "tag_resource",
            resourceArn=arn,
            tags=[
                {"key": DIGEST_TAG, "value": digest},
                {"key": VERSION_TAG, "value": version_arn.rsplit(":", 1)[1]},
            ],
        )
        return Pipeline(arn, version_arn, "published", digest)

    def _latest_version(self, arn: str, digest: str) -> str | None:
        """The latest published version's ARN when its definition is ``digest``'s, else None.

        The tags name the version last published here; a publish whose tagging was lost (the
        caller stopped between the two calls) is found by looking past it.
        """
        tags = {
            t["key"]: t["value"]
            for t in self._call("list_tags_for_resource", resourceArn=arn).get("tags", [])
        }
        tagged = int(tags[VERSION_TAG]) if tags.get(VERSION_TAG, "").isdigit() else 0
        number = tagged
        while self._describe_version(arn, number + 1) is not None:
            number += 1
        if number == 0:
            return None
        if number == tagged and tags.get(DIGEST_TAG) == digest:
            return f"{arn}:{number}"
        held = self._describe_version(arn, number)
        if held is None or definition_digest(held["definition"]) != digest:
            return None
        self._call(
            "tag_resource",
            resourceArn=arn,
            tags=[{"key": DIGEST_TAG, "value": digest}, {"key": VERSION_TAG, "value": str(number)}],
        )
        return f"{arn}:{number}"

    def _describe_version(self, arn: str, number: int) -> dict[str, Any] | None:
        answer: dict[str, Any] | None = self._call(
            "describe_state_machine",
            quiet=frozenset({"StateMachineDoesNotExist"}),
            stateMachineArn=f"{arn}:{number}",
        )
        return answer

    # --- runs ---------------------------------------------------------------------------------

    def execution_arn(self, state_machine_arn: str, name: str) -> str:
        """A run's ARN: its state machine's (a version's ARN less its number), ``execution``, ``name``."""
        head, machine = state_machine_arn.split(":stateMachine:", 1)
        return f"{head}:execution:{machine.split(':', 1)[0]}:{name}"

    def start(self, version_arn: str, name: str, run_input: dict[str, Any]) -> Run:
        """Start a run of ``version_arn`` named ``name``; harmless when it was started already."""
        text = _canonical(run_input)
        started = self._call(
            "start_execution",
            quiet=frozenset({"ExecutionAlreadyExists"}),
            stateMachineArn=version_arn,
            name=name,
            input=text,
        )
        if started is not None:
            return Run(started["executionArn"], "started")
        arn = self.execution_arn(version_arn, name)
        held = self._call("describe_execution", executionArn=arn)
        if _canonical(json.loads(held.get("input") or "{}")) != text:
            raise RunConflictError(f"run {arn} exists with another input", code="ExecutionAlreadyExists")
        return Run(arn, "already started")

    def describe(self, execution_arn: str) -> RunView | None:
        held = self._call(
            "describe_execution", quiet=frozenset({"ExecutionDoesNotExist"}), executionArn=execution_arn
        )
        return None if held is None else _view(held)

    def history(self, execution_arn: str, limit: int) -> list[dict[str, Any]]:
        """The run's newest ``limit`` history events (one page, newest first where the service
        honours ``reverseOrder``: sort by ``id`` to be sure)."""
        page = self._call(
            "get_execution_history", executionArn=execution_arn, reverseOrder=True, maxResults=limit
        )
        events: list[dict[str, Any]] = page.get("events", [])
        return events

    def runs(self, state_machine_arn: str, status: RunStatus | None = None) -> Iterator[dict[str, Any]]:
        """The state machine's runs, newest first (list items: ARN, name, status, dates)."""
        kwargs: dict[str, Any] = {"stateMachineArn": state_machine_arn}
        if status is not None:
            kwargs["statusFilter"] = status
        while True:
            page = self._call("list_executions", **kwargs)
            yield from page.get("executions", [])
            token = page.get("nextToken")
            if not token:
                return
            kwargs["nextToken"] = token

    def machines(self, repository_id: int) -> list[str]:
        """The ARNs of the repository's pipelines' state machines."""
        head = machine_head(self.prefix, repository_id)
        found: list[str] = []
        kwargs: dict[str, Any] = {}
        while True:
            page = self._call("list_state_machines", **kwargs)
            found += [
                m["stateMachineArn"] for m in page.get("stateMachines", []) if m["name"].startswith(head)
            ]
            token = page.get("nextToken")
            if not token:
                return found
            kwargs["nextToken"] = token

    def stop(self, execution_arn: str, *, error: str, cause: str) -> list[str]:
        """Stop a run and then every run it started, to any depth; the ARNs stopped now.

        The parent first: a sub-pipeline stopped while its parent still ran would fail the
        parent's stage, and the parent's ``Catch`` would carry on. A run already over is left.
        """
        view = self.describe(execution_arn)
        if view is None:
            return []
        stopped: list[str] = []
        if view.status == "RUNNING":
            self._call(
                "stop_execution",
                quiet=frozenset({"ExecutionDoesNotExist"}),
                executionArn=execution_arn,
                error=error[:256],
                cause=cause[:32768],
            )
            stopped.append(execution_arn)
        return stopped + self.stop_children(execution_arn, error=error, cause=cause)

    def stop_children(self, execution_arn: str, *, error: str, cause: str) -> list[str]:
        """Stop the runs ``execution_arn`` started that still run (and theirs, to any depth),
        leaving the run itself; the ARNs stopped now. A parallel stage that ended early abandons
        its sub-pipeline branches' tasks, not the child runs they started."""
        stopped: list[str] = []
        machine = execution_arn.split(":execution:", 1)[1].split(":", 1)[0]
        head = machines_head(self.prefix)
        repository = machine.removeprefix(head).split("-", 1)[0] if machine.startswith(head) else ""
        if not repository.isdigit():
            return stopped
        for machine_arn in self.machines(int(repository)):
            for listed, item in enumerate(self.runs(machine_arn, "RUNNING")):
                if listed >= MAX_RUNNING_LISTED:
                    break
                child = self.describe(item["executionArn"])
                if child is not None and child.parent == execution_arn:
                    stopped += self.stop(child.execution_arn, error=error, cause=cause)
        return stopped

    # --- task tokens --------------------------------------------------------------------------

    def answer(self, token: str, answer: StageSucceeded | StageFailed) -> Answer:
        """SendTaskSuccess or SendTaskFailure; "gone" (not an error) when the task is over."""
        try:
            if isinstance(answer, StageSucceeded):
                self.client.send_task_success(taskToken=token, output=answer.wire())
            else:
                self.client.send_task_failure(taskToken=token, error=answer.error, cause=answer.cause)
        except ClientError as exc:
            return self._gone("answer", exc)
        except BotoCoreError as exc:
            raise StepFunctionsUnavailableError(f"Step Functions answer failed: {exc}") from exc
        return Answer(delivered=True)

    def heartbeat(self, token: str) -> Answer:
        try:
            self.client.send_task_heartbeat(taskToken=token)
        except ClientError as exc:
            return self._gone("heartbeat", exc)
        except BotoCoreError as exc:
            raise StepFunctionsUnavailableError(f"Step Functions heartbeat failed: {exc}") from exc
        return Answer(delivered=True)

    @staticmethod
    def _gone(what: str, exc: ClientError) -> Answer:
        code = _code(exc)
        if code in GONE:
            return Answer(delivered=False, gone=code)
        raise StepFunctionsUnavailableError(f"Step Functions {what} failed: {exc}", code=code) from exc


def _view(held: dict[str, Any]) -> RunView:
    try:
        run_input = json.loads(held.get("input") or "{}")
    except ValueError:
        run_input = {}
    output = held.get("output")
    return RunView(
        execution_arn=held["executionArn"],
        name=held["name"],
        state_machine_arn=held["stateMachineArn"],
        status=held["status"],
        started_at=held["startDate"],
        stopped_at=held.get("stopDate"),
        input=run_input if isinstance(run_input, dict) else {},
        output=json.loads(output) if isinstance(output, str) else None,
        error=held.get("error"),
        cause=held.get("cause"),
    )
