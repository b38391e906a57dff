"""Each repository's retrospective schedule on EventBridge Scheduler (moto): kept in step with its
configuration, and what a firing sends is the router's StartRetrospective, once per firing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from squadron.adapters.scheduler import RetroSchedules, ScheduleUnavailableError
from squadron.domain.commands import StartRetrospective
from squadron.domain.events import EventEnvelope
from squadron.domain.schedules import SCHEDULED_TIME, SQS_SEND_TARGET, fired, schedule_name, target_input

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/squadron-dev-events.fifo"
ROLE = "arn:aws:iam::123456789012:role/scheduler"


@pytest.fixture
def schedules() -> Iterator[RetroSchedules]:
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name="squadron-dev-retrospectives")
        yield RetroSchedules(
            group="squadron-dev-retrospectives", role_arn=ROLE, queue_url=QUEUE, client=client
        )


STEPS = [
    # (id, expression, enabled, outcome)
    ("a new repository's schedule is created", "cron(0 9 ? * MON *)", True, "created"),
    ("the same configuration changes nothing", "cron(0 9 ? * MON *)", True, "unchanged"),
    ("a new expression updates it", "rate(14 days)", True, "updated"),
    ("retrospectives turned off delete it", "rate(14 days)", False, "deleted"),
    ("and stay absent", "rate(14 days)", False, "absent"),
    ("turned on again it is created", "cron(0 9 ? * FRI *)", True, "created"),
]


def test_a_repositorys_schedule_follows_its_configuration(schedules: RetroSchedules) -> None:
    for _, expression, enabled, outcome in STEPS:
        assert schedules.ensure(7, "octo/shop", 77, expression=expression, enabled=enabled) == outcome, (
            expression
        )
    held = schedules.client.get_schedule(Name=schedule_name(7), GroupName=schedules.group)
    assert held["ScheduleExpression"] == "cron(0 9 ? * FRI *)" and held["FlexibleTimeWindow"] == {
        "Mode": "OFF"
    }
    assert held["Target"]["Arn"] == SQS_SEND_TARGET and held["Target"]["RoleArn"] == ROLE
    assert SCHEDULED_TIME in held["Target"]["Input"]


def test_a_firing_sends_the_routers_command_in_the_repositorys_group_once_per_firing() -> None:
    text = target_input(QUEUE, 7, "octo/shop", 77)
    monday, next_monday = datetime(2026, 11, 30, 9, tzinfo=UTC), datetime(2026, 12, 7, 9, tzinfo=UTC)
    first, second = fired(text, monday), fired(text, next_monday)
    assert first["QueueUrl"] == QUEUE and first["MessageGroupId"] == "7#repo"
    envelope = EventEnvelope.from_message(first["MessageBody"])
    assert isinstance(envelope.command, StartRetrospective) and envelope.command.trigger == "schedule"
    assert (envelope.repository.full_name, envelope.installation_id, envelope.origin) == (
        "octo/shop",
        77,
        "squadron",
    )
    assert envelope.occurred_at == monday and envelope.message_group_id == first["MessageGroupId"]
    assert first["MessageDeduplicationId"] == "retro-7-2026-11-30T09:00:00Z" == envelope.delivery_id
    assert second["MessageDeduplicationId"] != first["MessageDeduplicationId"]
    assert SCHEDULED_TIME not in first["MessageBody"]


class Counting:
    """The Scheduler client, counting the calls made through it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.client, name)


def test_a_warm_container_trusts_what_it_confirmed_until_the_recheck_and_then_puts_back_a_tampered_schedule() -> (
    None
):
    with mock_aws():
        real = boto3.client("scheduler", region_name="us-east-1")
        real.create_schedule_group(Name="squadron-dev-retrospectives")
        counting = Counting(real)
        now = [datetime(2026, 11, 30, 9, tzinfo=UTC)]
        schedules = RetroSchedules(
            group="squadron-dev-retrospectives",
            role_arn=ROLE,
            queue_url=QUEUE,
            client=counting,
            clock=lambda: now[0],
            recheck=timedelta(hours=6),
        )

        def ensure(expression: str = "cron(0 9 ? * MON *)", *, enabled: bool = True) -> str:
            return schedules.ensure(7, "octo/shop", 77, expression=expression, enabled=enabled)

        assert ensure() == "created"
        made = len(counting.calls)
        for minutes in (5, 10, 355):  # the reconciler's ticks within the recheck
            now[0] = datetime(2026, 11, 30, 9, tzinfo=UTC) + timedelta(minutes=minutes)
            assert ensure() == "unchanged"
        assert len(counting.calls) == made  # no Scheduler call for an unchanged wish
        assert ensure("rate(14 days)") == "updated"  # a new wish is carried out at once
        real.delete_schedule(Name=schedule_name(7), GroupName="squadron-dev-retrospectives")  # by hand
        assert ensure("rate(14 days)") == "unchanged"  # trusted until the recheck
        now[0] += timedelta(hours=6)
        assert ensure("rate(14 days)") == "created"  # read again: put back
        assert (
            real.get_schedule(Name=schedule_name(7), GroupName="squadron-dev-retrospectives")[
                "ScheduleExpression"
            ]
            == "rate(14 days)"
        )
        assert ensure(enabled=False) == "deleted"
        before = len(counting.calls)
        assert ensure(enabled=False) == "absent"
        assert len(counting.calls) == before


class Refusing:
    """A Scheduler that holds no schedule and refuses to create one (an expression AWS rejects)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def get_schedule(self, **_: Any) -> Any:
        self.calls.append("get_schedule")
        raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "none"}}, "GetSchedule")

    def create_schedule(self, **_: Any) -> Any:
        self.calls.append("create_schedule")
        raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad cron"}}, "CreateSchedule")


def test_a_failed_call_is_not_remembered() -> None:
    refusing = Refusing()
    schedules = RetroSchedules(group="g", role_arn=ROLE, queue_url=QUEUE, client=refusing)
    for _ in range(2):  # the second call tries again: it does not trust the first
        with pytest.raises(ScheduleUnavailableError, match="bad cron"):
            schedules.ensure(7, "octo/shop", 77, expression="cron(nonsense)", enabled=True)
    assert refusing.calls == ["get_schedule", "create_schedule"] * 2
