"""``squadron local``: the whole system on this machine (:mod:`squadron.local.stack`), its banner,
and the scripted model it runs with when no model is configured (docs/local-stack.md)."""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from squadron.cli_types import EXIT_OK, EXIT_PROBLEMS, days, port, positive_number, repo_name
from squadron.config import ConfigError
from squadron.domain.repo_config.constants import CONFIG_DIR
from squadron.domain.retention import DEFAULT_RETENTION_DAYS

if TYPE_CHECKING:
    from squadron.local.credentials import GitHubAppCredentials
    from squadron.local.showcase import Showcase
    from squadron.local.stack import LocalStack
    from squadron.local.wiring import LocalOptions


#: The agents' Copilot token with real GitHub: with it, each role's configured model answers.
COPILOT_TOKEN_ENV = "SQUADRON_COPILOT_TOKEN"  # noqa: S105 (a variable's name)

#: ``--demo``'s scenarios: one issue's whole life (:mod:`squadron.local.demo`), or a change set
#: across three repositories (:mod:`squadron.local.change_set_demo`).
DEMO_ISSUE, DEMO_CHANGE_SET = "issue", "change-set"

#: The GitHub sandbox's port unless told otherwise: its pages stay at one address across restarts.
SANDBOX_PORT = 8765


def configure_local(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        default=".squadron-local",
        help="directory for all local state; a restart resumes from it (default: ./.squadron-local)",
    )
    parser.add_argument(
        "--repo",
        dest="repos",
        action="append",
        type=repo_name,
        metavar="OWNER/NAME",
        help="a sandbox repository (default: octo/demo); repeat it to serve several under the App's one "
        "installation (the first is the one the demo and the showcase use)",
    )
    parser.add_argument(
        "--reconcile-seconds",
        type=positive_number,
        default=30.0,
        help="the reconciler's period (default: 30 s)",
    )
    parser.add_argument(
        "--demo",
        nargs="?",
        const=DEMO_ISSUE,
        choices=(DEMO_ISSUE, DEMO_CHANGE_SET),
        help="play a demo scenario and print its timeline (in <state>/demo, emptied first: every demo "
        f"starts from nothing and your own local state is left alone): '{DEMO_ISSUE}' (the default) one "
        f"issue's whole life; '{DEMO_CHANGE_SET}' a change set across three sandbox repositories "
        "(docs/change-sets.md)",
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


def run_local(args: argparse.Namespace, out: TextIO) -> int:
    import signal  # noqa: PLC0415 (the other commands start without the local stack)
    import threading  # noqa: PLC0415

    from squadron.local import change_set_demo, demo  # noqa: PLC0415
    from squadron.local.credentials import CredentialsError, load_credentials  # noqa: PLC0415
    from squadron.local.feed import stack_feed  # noqa: PLC0415
    from squadron.local.stack import LocalStack  # noqa: PLC0415
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
    if (refused := _demo_repos_refused(args)) or (github is not None and (refused := _sandbox_only(args))):
        out.write(f"{refused}\n")
        return EXIT_PROBLEMS
    state_dir = _state_dir(args, out)
    if state_dir is None:
        return EXIT_PROBLEMS
    script = local_script(root, out, demo=args.demo, sandbox=github is None)
    if script is None:
        return EXIT_PROBLEMS
    stack = LocalStack(local_options(args, root, state_dir, script, github))
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        stack.start()
    except (CredentialsError, StateInUseError) as exc:
        stack.stop()
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    out.write(local_banner(stack, args))
    out.flush()
    status = EXIT_OK
    feed = stack_feed(stack)
    _write_history(stack, feed, out)
    try:
        if args.demo:
            try:
                (change_set_demo.play_change_set if args.demo == DEMO_CHANGE_SET else demo.play)(
                    stack, out, feed=feed
                )
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


def local_options(
    args: argparse.Namespace,
    root: Path,
    state_dir: Path,
    script: dict[str, Any],
    github: GitHubAppCredentials | None,
) -> LocalOptions:
    """The stack's options from the command line, the model's script and the App's credentials."""
    from squadron.local.wiring import LocalOptions  # noqa: PLC0415

    repo, *extra = demo_repositories(args.demo) or sandbox_repositories(args.repos)
    return LocalOptions(
        root=root,
        state_dir=state_dir,
        repo=repo,
        extra_repos=tuple(extra),
        # The demo runs the reconciler itself at one step (what it shows stays the same run to run).
        reconcile_seconds=max(args.reconcile_seconds, 3600.0) if args.demo else args.reconcile_seconds,
        **script,
        github=github,
        copilot_token=os.environ.get(COPILOT_TOKEN_ENV) or None if github else None,
        port=args.port,
        sandbox_port=args.sandbox_port,
        state_retention_days=args.state_retention_days,
    )


def _demo_repos_refused(args: argparse.Namespace) -> str | None:
    """Why ``--repo`` cannot name the sandbox's repositories for this demo (None: it can)."""
    if args.demo == DEMO_CHANGE_SET and args.repos:
        named = ", ".join(demo_repositories(args.demo))
        return f"--demo {DEMO_CHANGE_SET} plays on its own repositories ({named}): leave out --repo"
    return None


def _sandbox_only(args: argparse.Namespace) -> str | None:
    """Why the options ask for the sandbox when real GitHub is configured (None: they do not)."""
    if args.demo:
        return "--demo plays against the GitHub sandbox: run it without GitHub App credentials"
    if args.repos:
        return (
            "--repo names sandbox repositories: with real GitHub, the App serves the repositories "
            "its installations cover"
        )
    return None


def demo_repositories(demo: str | None) -> list[str]:
    """The sandbox repositories a demo scenario plays on (none: the ones ``--repo`` names)."""
    from squadron.local.change_set_demo import REPOSITORIES  # noqa: PLC0415

    return list(REPOSITORIES) if demo == DEMO_CHANGE_SET else []


def sandbox_repositories(named: list[str] | None) -> list[str]:
    """The sandbox's repositories from ``--repo`` (each once, in the order named; octo/demo when
    none is named)."""
    return list(dict.fromkeys(named or ["octo/demo"]))


def _write_history(stack: Any, feed: Any, out: TextIO) -> None:
    """What a restart put back, once, marked as history (the feed never shows it again as news)."""
    if stack.restored is not None:
        for line in feed.history():
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def local_script(root: Path, out: TextIO, *, demo: bool | str | None, sandbox: bool) -> dict[str, Any] | None:
    """The scripted model's part of the stack's options: the demo's (``demo``: its scenario, or
    True for one issue's); with the sandbox and no
    model configured, the showcase's (its agents, its approval flow, its stand-in CI); with real
    GitHub and no Copilot token, none (the quiet model). None: the checkout's configuration,
    which the showcase reads, has problems (said on ``out``)."""
    from squadron.local import change_set_demo  # noqa: PLC0415
    from squadron.local import demo as scenario  # noqa: PLC0415
    from squadron.local.showcase import SHOWCASE_FLOWS, Showcase  # noqa: PLC0415

    flows = f"{CONFIG_DIR}/workflows/approval-flows.yaml"
    if demo == DEMO_CHANGE_SET:
        return {
            "model_policy": change_set_demo.change_set_policy,
            "files": {flows: change_set_demo.CHANGE_SET_FLOWS},
        }
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


def local_banner(stack: LocalStack, args: argparse.Namespace) -> str:
    assert stack.resources is not None
    state = Path(args.state)
    lines = ["squadron local is running (Ctrl-C stops it and saves its state):"]
    if stack.sandbox is not None:
        repos = (stack.options.repo, *stack.options.extra_repos)
        named = f"repository {repos[0]}" if len(repos) == 1 else f"repositories {', '.join(repos)}"
        lines += [
            f"  GitHub sandbox   {stack.sandbox.base_url}  ({named}; act as a human with",
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
        lines += _showcase_lines(policy, stack.sandbox.base_url, stack.options.repo, stack.sandbox.bot_login)
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
