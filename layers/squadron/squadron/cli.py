"""The ``squadron`` command.

Subcommands are rows of :data:`SUBCOMMANDS`: a name, a one-line help, a function
that adds its arguments and a function that runs it and returns the exit status.
A later subcommand is one more row.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from squadron.config import ConfigError, SquadronConfig, load_directory, write_schemas
from squadron.config.constants import CONFIG_DIR

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_UNAVAILABLE = 2


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]


# --- validate ----------------------------------------------------------------------------------


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        default=CONFIG_DIR,
        help=f"the .squadron directory to check (default: ./{CONFIG_DIR})",
    )


def _run_validate(args: argparse.Namespace, out: TextIO) -> int:
    directory = Path(args.path)
    if not directory.is_dir():
        out.write(f"{args.path}: no such directory\n")
        return EXIT_PROBLEMS
    try:
        config = load_directory(directory, root=args.path.rstrip("/") or args.path)
    except ConfigError as exc:
        for problem in exc.problems:
            out.write(f"{problem}\n")
        count = len(exc.problems)
        out.write(f"{count} problem{'s' if count != 1 else ''} in {args.path}\n")
        return EXIT_PROBLEMS
    out.write(_summary(args.path, config))
    return EXIT_OK


def _summary(path: str, config: SquadronConfig) -> str:
    roles = config.config.roles
    own_agents = sorted(name for name, agent in config.agents.items() if agent.source != "built-in")
    rules = config.approval_flows.branch_rules
    lines = [
        f"{path}: OK",
        f"  roles: {len(roles)} ({', '.join(f'{name}:{role.kind}' for name, role in roles.items())})",
        f"  agents: {len(own_agents)} defined ({', '.join(own_agents) or 'none'})"
        + (
            f", {len(config.agents) - len(own_agents)} built-in"
            if len(config.agents) > len(own_agents)
            else ""
        ),
        f"  labels: {len(config.config.labels)}; human groups: {len(config.config.human_groups)}",
        f"  approval flows: default + {len(rules)} branch rule{'s' if len(rules) != 1 else ''}"
        + (f" ({', '.join(rule.pattern for rule in rules)})" if rules else ""),
    ]
    if config.defaults:
        lines.append(f"  documented defaults used for: {', '.join(config.defaults)}")
    return "\n".join(lines) + "\n"


# --- schema ------------------------------------------------------------------------------------


def _configure_schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default=f"{CONFIG_DIR}/schemas",
        help=f"directory to write the JSON Schemas into (default: ./{CONFIG_DIR}/schemas)",
    )


def _run_schema(args: argparse.Namespace, out: TextIO) -> int:
    for path in write_schemas(Path(args.out)):
        out.write(f"wrote {path}\n")
    return EXIT_OK


# --- local -------------------------------------------------------------------------------------

#: What exists today of what `squadron local` will run.
_LOCAL_PARTS = (
    ("functions/ingress/handler.py", "the webhook ingress handler (verify, envelope, enqueue)"),
    ("functions/router/handler.py", "the router (registry, routing, agent launches)"),
    ("functions/tokens/handler.py", "the token vendor (narrowed GitHub tokens for agent tasks)"),
    ("layers/squadron/squadron/agent/__main__.py", "the agent host (python -m squadron.agent)"),
    ("infra/app.py", "the CDK app (cdk synth)"),
)


def _configure_local(parser: argparse.ArgumentParser) -> None:
    del parser  # no options yet


def _run_local(args: argparse.Namespace, out: TextIO) -> int:
    del args
    out.write(
        "squadron local: the local stack is not built yet (it comes in a later issue).\n"
        "It will serve AWS through a local moto server, run agent tasks as local processes\n"
        "and talk to a GitHub sandbox. What exists today:\n"
    )
    for path, what in _LOCAL_PARTS:
        state = "present" if Path(path).exists() else "not found from this directory"
        out.write(f"  - {path}: {what} [{state}]\n")
    out.write("Run `make test` for the test suite, `squadron validate` to check a .squadron directory.\n")
    return EXIT_UNAVAILABLE


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "validate", "check a .squadron directory and print every problem", _configure_validate, _run_validate
    ),
    Subcommand("schema", "write the JSON Schemas of the .squadron files", _configure_schema, _run_schema),
    Subcommand("local", "run the local stack (not built yet)", _configure_local, _run_local),
)


def build_parser(subcommands: Sequence[Subcommand] = SUBCOMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="squadron", description="Squadron: issues to merged pull requests with a team of LLM agents."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in subcommands:
        command_parser = sub.add_parser(command.name, help=command.help, description=command.help)
        command.configure(command_parser)
        command_parser.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Entry point of the ``squadron`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace, TextIO], int] = args.run
    return run(args, out if out is not None else sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
