"""The deployer's subcommands: `squadron configure` (the deployment's values, kept in
cdk.context.json where every `cdk` command reads them) and `squadron doctor` (what a deploy
needs, checked before it fails half-way).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from squadron.deployment import CONTEXT_FILE, DeploymentSettings, SettingsError, configure, read_context
from squadron.errors import ConfigurationError

EXIT_OK = 0
EXIT_PROBLEMS = 1

#: The options of `squadron configure` for the values a deployer sets; --set covers the rest.
_NAMED = ("stage", "account", "region", "github_app_id", "github_app_slug", "alarm_email")


def configure_configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", help="deployment name: the stack is Squadron-<stage> (default: dev)")
    parser.add_argument("--account", help="pin the stack to this AWS account (12 digits)")
    parser.add_argument("--region", help="pin the stack to this AWS region (e.g. eu-west-1)")
    parser.add_argument("--github-app-id", help="the GitHub App's id (0 until it exists)")
    parser.add_argument("--github-app-slug", help="the App's slug: its login is <slug>[bot]")
    parser.add_argument("--alarm-email", help="subscribe this address to the alarms (empty: none)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other deployment value (see the README's table), e.g. --set log_retention_days=90",
    )
    parser.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="forget a value: its default applies"
    )
    parser.add_argument(
        "--file", default=CONTEXT_FILE, help=f"the context file (default: ./{CONTEXT_FILE}, next to cdk.json)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 unless the file names a stage and every value is valid (make deploy)",
    )


def run_configure(args: argparse.Namespace, out: TextIO) -> int:
    path = Path(args.file)
    changes: dict[str, object | None] = {
        name: getattr(args, name) for name in _NAMED if getattr(args, name) is not None
    }
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            out.write(f"--set {item}: expected KEY=VALUE\n")
            return EXIT_PROBLEMS
        changes[key.strip()] = value
    changes.update(dict.fromkeys(args.unset))
    try:
        if args.check:
            if changes:
                out.write("--check changes nothing: run without it to set values\n")
                return EXIT_PROBLEMS
            context = read_context(path)
            settings = DeploymentSettings.from_mapping(context)
        else:
            settings = configure(path, changes)
            context = read_context(path)
    except (SettingsError, ConfigurationError) as exc:
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    if args.check and "stage" not in context:
        out.write(
            f"{path} names no stage: choose one with `squadron configure --stage NAME` (the stack is "
            "Squadron-<stage>), so that every deploy deploys the same stack\n"
        )
        return EXIT_PROBLEMS
    out.write(describe(settings, context, path))
    return EXIT_OK


def describe(settings: DeploymentSettings, context: dict[str, object], path: Path) -> str:
    """Every deployment value, one a line, each saying whether it is kept in ``path`` or a default."""
    width = max(len(name) for name in DeploymentSettings.model_fields)
    lines = [
        f"{name:<{width}}  {value if value is not None else '-'}{'' if name in context else '  (default)'}"
        for name, value in settings.model_dump().items()
    ]
    lines.append(f"kept in {path}: `make deploy` deploys {settings.stack_name} with these values")
    if not settings.app_configured:
        lines.append(
            "github_app_id is 0: the stack waits for its App (create it with squadron app create, then "
            "squadron configure --github-app-id ID --github-app-slug SLUG and make deploy again)"
        )
    return "\n".join(lines) + "\n"
