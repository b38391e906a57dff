"""The ``squadron`` command.

Subcommands are rows of :data:`SUBCOMMANDS`: a name, a one-line help, a function
that adds its arguments and a function that runs it and returns the exit status.
A later subcommand is one more row.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from squadron import __version__, deploy_cli, destroy_cli, operator_cli
from squadron.cli_types import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_STATUSES_HELP,
    EXIT_UNAVAILABLE,
    days,
    github_id,
    port,
    positive_number,
    repo_name,
)
from squadron.config import ConfigError, SquadronConfig, load_directory, write_schemas
from squadron.domain.permissions import Caller
from squadron.domain.protection import protected_branches, protection_for
from squadron.domain.repo_config.constants import CONFIG_DIR
from squadron.domain.retention import DEFAULT_RETENTION_DAYS

if TYPE_CHECKING:
    from squadron.adapters.github.http import GitHubHttp
    from squadron.local.showcase import Showcase
    from squadron.local.stack import LocalStack

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
    out.write(_summary(args.path, config))
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
            + "); validated only: their execution is being built (docs/pipelines.md)"
        )
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
    try:
        written = write_schemas(Path(args.out))
    except OSError as exc:
        out.write(f"{args.out}: cannot write the schemas there: {exc.strerror or exc}\n")
        return EXIT_PROBLEMS
    for path in written:
        out.write(f"wrote {path}\n")
    return EXIT_OK


# --- local -------------------------------------------------------------------------------------

#: The agents' Copilot token with real GitHub: with it, each role's configured model answers.
COPILOT_TOKEN_ENV = "SQUADRON_COPILOT_TOKEN"  # noqa: S105 (a variable's name)

#: The GitHub sandbox's port unless told otherwise: its pages stay at one address across restarts.
SANDBOX_PORT = 8765


def _configure_local(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        default=".squadron-local",
        help="directory for all local state; a restart resumes from it (default: ./.squadron-local)",
    )
    parser.add_argument(
        "--repo", type=repo_name, default="octo/demo", help="the sandbox repository (default: octo/demo)"
    )
    parser.add_argument(
        "--reconcile-seconds",
        type=positive_number,
        default=30.0,
        help="the reconciler's period (default: 30 s)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="play the demo scenario and print its timeline (in <state>/demo, emptied first: every demo "
        "starts from nothing and your own local state is left alone)",
    )
    parser.add_argument(
        "--exit",
        action="store_true",
        help="with --demo: stop afterwards; exit 0 when the scenario completed, 1 naming the stuck step",
    )
    parser.add_argument(
        "--github-app",
        metavar="FILE",
        help="YAML file with real GitHub App credentials (see docs/local-stack.md; or the SQUADRON_GITHUB_* "
        "variables); without any, a GitHub sandbox stands in",
    )
    parser.add_argument(
        "--port", type=port, default=0, help="the webhook endpoint's port (default: any free one)"
    )
    parser.add_argument(
        "--sandbox-port",
        type=port,
        default=SANDBOX_PORT,
        help=f"the GitHub sandbox's port, where its pages are browsed (default: {SANDBOX_PORT}; "
        "any free one when it is taken)",
    )
    parser.add_argument(
        "--state-retention-days",
        type=days,
        default=DEFAULT_RETENTION_DAYS,
        help="days a finished agent's working copy and session are kept under <state>/agents before "
        f"the next agent task removes them (default: {DEFAULT_RETENTION_DAYS}; 0: once no task of it runs)",
    )
    parser.add_argument("--root", default=".", help=argparse.SUPPRESS)


def _run_local(args: argparse.Namespace, out: TextIO) -> int:
    import signal  # noqa: PLC0415 (the other commands start without the local stack)
    import threading  # noqa: PLC0415

    from squadron.local import demo  # noqa: PLC0415
    from squadron.local.credentials import CredentialsError, load_credentials  # noqa: PLC0415
    from squadron.local.feed import stack_feed  # noqa: PLC0415
    from squadron.local.stack import LocalOptions, LocalStack  # noqa: PLC0415
    from squadron.local.state_lock import StateInUseError  # noqa: PLC0415

    root = Path(args.root).resolve()
    if not (root / "functions" / "router" / "handler.py").exists():
        out.write(f"{root}: not a Squadron checkout (run `make local` from the repository)\n")
        return EXIT_PROBLEMS
    try:
        github = load_credentials(os.environ, Path(args.github_app) if args.github_app else None)
    except CredentialsError as exc:
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    if github is not None and args.demo:
        out.write("--demo plays against the GitHub sandbox: run it without GitHub App credentials\n")
        return EXIT_PROBLEMS
    state_dir = _state_dir(args, out)
    if state_dir is None:
        return EXIT_PROBLEMS
    script = _local_script(root, out, demo=args.demo, sandbox=github is None)
    if script is None:
        return EXIT_PROBLEMS
    stack = LocalStack(
        LocalOptions(
            root=root,
            state_dir=state_dir,
            repo=args.repo,
            # The demo runs the reconciler itself at one step (what it shows stays the same run to run).
            reconcile_seconds=max(args.reconcile_seconds, 3600.0) if args.demo else args.reconcile_seconds,
            **script,
            github=github,
            copilot_token=os.environ.get(COPILOT_TOKEN_ENV) or None if github else None,
            port=args.port,
            sandbox_port=args.sandbox_port,
            state_retention_days=args.state_retention_days,
        )
    )
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        stack.start()
    except (CredentialsError, StateInUseError) as exc:
        stack.stop()
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    out.write(_local_banner(stack, args))
    out.flush()
    status = EXIT_OK
    feed = stack_feed(stack)
    _write_history(stack, feed, out)
    try:
        if args.demo:
            try:
                demo.play(stack, out, feed=feed)
                out.write("demo: the scenario completed\n")
            except demo.DemoStuck as exc:
                out.write(f"demo: {exc}\n")
                status = EXIT_PROBLEMS
            if args.exit:
                return status
        while not stopping.wait(0.5):
            for line in feed.poll():
                out.write(f"{time.strftime('%H:%M:%S')} {line}\n")
            out.flush()
    finally:
        out.write("stopping...\n")
        stack.stop()
        out.write(f"stopped; no agent process left running; state saved in {args.state}\n")
    return status


def _write_history(stack: Any, feed: Any, out: TextIO) -> None:
    """What a restart put back, once, marked as history (the feed never shows it again as news)."""
    if stack.restored is not None:
        for line in feed.history():
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def _local_script(root: Path, out: TextIO, *, demo: bool, sandbox: bool) -> dict[str, Any] | None:
    """The scripted model's part of the stack's options: the demo's; with the sandbox and no
    model configured, the showcase's (its agents, its approval flow, its stand-in CI); with real
    GitHub and no Copilot token, none (the quiet model). None: the checkout's configuration,
    which the showcase reads, has problems (said on ``out``)."""
    from squadron.local import demo as scenario  # noqa: PLC0415
    from squadron.local.showcase import SHOWCASE_FLOWS, Showcase  # noqa: PLC0415

    flows = f"{CONFIG_DIR}/workflows/approval-flows.yaml"
    if demo:
        return {"model_policy": scenario.demo_policy, "files": {flows: scenario.DEMO_FLOWS}}
    if sandbox:
        try:
            showcase = Showcase.of_checkout(root)
        except ConfigError as exc:
            out.write(f"the showcase reads the checkout's {CONFIG_DIR}, which has problems:\n{exc}\n")
            return None
        return {
            "model_policy": showcase,
            "files": {flows: SHOWCASE_FLOWS},
            "stand_in_ci": True,
        }
    return {}


def _state_dir(args: argparse.Namespace, out: TextIO) -> Path | None:
    """--state, or with --demo the demo's own fresh directory under it (None: it cannot start)."""
    from squadron.local import demo  # noqa: PLC0415

    state_dir = Path(args.state).resolve()
    if args.demo:
        try:
            state_dir = demo.fresh_state(state_dir, running=_local_stack_runs)
        except demo.DemoRunningError as exc:
            out.write(f"{exc}\n")
            return None
        args.state = str(state_dir)
    return state_dir


def _local_stack_runs(state_dir: Path) -> bool:
    """Whether a local stack still answers with its state in ``state_dir``."""
    from squadron.adapters.operations import OperatorError, local_target  # noqa: PLC0415

    try:
        local_target(state_dir)
    except OperatorError:
        return False
    return True


def _local_banner(stack: LocalStack, args: argparse.Namespace) -> str:
    assert stack.resources is not None
    state = Path(args.state)
    lines = ["squadron local is running (Ctrl-C stops it and saves its state):"]
    if stack.sandbox is not None:
        lines += [
            f"  GitHub sandbox   {stack.sandbox.base_url}  (repository {args.repo}; act as a human with",
            "                   'Authorization: token human:octo-human')",
            f"  webhook endpoint {stack.endpoint}/webhook",
            f"  browse           {stack.sandbox.base_url}/ui/  (issues, pull requests and the dashboard)",
        ]
        if stack.sandbox_port_taken:
            lines.append(
                f"                   (port {args.sandbox_port} was taken: the sandbox serves on another)"
            )
    else:
        github = stack.options.github
        assert github is not None
        lines += [
            f"  GitHub           {github.api_url} as the App {stack.app_slug} (id {github.app_id})",
            f"  webhook URL      {stack.endpoint}/webhook",
            "                   GitHub cannot reach 127.0.0.1: point a tunnel at it, e.g.",
            f"                   npx smee-client --url https://smee.io/<channel> --target {stack.endpoint}/webhook",
            "                   and set the tunnel's public URL as the App's webhook URL",
        ]
    from squadron.local import showcase  # noqa: PLC0415

    policy = stack.options.model_policy
    if not stack.model.base_url:
        model = "each role's model, through Copilot"
    elif isinstance(policy, showcase.Showcase):
        model = f"{stack.model.base_url}  (the scripted showcase model: no model is configured)"
    elif policy is None:
        model = f"{stack.model.base_url}  (scripted and quiet: agents read their events and stop)"
    else:
        model = f"{stack.model.base_url}  (the demo's scripted model)"
    lines += [
        f"  AWS (moto)       {stack.resources.endpoint}",
        f"  model            {model}",
        f"  state            {state}",
        f"  logs             {state / 'logs'} (lambdas.log: the Lambdas' JSON logs;",
        "                   <agent id>.log: each agent task's output)",
    ]
    follow = "--local" + (f" --state {shlex.quote(args.state)}" if args.state != ".squadron-local" else "")
    lines.append(f"  follow           squadron status {follow}; squadron events tail {follow}")
    if stack.restored is not None:
        lines.append(
            f"Resumed from {state / 'saved'}: {stack.restored['items']} registry items, "
            f"{stack.restored['events']} queued events, {stack.restored.get('history', 0)} past domain events "
            "(agents that were running are relaunched)."
        )
    if isinstance(policy, showcase.Showcase) and stack.sandbox is not None:
        lines += _showcase_lines(policy, stack.sandbox.base_url, args.repo, stack.sandbox.bot_login)
    elif policy is None and stack.model.base_url:
        lines.append(
            f"For real models: also set {COPILOT_TOKEN_ENV} (agents use their roles' models through Copilot)."
        )
    return "\n".join(lines) + "\n"


def _showcase_lines(showcase: Showcase, sandbox: str, repo: str, bot: str) -> list[str]:
    """What the showcase does with an issue a person opens, and how to use a real model instead."""
    from squadron.local.showcase import NOTES_DIR  # noqa: PLC0415

    label = f"labels it '{showcase.label}' and " if showcase.label else ""
    return [
        "",
        "No model is configured, so a scripted showcase model plays the agents. Open an issue, e.g.",
        f"  curl -X POST {sandbox}/repos/{repo}/issues -H 'authorization: token human:octo-human' \\",
        '       -d \'{"title": "Export the registry as CSV"}\'',
        f"and watch (here and at {sandbox}/ui/): the PM {label}assigns it to {showcase.dev_role}",
        f"(the App {bot} is assigned); {showcase.dev_role} opens a pull request adding "
        f"{NOTES_DIR}/<issue>.md;",
        "pr-review approves it; a stand-in CI passes the check 'ci' (it runs no tests); the merge gate",
        "merges it and the issue closes. An issue opened by someone without write access is triaged,",
        f"but its agent waits until a writer adds the label '{showcase.approval_label}' or assigns the App.",
        "A real model instead: run against real GitHub with a GitHub App's credentials",
        f"(SQUADRON_GITHUB_* variables or --github-app FILE) and {COPILOT_TOKEN_ENV}: agents then",
        "use their roles' models through Copilot (docs/local-stack.md, 'Against real GitHub').",
    ]


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
        _configure_local,
        _run_local,
        (
            "squadron local                    # the whole system on this machine",
            "squadron local --demo --exit      # play the demo scenario, then stop",
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
            "squadron status --stack Squadron-prod --region eu-west-1 --repo octo/app",
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
        ("squadron dlq list --local", "squadron dlq redrive --stack Squadron-prod"),
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
        ("squadron replay 72d3162e-cc78-11e3-81ab-4c9367dc0958 --stack Squadron-prod",),
    ),
    Subcommand(
        "app",
        "the GitHub App's manifest (permissions and events it needs), and the page that creates it",
        operator_cli.configure_app,
        operator_cli.run_app,
        (
            "squadron app manifest --webhook-url https://abc.execute-api.eu-west-1.amazonaws.com/webhook",
            "squadron app create --webhook-url https://abc.execute-api.eu-west-1.amazonaws.com/webhook "
            "--stack Squadron-dev",
            "squadron app create --webhook-url https://smee.io/abc --local --name my-squadron",
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
