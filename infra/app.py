"""The CDK app: `cdk synth` runs `python -m infra.app` (see cdk.json).

It makes no AWS call: without `account`/`region` in the context the stack is
environment-agnostic, so synth needs neither credentials nor a network. cdk-nag's
AWS Solutions rules run as a validation plugin: an unacknowledged finding fails
the synth.
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.settings import SettingsError, SquadronSettings
from infra.stack import SquadronStack


def stack_name(settings: SquadronSettings) -> str:
    return f"Squadron-{settings.stage}"


def build(app: cdk.App) -> SquadronStack:
    """Add the Squadron stack and the cdk-nag checks to `app`; raise SettingsError on bad context."""
    settings = SquadronSettings.from_context(app.node.try_get_context)
    environment = None
    if settings.account or settings.region:
        environment = cdk.Environment(account=settings.account, region=settings.region)
    stack = SquadronStack(app, stack_name(settings), settings=settings, env=environment)
    cdk.Tags.of(stack).add("project", "squadron")
    cdk.Tags.of(stack).add("stage", settings.stage)
    # cdk-nag 3 is a validation plugin (Aspects.of(app).add(...) crashes). Acknowledgements
    # are also written into each resource's Metadata, as an audit trail in the template.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    return stack


def main() -> None:
    app = cdk.App()
    try:
        build(app)
    except SettingsError as exc:
        raise SystemExit(f"squadron infra: {exc}") from None
    app.synth()


if __name__ == "__main__":
    main()
