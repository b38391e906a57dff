"""Each repository's retrospective schedule on EventBridge Scheduler (boto3 ``scheduler``).

:meth:`RetroSchedules.ensure` keeps one repository's schedule in step with its configuration:
created when missing, updated only when its expression or target changed, deleted when the
repository turned retrospectives off. The reconciler calls it for each repository it visits.

What a warm container last found or made is remembered (per repository: the schedule it
wanted, and when it confirmed it): the same wish within :data:`RECHECK` costs no Scheduler
call, so the reconciler's tick does not read every schedule every five minutes. After it the
schedule is read again, so one changed or deleted by hand is put back within that time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError
from squadron.domain.schedules import SQS_SEND_TARGET, schedule_name, target_input

Outcome = Literal["created", "updated", "unchanged", "deleted", "absent"]

#: How long a schedule confirmed by this container is trusted without reading it again.
RECHECK = timedelta(hours=6)


def _now() -> datetime:
    return datetime.now(UTC)


class ScheduleUnavailableError(AdapterError):
    """EventBridge Scheduler failed; the message says which call and why."""


class RetroSchedules:
    def __init__(
        self,
        *,
        group: str,
        role_arn: str,
        queue_url: str,
        client: Any = None,
        clock: Callable[[], datetime] = _now,
        recheck: timedelta = RECHECK,
    ) -> None:
        self.group = group
        self.role_arn = role_arn
        self.queue_url = queue_url
        self._client = client
        self.clock = clock
        self.recheck = recheck
        #: Schedule name -> (what was wanted: expression and input, or None for no schedule;
        #: when the schedule on AWS was last found or made so).
        self._confirmed: dict[str, tuple[tuple[str, str] | None, datetime]] = {}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("scheduler")
        return self._client

    def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, operation)(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return None
            raise ScheduleUnavailableError(f"Scheduler {operation} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise ScheduleUnavailableError(f"Scheduler {operation} failed: {exc}") from exc

    def ensure(
        self, repo_id: int, full_name: str, installation_id: int | None, *, expression: str, enabled: bool
    ) -> Outcome:
        name = schedule_name(repo_id)
        now = self.clock()
        wish = (
            (expression, target_input(self.queue_url, repo_id, full_name, installation_id))
            if enabled
            else None
        )
        confirmed = self._confirmed.get(name)
        if confirmed is not None and confirmed[0] == wish and now - confirmed[1] < self.recheck:
            return "unchanged" if enabled else "absent"
        self._confirmed.pop(name, None)  # forgotten until this call has done what it must
        outcome = self._ensure(
            name, repo_id, full_name, installation_id, expression=expression, enabled=enabled
        )
        self._confirmed[name] = (wish, now)
        return outcome

    def _ensure(
        self,
        name: str,
        repo_id: int,
        full_name: str,
        installation_id: int | None,
        *,
        expression: str,
        enabled: bool,
    ) -> Outcome:
        held = self._call("get_schedule", Name=name, GroupName=self.group)
        if not enabled:
            if held is None:
                return "absent"
            self._call("delete_schedule", Name=name, GroupName=self.group)
            return "deleted"
        wanted = {
            "Name": name,
            "GroupName": self.group,
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Description": f"Squadron: the retrospective of {full_name}"[:512],
            "Target": {
                "Arn": SQS_SEND_TARGET,
                "RoleArn": self.role_arn,
                "Input": target_input(self.queue_url, repo_id, full_name, installation_id),
                # A firing that cannot be sent within an hour is dropped: the next one comes.
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 10},
            },
        }
        if held is None:
            self._call("create_schedule", **wanted)
            return "created"
        target = held.get("Target") or {}
        same = (
            held.get("ScheduleExpression") == expression
            and held.get("State") == "ENABLED"
            and target.get("Input") == wanted["Target"]["Input"]  # type: ignore[index]
            and target.get("RoleArn") == self.role_arn
            and target.get("Arn") == SQS_SEND_TARGET
        )
        if same:
            return "unchanged"
        self._call("update_schedule", **wanted)
        return "updated"
