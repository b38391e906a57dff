"""`squadron destroy`: delete a deployed stage even while its agents work.

It stops what launches agent tasks (the router's queue mapping, the reconciler's schedule), stops
every running agent task and waits for ECS to report them stopped, then runs `cdk destroy` on the
stage's stack (docs/operations.md, "Removing it"). A plain `cdk destroy` with tasks running fails:
CloudFormation cannot delete a cluster with active tasks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import TextIO

from squadron.deployment import CONTEXT_FILE, DeploymentSettings, SettingsError, deployed, saved_values
from squadron.errors import ConfigurationError

EXIT_OK = 0
EXIT_PROBLEMS = 1


def configure_destroy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file", default=CONTEXT_FILE, help=f"the deployment's values (default: ./{CONTEXT_FILE})"
    )
    parser.add_argument(
        "--yes", action="store_true", help="do it: without, say what would be stopped and deleted"
    )
    parser.add_argument(
        "--cdk",
        default="npx --no-install cdk",
        help=argparse.SUPPRESS,  # the command that runs `destroy` (tests: a stand-in)
    )


def run_destroy(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.preflight import AwsFacts, PreflightError  # noqa: PLC0415 (boto3, lazily)
    from squadron.adapters.teardown import quiesce  # noqa: PLC0415

    path = Path(args.file)
    try:
        settings = DeploymentSettings.from_mapping(saved_values(path.parent, context_file=path))
        region = deployed(path, environ=os.environ, home=Path.home()).region  # where cdk deploys it
    except (SettingsError, ConfigurationError) as exc:
        out.write(f"missing deployment values: {exc}\n")
        return EXIT_PROBLEMS
    stack = settings.stack_name
    aws = AwsFacts(region=region)
    if not args.yes:
        out.write(
            f"would stop {stack}'s agent tasks (and what launches them), then `cdk destroy {stack}` in "
            f"{region}: squadron destroy --yes\n"
        )
        return EXIT_OK
    try:
        if aws.stack_outputs(stack) is None:
            out.write(f"{stack} is not deployed: nothing to destroy\n")
            return EXIT_OK
        done = quiesce(aws, stack)
    except PreflightError as exc:
        out.write(f"{stack}: {exc}\n")
        return EXIT_PROBLEMS
    out.write(
        f"{stack}: {len(done.mappings_disabled)} queue mapping(s) and {len(done.rules_disabled)} schedule(s) "
        f"disabled, {len(done.tasks_stopped)} agent task(s) stopped\n"
    )
    out.flush()
    command = [*args.cdk.split(), "destroy", "--force", stack]
    finished = subprocess.run(command, check=False, cwd=path.parent)  # noqa: S603 (our own command line)
    if finished.returncode != 0:
        out.write(f"`{' '.join(command)}` failed ({finished.returncode})\n")
        return EXIT_PROBLEMS
    out.write(f"{stack} destroyed\n")
    return EXIT_OK
