"""The CDK app: `cdk synth` runs `python -m infra.app` (see cdk.json).

It makes no AWS call: without `account`/`region` in the context the stack is
environment-agnostic, so synth needs neither credentials nor a network. cdk-nag's
AWS Solutions rules run as a validation plugin: an unacknowledged finding fails
the synth. A deployment value given only with `-c` is refused: CDK would not keep it,
and the next plain `cdk deploy` would silently deploy without it (`squadron configure`
keeps it in cdk.context.json).
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.settings import SettingsError, SquadronSettings
from infra.stack import SquadronStack
from squadron.deployment import CONTEXT_FILE, DeploymentSettings, saved_values, unsaved_values


def stack_name(settings: SquadronSettings) -> str:
    return settings.stack_name


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


def unsaved_context(app: cdk.App, directory: Path) -> str | None:
    """Why the deployment values of ``app``'s context that no file in ``directory`` holds (so
    given with ``-c``) are refused, or None when there are none."""
    effective = {name: app.node.try_get_context(name) for name in DeploymentSettings.model_fields}
    unsaved = unsaved_values(effective, saved_values(directory))
    if not unsaved:
        return None
    given = " ".join(f"-c {key}={value}" for key, value in unsaved.items())
    options = " ".join(f"--set {key}={value}" for key, value in unsaved.items())
    return (
        f"{given}: values given with -c are not kept, so the next plain `cdk deploy` would silently deploy "
        f"without them (revert the App's id, or deploy another stage). Keep them in {CONTEXT_FILE}: "
        f"`squadron configure {options}`, then run the command without -c"
    )


def main() -> None:
    app = cdk.App()
    try:
        # A bad value, then one given only with -c, are refused before the stack is built: the
        # answer comes in seconds, not after the whole construction.
        SquadronSettings.from_context(app.node.try_get_context)
        refused = unsaved_context(app, Path.cwd())
        if refused is not None:
            raise SystemExit(f"squadron infra: {refused}")
        build(app)
    except SettingsError as exc:
        raise SystemExit(f"squadron infra: {exc}") from None
    app.synth()


if __name__ == "__main__":
    main()
