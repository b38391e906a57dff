"""Deployment settings, read once from the CDK context and validated.

Every value has a default, so `cdk synth` works on a fresh clone. Override one in
`cdk.json` ("context") or on the command line: `cdk synth -c stage=prod`. Values given
with `-c` arrive as strings; pydantic converts them, and a bad value stops the synth
with a message naming the context key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Literal

from aws_cdk import aws_logs as logs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from squadron.domain.metrics import namespace

# The retention periods CloudWatch Logs accepts, by number of days.
RETENTION_BY_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}

# A synchronous Lambda invocation carries at most 6 MB, so a larger webhook body
# could never reach the ingress function anyway.
LAMBDA_SYNC_PAYLOAD_LIMIT = 6 * 1024 * 1024


class SettingsError(ValueError):
    """The CDK context holds a value the app cannot deploy; `errors` names each one."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        lines = "\n".join(f"  - {error}" for error in errors)
        super().__init__(
            f"invalid CDK context ({len(errors)} error{'s' if len(errors) != 1 else ''}):\n{lines}\n"
            'Fix it in cdk.json ("context") or pass another value with `cdk synth -c KEY=VALUE`.'
        )


class SquadronSettings(BaseModel):
    """What differs between deployments; each field is one CDK context key of the same name."""

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)

    stage: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,19}$")] = "dev"
    """Deployment name (lowercase, <= 20 chars); part of the stack and secret names."""

    account: Annotated[str | None, Field(pattern=r"^\d{12}$")] = None
    """Target AWS account; unset means an environment-agnostic stack."""

    region: Annotated[str | None, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")] = None
    """Target AWS region; unset means an environment-agnostic stack."""

    github_app_id: Annotated[str, Field(pattern=r"^\d+$")] = "0"
    """The GitHub App's numeric id ("0" is a placeholder until the App exists)."""

    github_app_slug: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,33}$")] = "squadron"
    """The App's slug; its bot login is `<slug>[bot]`, whose own events the ingress drops."""

    alarm_email: Annotated[str | None, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")] = None
    """If set, the alarm topic gets an email subscription (confirmed by the recipient)."""

    events_max_receive_count: Annotated[int, Field(ge=1, le=1000)] = 5
    """Receives of one event before it moves to the dead-letter queue."""

    webhook_max_body_bytes: Annotated[int, Field(ge=1024, le=LAMBDA_SYNC_PAYLOAD_LIMIT)] = 2_097_152
    """Larger webhook bodies are refused by the ingress before any parsing."""

    log_retention_days: int = 30
    """Retention of every log group of the stack; one of CloudWatch's allowed periods."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    api_throttle_rate_limit: Annotated[float, Field(gt=0, le=10_000)] = 50.0
    """Steady-state requests per second accepted by the webhook API."""

    api_throttle_burst_limit: Annotated[int, Field(ge=1, le=5_000)] = 100
    """Burst of requests accepted by the webhook API above the steady rate."""

    router_max_concurrency: Annotated[int, Field(ge=2, le=1000)] = 5
    """Router invocations at once (SQS's MaximumConcurrency, at least 2): the rest of the account's
    Lambda concurrency stays free for the ingress, which must answer GitHub within 10 s."""

    @field_validator("log_retention_days")
    @classmethod
    def _retention_is_allowed(cls, value: int) -> int:
        if value not in RETENTION_BY_DAYS:
            allowed = ", ".join(str(days) for days in RETENTION_BY_DAYS)
            raise ValueError(f"must be one of CloudWatch Logs' retention periods: {allowed}")
        return value

    @property
    def metrics_namespace(self) -> str:
        """Where every component of this stage publishes its metrics (``Squadron/<stage>``)."""
        return namespace(self.stage)

    @property
    def log_retention(self) -> logs.RetentionDays:
        return RETENTION_BY_DAYS[self.log_retention_days]

    @field_validator("account", "region", "alarm_email", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # `-c alarm_email=` on the command line means "none", not an invalid address.
        return None if isinstance(value, str) and not value.strip() else value

    @classmethod
    def from_context(cls, try_get_context: Callable[[str], object]) -> SquadronSettings:
        """Build from a CDK context lookup (`app.node.try_get_context`); raise SettingsError."""
        values = {name: try_get_context(name) for name in cls.model_fields}
        return cls.from_mapping({name: value for name, value in values.items() if value is not None})

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> SquadronSettings:
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise SettingsError([_describe(error) for error in exc.errors()]) from exc


def _describe(error: ErrorDetails) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "<context>"
    return f"context key '{key}': {error['msg']} (got {error['input']!r})"
