"""Deployment settings, read once from the CDK context and validated.

The model is :class:`squadron.deployment.DeploymentSettings` (the CLI's `squadron configure`
writes the same keys to cdk.context.json); this adds what only the CDK app needs. Every value
has a default, so `cdk synth` works on a fresh clone. Values given with `-c` arrive as
strings; pydantic converts them, and a bad value stops the synth with a message naming the
context key.
"""

from __future__ import annotations

from aws_cdk import aws_logs as logs

from squadron.deployment import LAMBDA_SYNC_PAYLOAD_LIMIT, RETENTION_DAYS, DeploymentSettings, SettingsError

__all__ = ["LAMBDA_SYNC_PAYLOAD_LIMIT", "RETENTION_BY_DAYS", "SettingsError", "SquadronSettings"]

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
if tuple(RETENTION_BY_DAYS) != RETENTION_DAYS:  # pragma: no cover (a mistake in this file)
    raise RuntimeError("RETENTION_BY_DAYS and squadron.deployment.RETENTION_DAYS differ")


class SquadronSettings(DeploymentSettings):
    """What differs between deployments; each field is one CDK context key of the same name."""

    @property
    def log_retention(self) -> logs.RetentionDays:
        return RETENTION_BY_DAYS[self.log_retention_days]
