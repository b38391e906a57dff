"""The operator's subcommands: `squadron status`, `squadron agent show`, `squadron dlq list|redrive`.

Each works on a deployed stack (``--stack``, default Squadron-dev, with boto3's default
credentials and region) or on the running local stack (``--local``). A stack that cannot be
reached exits with 3 and one line saying what to do.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from squadron.operator_view import agent_detail, agent_row, dead_letter_table, sort_agents, status_table

if TYPE_CHECKING:
    from squadron.adapters.operations import Operations

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_UNAVAILABLE = 3


def _where(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", default="Squadron-dev", help="the deployed stack (default: Squadron-dev)")
    parser.add_argument("--region", help="its AWS region (default: boto3's)")
    parser.add_argument("--local", action="store_true", help="the running local stack instead (`make local`)")
    parser.add_argument("--state", default=".squadron-local", help="with --local: its state directory")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")


def _operations(args: argparse.Namespace) -> Operations:
    from squadron.adapters.operations import Operations, local_target, stack_target  # noqa: PLC0415

    target = local_target(Path(args.state)) if args.local else stack_target(args.stack, region=args.region)
    return Operations(target)


def _now() -> datetime:
    return datetime.now(UTC)


def configure_status(parser: argparse.ArgumentParser) -> None:
    _where(parser)
    parser.add_argument("--repo", help="only this repository's agents (owner/name)")


def run_status(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    try:
        agents = _operations(args).agents(args.repo)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    now = _now()
    if args.json:
        out.write(json.dumps([agent_row(a, now) for a in sort_agents(agents)], indent=2) + "\n")
    else:
        out.write(status_table(agents, now))
    return EXIT_OK


def configure_agent(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("show",), help="show: one agent, whole, with its inbox")
    parser.add_argument("agent_id", help="the agent's id, e.g. 1-42-feat-dev (see `squadron status`)")
    _where(parser)


def run_agent(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    try:
        agent, inbox = _operations(args).agent(args.agent_id)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    if args.json:
        data = {**agent.model_dump(mode="json"), "inbox": [i.model_dump(mode="json") for i in inbox]}
        out.write(json.dumps(data, indent=2) + "\n")
    else:
        out.write(agent_detail(agent, inbox, _now()))
    return EXIT_OK


def configure_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("delivery", help="the delivery's GUID (X-GitHub-Delivery, in the logs) or numeric id")
    _where(parser)


def run_replay(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    try:
        found = _operations(args).replay(args.delivery)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    if args.json:
        out.write(json.dumps(found, indent=2) + "\n")
    else:
        event = ".".join(str(p) for p in (found.get("event"), found.get("action")) if p)
        out.write(
            f"GitHub redelivers {found.get('guid')} ({event}, first sent {found.get('delivered_at')}); "
            "if Squadron processed it already, the router changes nothing\n"
        )
    return EXIT_OK


def configure_dlq(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("list", "redrive"),
        help="list: what failed five times; redrive: back onto events.fifo",
    )
    _where(parser)


def run_dlq(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    try:
        operations = _operations(args)
        if args.action == "redrive":
            moved = operations.redrive()
            out.write(json.dumps({"redriven": moved}) + "\n" if args.json else f"redrove {moved} messages\n")
            return EXIT_OK
        messages = operations.dead_letters()
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    out.write(json.dumps(messages, indent=2) + "\n" if args.json else dead_letter_table(messages))
    return EXIT_OK


def configure_app(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("manifest", "create"),
        help="manifest: print it; create: write the page that creates the App",
    )
    parser.add_argument("--webhook-url", required=True, help="the stack's WebhookUrl output (https)")
    parser.add_argument(
        "--name", default="squadron", help="the App's name, unique on GitHub (default: squadron)"
    )
    parser.add_argument("--org", help="create it in this organization (default: your account)")
    parser.add_argument("--homepage", default="https://github.com", help="the App's homepage URL")
    parser.add_argument("--out", default="squadron-app.html", help="with create: where to write the page")


def run_app(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.domain.app_manifest import creation_url, manifest, manifest_form  # noqa: PLC0415

    if not args.webhook_url.startswith("https://"):
        out.write(
            f"--webhook-url {args.webhook_url}: GitHub delivers webhooks to an https URL (the stack's WebhookUrl)\n"
        )
        return EXIT_PROBLEMS
    body = manifest(name=args.name, webhook_url=args.webhook_url, homepage=args.homepage)
    if args.action == "manifest":
        out.write(json.dumps(body, indent=2) + "\n")
        return EXIT_OK
    page = Path(args.out)
    page.write_text(manifest_form(body, args.org), encoding="utf-8")
    out.write(
        f"wrote {page}: open it in a browser and press the button; GitHub ({creation_url(args.org)}) shows the\n"
        "App's permissions and events before it creates it. Then, on the App's settings page:\n"
        "  1. note the App ID and generate a private key (a .pem file downloads);\n"
        "  2. set a webhook secret (e.g. `openssl rand -hex 32`);\n"
        "  3. store both in the stack's secrets (names in its outputs):\n"
        "       aws secretsmanager put-secret-value --secret-id <GitHubAppPrivateKeySecretName> "
        "--secret-string file://app.pem\n"
        "       aws secretsmanager put-secret-value --secret-id <WebhookSecretName> --secret-string <secret>\n"
        "  4. deploy with the App's id: cdk deploy -c github_app_id=<App ID>\n"
        "  5. install the App on each repository it should work in (Install App -> Only select repositories).\n"
    )
    return EXIT_OK
