"""Each repository's retrospective schedule on EventBridge Scheduler (moto): kept in step with its
configuration, and what a firing sends is the router's StartRetrospective, once per firing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.scheduler import RetroSchedules
from squadron.domain.events import EventEnvelope, StartRetrospective
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
