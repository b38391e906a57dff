"""The pipeline runs of each issue or pull request (the :class:`~squadron.registry_ports.PipelineRunIndex` port).

One item per run: ``PIPELINERUNS#<repository>#<number or repo>`` / the execution ARN, kept until a
reaction finds the run over (deleted on the condition that it is still the record that was read:
``started_at``, which every write sets), and at most the longest run time and a day (DynamoDB's TTL).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import TTL_ATTRIBUTE, dump_item, error_code, iso
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.pipelines.limits import MAX_RUN_TIME
from squadron.domain.pipelines.reactions import MAX_RUNS_PER_SUBJECT, RunRecord

#: How long a run's record is kept at most: no run lasts longer.
RUN_RECORD_RETENTION = timedelta(seconds=MAX_RUN_TIME) + timedelta(days=1)


def _pk(repo_id: int, number: int | None) -> str:
    return f"PIPELINERUNS#{repo_id}#{number if number is not None else 'repo'}"


class DynamoPipelineRunIndex(RegistryTable):
    """The runs of a subject in its own partition (a query reads them all: few are running)."""

    def record_run(self, run: RunRecord) -> None:
        item = {
            "PK": _pk(run.repo_id, run.number),
            "SK": run.execution_arn,
            "entity": "pipeline_run",
            "repo_id": run.repo_id,
            "number": run.number if run.number is not None else -1,
            "pipeline": run.pipeline,
            "version_arn": run.version_arn,
            "started_at": iso(run.started_at),
            "on_events": json.dumps(run.on_events, separators=(",", ":"), sort_keys=True),
            "stages": json.dumps(list(run.stages), separators=(",", ":")),
            TTL_ATTRIBUTE: int((run.started_at + RUN_RECORD_RETENTION).timestamp()),
        }
        self._call("put_item", TableName=self.table_name, Item=dump_item(item))

    def runs_of(self, repo_id: int, number: int | None) -> list[RunRecord]:
        items = self._partition(_pk(repo_id, number))
        runs = [
            RunRecord(
                repo_id=int(item["repo_id"]),
                number=None if int(item["number"]) < 0 else int(item["number"]),
                pipeline=str(item["pipeline"]),
                execution_arn=str(item["SK"]),
                version_arn=str(item["version_arn"]),
                started_at=datetime.fromisoformat(str(item["started_at"]).replace("Z", "+00:00")),
                on_events=json.loads(str(item["on_events"])),
                stages=tuple(json.loads(str(item.get("stages") or "[]"))),
            )
            for item in items
            if item.get("entity") == "pipeline_run"
        ]
        runs.sort(key=lambda run: (run.started_at, run.execution_arn), reverse=True)
        return runs[:MAX_RUNS_PER_SUBJECT]

    def forget_run(self, run: RunRecord) -> bool:
        try:
            self._call(
                "delete_item",
                TableName=self.table_name,
                Key=dump_item({"PK": _pk(run.repo_id, run.number), "SK": run.execution_arn}),
                # The record as it was read: one written again since is another writer's, kept.
                ConditionExpression="started_at = :read",
                ExpressionAttributeValues={":read": {"S": iso(run.started_at)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True
