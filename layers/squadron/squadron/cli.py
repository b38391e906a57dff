"""The ``squadron`` command.

Subcommands are rows of :data:`SUBCOMMANDS`: a name, a one-line help, a function
that adds its arguments and a function that runs it and returns the exit status.
A later subcommand is one more row.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from squadron import __version__, app_cli, deploy_cli, destroy_cli, local_cli, operator_cli
from squadron.cli_types import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_STATUSES_HELP,
    EXIT_UNAVAILABLE,
    github_id,
    repo_name,
)
from squadron.config import ConfigError, SquadronConfig, load_directory, read_directory, write_schemas
from squadron.config.default_pipelines import default_pipelines
from squadron.config.migration import migration_text, validate_notices
from squadron.domain.orchestration import effective_pipelines
from squadron.domain.permissions import Caller
from squadron.domain.protection import protected_branches, protection_for
from squadron.domain.repo_config.constants import CONFIG_DIR

if TYPE_CHECKING:
    from squadron.adapters.github.http import GitHubHttp

__all__ = [
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_UNAVAILABLE",
    "SUBCOMMANDS",
    "Subcommand",
    "build_parser",
    "main",
]


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]
    #: Command lines shown under "examples:" in its --help (each parses: a test runs them all).
    examples: tuple[str, ...] = ()

    def epilog(self) -> str:
        lines = ["examples:", *(f"  {example}" for example in self.examples)] if self.examples else []
        return "\n".join([*lines, "", EXIT_STATUSES_HELP] if lines else [EXIT_STATUSES_HELP])


# --- validate ----------------------------------------------------------------------------------


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        default=CONFIG_DIR,
        help=f"the .squadron directory to check (default: ./{CONFIG_DIR})",
    )
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="print the pipelines the approval flows are equivalent to, as YAML to paste under pipelines:",
    )


def _run_validate(args: argparse.Namespace, out: TextIO) -> int:
    directory = Path(args.path)
    if not directory.is_dir():
        exists = directory.exists() or directory.is_symlink()
        out.write(f"{args.path}: {'not a directory' if exists else 'no such directory'}\n")
        return EXIT_PROBLEMS
    try:
        config = load_directory(directory, root=args.path.rstrip("/") or args.path)
    except OSError as exc:
        out.write(f"{args.path}: cannot be read: {exc.strerror or exc}\n")
        return EXIT_PROBLEMS
    except ConfigError as exc:
        for problem in exc.problems:
            out.write(f"{problem}\n")
        count = len(exc.problems)
        out.write(f"{count} problem{'s' if count != 1 else ''} in {args.path}\n")
        return EXIT_PROBLEMS
    if _nothing_configured(config):
        out.write(
            f"{args.path}: no Squadron configuration here (no {', '.join(config.defaults)}, no agents/): "
            f"give the path of a repository's {CONFIG_DIR} directory\n"
        )
        return EXIT_PROBLEMS
    root = args.path.rstrip("/") or args.path
    try:
        texts = read_directory(directory, root=root)
    except (OSError, ConfigError) as exc:  # changed since it was read a moment ago
        out.write(f"{args.path}: cannot be read again: {exc}\n")
        return EXIT_PROBLEMS
    if args.migrate:
        out.write(migration_text(config, texts, root=root))
        return EXIT_OK
    out.write(_summary(args.path, config))
    out.writelines(f"{line}\n" for line in validate_notices(config, texts, root=root))
    return EXIT_OK


def _nothing_configured(config: SquadronConfig) -> bool:
    """Whether a directory held none of the configuration's files (all defaults, built-in agents)."""
    files_defaulted = len(config.defaults) == 2  # config.yaml and workflows/approval-flows.yaml
    return files_defaulted and all(agent.source == "built-in" for agent in config.agents.values())


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
    pipelines = config.config.pipelines
    if pipelines:
        lines.append(
            f"  pipelines: {len(pipelines)} ("
            + ", ".join(
                f"{name}: {len(p.stages)} stage{'s' if len(p.stages) != 1 else ''}, "
                + (f"on {p.trigger.event}" if p.trigger is not None else "sub-pipeline")
                for name, p in pipelines.items()
            )
            + ")"
        )
    lines.append(_orchestration_line(config))
    if config.defaults:
        lines.append(f"  documented defaults used for: {', '.join(config.defaults)}")
    return "\n".join(lines) + "\n"


def _orchestration_line(config: SquadronConfig) -> str:
    """What runs the repository's issues, and which built-in pipelines run beside its own."""
    repo = config.config
    if repo.orchestration != "pipelines":
        return "  orchestration: fixed (the fixed routing starts every agent; only the pipelines above run)"
    builtins = sorted(
        set(effective_pipelines(repo.pipelines, default_pipelines(), repo.orchestration))
        - set(repo.pipelines)
    )
    return (
        "  orchestration: pipelines (built-in pipelines run: "
        + (", ".join(builtins) or "none")
        + "; docs/pipelines.md)"
    )


# --- schema ------------------------------------------------------------------------------------


def _configure_schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default=f"{CONFIG_DIR}/schemas",
        help=f"directory to write the JSON Schemas into (default: ./{CONFIG_DIR}/schemas)",
    )


def _run_schema(args: argparse.Namespace, out: TextIO) -> int:
    try:
        written = write_schemas(Path(args.out))
    except OSError as exc:
        out.write(f"{args.out}: cannot write the schemas there: {exc.strerror or exc}\n")
        return EXIT_PROBLEMS
    for path in written:
        out.write(f"wrote {path}\n")
    return EXIT_OK


# --- branch-protection -------------------------------------------------------------------------


def _configure_protection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("plan", "apply"), help="plan: print what apply would set")
    parser.add_argument(
        "--repo", type=repo_name, required=True, help="owner/name of the repository to protect"
    )
    parser.add_argument(
        "--path", default=CONFIG_DIR, help=f"the .squadron directory with the flows (default: ./{CONFIG_DIR})"
    )
    parser.add_argument(
        "--app-id",
        type=github_id,
        help="the Squadron App's id: its squadron/* checks are pinned to it (default: $GITHUB_APP_ID)",
    )
    parser.add_argument(
        "--api-url",
        default=os.environ.get("GITHUB_API_URL", "https://api.github.com"),
        help=argparse.SUPPRESS,
    )


def _protection_http(api_url: str) -> GitHubHttp:
    from squadron.adapters.github.http import GitHubHttp  # noqa: PLC0415 (the other commands start without httpx)

    return GitHubHttp(base_url=api_url)


def _run_protection(args: argparse.Namespace, out: TextIO) -> int:
    app_id = args.app_id
    if app_id is None:
        from_environment = os.environ.get("GITHUB_APP_ID", "").strip() or "0"
        try:
            app_id = github_id(from_environment)
        except argparse.ArgumentTypeError as exc:
            out.write(f"GITHUB_APP_ID: {exc}\n")
            return EXIT_PROBLEMS
    if not app_id:
        out.write(
            "the App id is needed to pin the squadron/* checks to it: pass --app-id or set GITHUB_APP_ID\n"
        )
        return EXIT_PROBLEMS
    token = os.environ.get("GITHUB_TOKEN", "")
    if not token:
        out.write(
            "GITHUB_TOKEN is not set: branch protection needs a token of a repository admin "
            "(the App's own tokens deliberately lack the administration permission)\n"
        )
        return EXIT_UNAVAILABLE
    from squadron.adapters.github.client import GitHubClient  # noqa: PLC0415 (see _protection_http)
    from squadron.adapters.github.errors import GitHubError  # noqa: PLC0415

    try:
        flows = load_directory(Path(args.path)).approval_flows
    except ConfigError as exc:
        out.write(f"{args.path}: {len(exc.problems)} problem(s); run `squadron validate {args.path}`\n")
        return EXIT_PROBLEMS
    github = GitHubClient(
        http=_protection_http(args.api_url),
        token=lambda: token,
        installation_id=0,
        repo=args.repo,
        caller=Caller.framework(),
    )
    try:
        default_branch = str(github.get_repository().get("default_branch") or "main")
        existing = [str(b.get("name")) for b in github.list_branches()]
        plans = [
            protection_for(flows, branch, app_id=app_id)
            for branch in protected_branches(flows, default_branch, existing)
        ]
        for plan in plans:
            out.write(f"{plan.summary}\n")
            if args.action == "apply":
                github.protect_branch(plan.branch, plan.body)
    except GitHubError as exc:
        out.write(f"GitHub refused: {exc}\n")
        return EXIT_UNAVAILABLE
    out.write("applied\n" if args.action == "apply" else "plan only: nothing was changed (run apply)\n")
    return EXIT_OK


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "validate",
        "check a .squadron directory and print every problem",
        _configure_validate,
        _run_validate,
        (
            "squadron validate                 # ./.squadron",
            "squadron validate path/to/repo/.squadron",
            "squadron validate --migrate      # the approval flows as pipelines (YAML)",
        ),
    ),
    Subcommand(
        "schema",
        "write the JSON Schemas of the .squadron files",
        _configure_schema,
        _run_schema,
        ("squadron schema", "squadron schema --out /tmp/squadron-schemas"),
    ),
    Subcommand(
        "local",
        "run the whole system on this machine (GitHub sandbox, moto, local agents)",
        local_cli.configure_local,
        local_cli.run_local,
        (
            "squadron local                    # the whole system on this machine",
            "squadron local --demo --exit      # play the demo scenario, then stop",
            "squadron local --demo change-set  # a change set across three repositories",
            "squadron local --state /tmp/sq --sandbox-port 9000",
            "squadron local --github-app github-app.yaml",
        ),
    ),
    Subcommand(
        "configure",
        "set the deployment's values (stage, App id and slug, ...) in cdk.context.json, where cdk reads them",
        deploy_cli.configure_configure,
        deploy_cli.run_configure,
        (
            "squadron configure --check        # print the values and check them, change nothing",
            "squadron configure --stage prod --region eu-west-1",
            "squadron configure --github-app-id 123456 --github-app-slug my-squadron",
        ),
    ),
    Subcommand(
        "doctor",
        "check what a deploy needs (credentials, bootstrap, quotas, Docker, the App, its secrets, "
        "the webhook URL): one line each",
        deploy_cli.configure_doctor,
        deploy_cli.run_doctor,
        ("squadron doctor",),
    ),
    Subcommand(
        "destroy",
        "delete the deployed stage: stop its agent tasks and what launches them, then cdk destroy",
        destroy_cli.configure_destroy,
        destroy_cli.run_destroy,
        ("squadron destroy", "squadron destroy --yes"),
    ),
    Subcommand(
        "status",
        "the agents: role, issue, status, blockers, PR, age, breaker counters",
        operator_cli.configure_status,
        operator_cli.run_status,
        (
            "squadron status --local",
            "squadron status --stage prod --repo octo/app      # prod, in its own region",
            "squadron status --local --json",
        ),
    ),
    Subcommand(
        "agent",
        "one agent, whole, with what waits in its inbox",
        operator_cli.configure_agent,
        operator_cli.run_agent,
        ("squadron agent show 1-42-feat-dev --local", "squadron agent show 1-42-feat-dev --json"),
    ),
    Subcommand(
        "dlq",
        "the events that failed five times: list them, or send them back",
        operator_cli.configure_dlq,
        operator_cli.run_dlq,
        ("squadron dlq list --local", "squadron dlq redrive --stage prod"),
    ),
    Subcommand(
        "events",
        "the domain events on the bus (agent started, slept, PR merged, ...): tail them",
        operator_cli.configure_events,
        operator_cli.run_events,
        (
            "squadron events tail --local              # the last 10 minutes, then what comes",
            "squadron events tail --local --since 2h --once",
            "squadron events tail --repo octo/app --since 2026-11-27T09:00Z",
        ),
    ),
    Subcommand(
        "pipelines",
        "the pipeline runs on Step Functions: list them, show one's current stages, cancel one",
        operator_cli.configure_pipelines,
        operator_cli.run_pipelines,
        (
            "squadron pipelines list --local --status RUNNING",
            "squadron pipelines list --repo octo/app --stack Squadron-prod",
            "squadron pipelines show squadron-dev-42-dev:run-0123abcd --local",
            "squadron pipelines cancel squadron-dev-42-dev:run-0123abcd --reason 'wrong issue'",
        ),
    ),
    Subcommand(
        "change-sets",
        "change sets across repositories (docs/change-sets.md): list them, show one",
        operator_cli.configure_change_sets,
        operator_cli.run_change_sets,
        (
            "squadron change-sets list --local",
            "squadron change-sets list --repo octo/app --stack Squadron-prod",
            "squadron change-sets show cs-0123456789ab --local --json",
        ),
    ),
    Subcommand(
        "memory",
        "what agents remember per repository: list, show, forget, pin or confirm a fact",
        operator_cli.configure_memory,
        operator_cli.run_memory,
        (
            "squadron memory list --repo octo/app --local",
            "squadron memory show m-0123456789ab --repo octo/app --local",
            "squadron memory pin m-0123456789ab --repo octo/app",
        ),
    ),
    Subcommand(
        "retro",
        "hold a repository's retrospective now (as its schedule would)",
        operator_cli.configure_retro,
        operator_cli.run_retro,
        (
            "squadron retro start --repo octo/app --local",
            "squadron retro start --repo octo/app --since 3d",
            "squadron retro start --repo octo/app --since 2026-11-01",
        ),
    ),
    Subcommand(
        "replay",
        "ask GitHub to send a webhook delivery again",
        operator_cli.configure_replay,
        operator_cli.run_replay,
        ("squadron replay 72d3162e-cc78-11e3-81ab-4c9367dc0958 --stage prod",),
    ),
    Subcommand(
        "app",
        "the GitHub App's manifest (permissions and events it needs), and the page that creates it",
        app_cli.configure_app,
        app_cli.run_app,
        (
            "squadron app manifest --webhook-url https://abc.execute-api.eu-west-1.amazonaws.com/webhook",
            "squadron app create --webhook-url https://abc.execute-api.eu-west-1.amazonaws.com/webhook "
            "--stack Squadron-dev",
            "squadron app create --webhook-url https://smee.io/abc --local-credentials --name my-squadron",
        ),
    ),
    Subcommand(
        "branch-protection",
        "set GitHub branch protection from the approval flows (GitHub as the hard backstop)",
        _configure_protection,
        _run_protection,
        (
            "squadron branch-protection plan --repo octo/app",
            "squadron branch-protection apply --repo octo/app --app-id 123456",
        ),
    ),
)


def build_parser(subcommands: Sequence[Subcommand] = SUBCOMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="squadron",
        description="Squadron: issues to merged pull requests with a team of LLM agents.",
        epilog="examples:\n  squadron validate\n  squadron local\n  squadron status --local\n"
        "  squadron COMMAND --help          # each command's options and examples\n\n" + EXIT_STATUSES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"squadron {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in subcommands:
        command_parser = sub.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            epilog=command.epilog(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
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
