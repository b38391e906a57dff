"""What a deployment's pipeline runs are doing, read from Step Functions (boto3, through
:class:`~squadron.adapters.step_functions.Pipelines`): ``squadron pipelines list|show|cancel``
and the dashboard issue's "Pipelines" section.

A run's current stages are parsed from its execution history by the pure
:func:`squadron.domain.pipeline_runs.current_stages`. Only the deployment's own state machines
(``<prefix>_...``) are read or stopped: a run of another prefix is refused, never stopped.
See docs/operations.md, "Pipelines".
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.step_functions import Pipelines, RunStatus, StepFunctionsUnavailableError
from squadron.domain.pipeline_runs import (
    RunSummary,
    arn_of_run,
    child_runs,
    current_stages,
    pipeline_of,
    repository_of,
)
from squadron.domain.pipeline_wire import RUN_CANCELLED, STARTED_BY, execution_head
from squadron.errors import SquadronError

#: Step Functions keeps at most 25,000 events of a run: the history is read whole, page by page.
HISTORY_PAGE = 1000
#: Runs listed at most per state machine and status (newest first).
MAX_LISTED = 1000


class RunRefusedError(SquadronError):
    """A run that is not this deployment's, or that does not exist: nothing was done."""


@dataclass(frozen=True)
class Listing:
    runs: list[RunSummary]
    #: Runs that matched and were left out (the limit).
    more: int


class PipelineRuns:
    """One deployment's runs (``pipelines.prefix``)."""

    def __init__(self, pipelines: Pipelines) -> None:
        self.pipelines = pipelines
        self.prefix = pipelines.prefix

    def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.pipelines.client, operation)(**kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            raise StepFunctionsUnavailableError(
                f"Step Functions {operation} failed: {exc}", code=code
            ) from exc
        except BotoCoreError as exc:
            raise StepFunctionsUnavailableError(f"Step Functions {operation} failed: {exc}") from exc

    def machines(self, repository_ids: Sequence[int] | None = None) -> list[str]:
        """The deployment's state machines (of ``repository_ids`` only, when given)."""
        if repository_ids is not None:
            return [arn for repository in repository_ids for arn in self.pipelines.machines(repository)]
        found: list[str] = []
        kwargs: dict[str, Any] = {}
        while True:
            page = self._call("list_state_machines", **kwargs)
            found += [
                m["stateMachineArn"]
                for m in page.get("stateMachines", [])
                if repository_of(self.prefix, f"{execution_head(m['stateMachineArn'])}:x") is not None
            ]
            if not page.get("nextToken"):
                return found
            kwargs["nextToken"] = page["nextToken"]

    def arn(self, run: str) -> str:
        """The execution ARN ``run`` names (ARN or ``<state machine>:<run name>``), when it is one
        of this deployment's runs; else :class:`RunRefusedError`."""
        role = self.pipelines.role_arn.split(":")
        region = str(self.pipelines.client.meta.region_name)
        found = arn_of_run(run, partition=role[1], region=region, account=role[4])
        if found is None:
            raise RunRefusedError(f"{run!r} names no run: pass its ARN or <state machine>:<run name>")
        if repository_of(self.prefix, found) is None:
            raise RunRefusedError(f"{run} is not a run of this deployment's pipelines ({self.prefix}_*)")
        return found

    def summary(self, execution_arn: str) -> RunSummary | None:
        """The run, its current stages and child runs; None when there is no such run."""
        repository = repository_of(self.prefix, execution_arn)
        if repository is None:
            raise RunRefusedError(
                f"{execution_arn} is not a run of this deployment's pipelines ({self.prefix}_*)"
            )
        try:
            held = self.pipelines.client.describe_execution(executionArn=execution_arn)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) == "ExecutionDoesNotExist":
                return None
            raise StepFunctionsUnavailableError(f"Step Functions describe_execution failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StepFunctionsUnavailableError(f"Step Functions describe_execution failed: {exc}") from exc
        history = list(self._history(execution_arn))
        run_input = _json_object(held.get("input"))
        squadron = run_input.get("squadron") if isinstance(run_input.get("squadron"), dict) else {}
        issue = squadron.get("issue_number") if isinstance(squadron, dict) else None
        parent = run_input.get(STARTED_BY)
        machine = str(held.get("stateMachineArn", ""))
        return RunSummary(
            execution_arn=execution_arn,
            repository_id=repository,
            pipeline=pipeline_of(self.prefix, execution_arn.split(":execution:", 1)[1].split(":", 1)[0]),
            status=str(held.get("status", "")),
            started_at=held["startDate"],
            stopped_at=held.get("stopDate"),
            version=_version(str(held.get("stateMachineVersionArn") or machine)),
            issue_number=issue if isinstance(issue, int) and not isinstance(issue, bool) else None,
            parent=parent if isinstance(parent, str) else None,
            waiting=current_stages(history) if held.get("status") == "RUNNING" else [],
            children=child_runs(history),
            error=held.get("error"),
            cause=held.get("cause"),
        )

    def _history(self, execution_arn: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": HISTORY_PAGE}
        while True:
            page = self._call("get_execution_history", **kwargs)
            yield from page.get("events", [])
            if not page.get("nextToken"):
                return
            kwargs["nextToken"] = page["nextToken"]

    def listing(
        self,
        *,
        repository_ids: Sequence[int] | None = None,
        status: RunStatus | None = None,
        limit: int = 50,
    ) -> Listing:
        """The runs, newest first, at most ``limit`` described (the others counted)."""
        items: list[dict[str, Any]] = []
        for machine in self.machines(repository_ids):
            for listed, item in enumerate(self.pipelines.runs(machine, status)):
                if listed >= MAX_LISTED:
                    break
                items.append(item)
        items.sort(key=_started, reverse=True)
        runs = [run for item in items[:limit] if (run := self.summary(item["executionArn"])) is not None]
        return Listing(runs, max(0, len(items) - limit))

    def running(self, repository_id: int, limit: int) -> tuple[list[RunSummary], int]:
        """The repository's running runs (the dashboard's), at most ``limit``, and how many more."""
        listing = self.listing(repository_ids=[repository_id], status="RUNNING", limit=limit)
        return listing.runs, listing.more

    def cancel(self, run: str, reason: str) -> list[str]:
        """Stop the run and its child runs; the ARNs stopped now (none: it was over)."""
        execution_arn = self.arn(run)
        if self.summary(execution_arn) is None:
            raise RunRefusedError(f"no run {run}")
        return self.pipelines.stop(execution_arn, error=RUN_CANCELLED, cause=reason)


def _version(state_machine_arn: str) -> int | None:
    tail = state_machine_arn.rsplit(":", 1)[-1]
    return int(tail) if ":stateMachine:" in state_machine_arn and tail.isdigit() else None


def _started(item: dict[str, Any]) -> float:
    value = item.get("startDate")
    return value.timestamp() if isinstance(value, datetime) else 0.0


def _json_object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
