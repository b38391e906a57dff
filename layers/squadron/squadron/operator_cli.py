"""The operator's subcommands: `squadron status`, `squadron agent show`, `squadron dlq list|redrive`,
`squadron memory`, `squadron retro start`, `squadron replay`, `squadron events tail`,
`squadron pipelines list|show|cancel`, `squadron change-sets list|show` (`squadron app` is
:mod:`squadron.app_cli`).

Each works on a deployed stage or on the running local stack (``--local``). The stage and its
region are the ones `cdk deploy` deploys from this checkout (cdk.json's and cdk.context.json's
values, as cdk reads them; a stage not chosen now by its own values; else the region the CDK CLI
falls back to, $AWS_REGION first: :func:`squadron.deployment.deployed`), so a command never reads
another stage's or region's resources; ``--stage``, ``--stack`` and ``--region`` say otherwise.
A stack that cannot be reached exits with 3 (a usage error is argparse's 2) and one line saying
what to do; a hint it prints names the same stack (``--local`` stays ``--local``). ``--since`` has
one meaning everywhere (:func:`squadron.cli_types.since`).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from squadron.cli_types import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNAVAILABLE,
    SINCE_FORMS,
    Since,
    repo_name,
    since,
)
from squadron.deployment import CONTEXT_FILE, SettingsError, cdk_default_region, deployed
from squadron.domain.app_manifest import web_url_for
from squadron.errors import ConfigurationError
from squadron.operator_view import (
    agent_detail,
    agent_row,
    dead_letter_table,
    failed_effects_table,
    memory_detail,
    memory_table,
    sort_agents,
    status_table,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from squadron.adapters.operations import Operations, Target

__all__ = ["EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_UNAVAILABLE"]

#: What ``--state`` and ``--file`` default to (a hint leaves a default out).
DEFAULT_STATE = ".squadron-local"
DEFAULT_FILE = CONTEXT_FILE
STACK_PREFIX = "Squadron-"


def _where(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--stage",
        help="the deployed stage (default: the one `cdk deploy` deploys from --file); its region is its own",
    )
    which.add_argument("--stack", help="the deployed stack, Squadron-<stage> (the same as --stage <stage>)")
    parser.add_argument(
        "--region",
        help="its AWS region (default: the stage's own value, else where cdk deploys it: $AWS_REGION, "
        "$AWS_DEFAULT_REGION, the profile's region, us-east-1)",
    )
    parser.add_argument(
        "--file",
        default=DEFAULT_FILE,
        help=f"the deployment's values, read as cdk reads them with cdk.json beside it (default: ./{DEFAULT_FILE})",
    )
    parser.add_argument("--local", action="store_true", help="the running local stack instead (`make local`)")
    parser.add_argument(
        "--state",
        default=DEFAULT_STATE,
        help=f"with --local: its state directory (default: ./{DEFAULT_STATE})",
    )
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")


def where_flags(args: argparse.Namespace) -> str:
    """The flags that name the stack a command ran on, as a hint repeats them (" --local", "")."""
    import shlex  # noqa: PLC0415

    if args.local:
        words = ["--local", *(["--state", args.state] if args.state != DEFAULT_STATE else [])]
    else:
        words = [
            *(["--stage", args.stage] if args.stage else []),
            *(["--stack", args.stack] if args.stack else []),
            *(["--region", args.region] if args.region else []),
            *(["--file", args.file] if args.file != DEFAULT_FILE else []),
        ]
    return "".join(f" {shlex.quote(word)}" for word in words)


def deployed_where(args: argparse.Namespace, environ: Mapping[str, str], home: Path) -> tuple[str, str, str]:
    """The stack and region an operator command reads, and how they were found: the stage `cdk
    deploy` deploys (or ``--stage``/``--stack``'s), in its own region (or ``--region``)."""
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    stage = args.stage
    if args.stack:
        stage = args.stack.removeprefix(STACK_PREFIX) if args.stack.startswith(STACK_PREFIX) else None
    try:
        if args.stack and stage is None:  # not a stage's stack: where cdk deploys by default
            region, region_from = cdk_default_region(environ, home)
            stack, stage_from = args.stack, "given"
        else:
            where = deployed(Path(args.file), stage=stage, environ=environ, home=home)
            stack, region, stage_from, region_from = (
                where.stack_name,
                where.region,
                where.stage_from,
                where.region_from,
            )
    except (SettingsError, ConfigurationError) as exc:
        raise OperatorError(f"cannot tell which stage to read: {exc}") from exc
    if args.region:
        region, region_from = args.region, "given"
    return stack, region, f"stack from {stage_from}, region from {region_from}"


def _target(args: argparse.Namespace) -> Target:
    import os  # noqa: PLC0415

    from squadron.adapters.operations import local_target, stack_target  # noqa: PLC0415

    if args.local:
        return local_target(Path(args.state))
    stack, region, found = deployed_where(args, os.environ, Path.home())
    return stack_target(stack, region=region, found=found)


def _operations(args: argparse.Namespace) -> Operations:
    from squadron.adapters.operations import Operations  # noqa: PLC0415

    return Operations(_target(args), flags=where_flags(args))


def _now() -> datetime:
    return datetime.now(UTC)


def configure_status(parser: argparse.ArgumentParser) -> None:
    _where(parser)
    parser.add_argument("--repo", type=repo_name, help="only this repository's agents (owner/name)")


def run_status(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    try:
        operations = _operations(args)
        agents = operations.agents(args.repo)
        failed = [] if args.json else operations.failed_effects(agents)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    now = _now()
    if args.json:
        out.write(json.dumps([agent_row(a, now) for a in sort_agents(agents)], indent=2) + "\n")
    else:
        out.write(status_table(agents, now))
        out.write(failed_effects_table(failed, now))
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


def configure_memory(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("list", "show", "forget", "pin", "confirm"),
        help=(
            "list: a repository's facts; show: one fact whole; forget: delete it; pin: confirm it and keep "
            "it until forgotten; confirm: share a proposal with every agent (it still expires unused)"
        ),
    )
    parser.add_argument("fact_id", nargs="?", help="the fact (m-...), for show, forget, pin and confirm")
    parser.add_argument("--repo", type=repo_name, required=True, help="the repository (owner/name)")
    parser.add_argument(
        "--by",
        default=None,
        help="who confirms or pins, as the fact records it (default: operator:<your user>)",
    )
    _where(parser)


def run_memory(args: argparse.Namespace, out: TextIO) -> int:
    """``squadron memory``: what agents remember, and people's say over it."""
    import getpass  # noqa: PLC0415

    from squadron.adapters.operations import OperatorError  # noqa: PLC0415
    from squadron.domain.memory import MemoryPolicy, MemoryRefusedError  # noqa: PLC0415
    from squadron.shell.memory import Memory  # noqa: PLC0415

    if args.action != "list" and not args.fact_id:
        out.write(
            f"squadron memory {args.action} needs a fact id (m-...): "
            f"`squadron memory list --repo {args.repo}{where_flags(args)}`\n"
        )
        return EXIT_PROBLEMS
    by = args.by or f"operator:{getpass.getuser()}"
    try:
        operations = _operations(args)
        repo_id = operations.repo_id(args.repo)
        memory = Memory(operations.memory_store(), clock=_now)
        policy = MemoryPolicy()
        match args.action:
            case "list":
                facts = operations.guarded("reading memory", memory.all, repo_id)
                if args.json:
                    out.write(json.dumps([f.model_dump(mode="json") for f in facts], indent=2) + "\n")
                else:
                    out.write(memory_table(facts))
                return EXIT_OK
            case "show":
                fact = operations.guarded("reading memory", memory.get, repo_id, args.fact_id)
                out.write(
                    json.dumps(fact.model_dump(mode="json"), indent=2) + "\n"
                    if args.json
                    else memory_detail(fact, web_url=web_url_for(operations.target.github_api_url))
                )
                return EXIT_OK
            case "forget":
                if not operations.guarded("forgetting", memory.forget, repo_id, args.fact_id):
                    out.write(f"no fact {args.fact_id} in the memory of {args.repo}\n")
                    return EXIT_PROBLEMS
                out.write(f"forgot {args.fact_id}\n")
                return EXIT_OK
            case "pin":
                fact = operations.guarded("pinning", memory.pin, repo_id, args.fact_id, by=by, policy=policy)
                out.write(
                    f"pinned {fact.fact_id}: every agent of {args.repo} sees it until it is forgotten\n"
                )
                return EXIT_OK
            case _:
                operations.guarded("reading memory", memory.get, repo_id, args.fact_id)
                done = operations.guarded(
                    "confirming", memory.confirm, repo_id, [args.fact_id], by=by, how="cli", policy=policy
                )
                said = "confirmed" if done else "was confirmed already"
                out.write(f"{args.fact_id} {said}: every agent of {args.repo} may see it\n")
                return EXIT_OK
    except MemoryRefusedError as exc:
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE


def configure_retro(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("start",), help="start: hold a repository's retrospective now")
    parser.add_argument("--repo", type=repo_name, required=True, help="the repository (owner/name)")
    parser.add_argument(
        "--days", type=int, default=7, help="look back this many days (default: 7), when no --since"
    )
    parser.add_argument(
        "--since",
        type=since,
        help=f"look back to here: {SINCE_FORMS} (default: the last one's end)",
    )
    _where(parser)


def run_retro(args: argparse.Namespace, out: TextIO) -> int:
    """``squadron retro start``: the router holds the retrospective as if its schedule fired."""
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    if not 1 <= args.days <= 366:
        out.write("--days is 1 to 366\n")
        return EXIT_PROBLEMS
    now = _now()
    start = args.since.start(now) if args.since is not None else None
    if start is not None and start > now:
        out.write(f"--since {start.isoformat()}: in the future\n")
        return EXIT_PROBLEMS
    try:
        delivery = _operations(args).start_retrospective(args.repo, days=args.days, since=start, now=now)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    out.write(
        json.dumps({"delivery_id": delivery}) + "\n"
        if args.json
        else f"asked for the retrospective of {args.repo} ({delivery}); its issue opens in a moment\n"
    )
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


def configure_events(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("tail",), help="tail: the domain events as they are published")
    _where(parser)
    parser.add_argument("--repo", type=repo_name, help="only this repository's events (owner/name)")
    parser.add_argument(
        "--since",
        type=since,
        default=Since(ago=timedelta(minutes=10)),
        help=f"start here: {SINCE_FORMS} (default: 10m)",
    )
    parser.add_argument("--once", action="store_true", help="print what is there and exit (no following)")


def run_events(args: argparse.Namespace, out: TextIO) -> int:
    """``squadron events tail``: one line per event (``--json``: the whole event detail, one per line)."""
    from squadron.adapters.event_bus import EventBusError, EventLog  # noqa: PLC0415
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415

    try:
        target = _target(args)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    if not target.event_log_group:
        out.write(
            "this stack publishes no domain events yet (no DomainEventsLogGroupName): deploy it again\n"
        )
        return EXIT_UNAVAILABLE
    log = EventLog(target.event_log_group, _client=target.logs())
    since_ms = int(args.since.start(_now()).timestamp() * 1000)
    seen: set[str] = set()
    try:
        while True:
            for event in log.read(since_ms, seen):
                if args.repo and event.repository != args.repo:
                    continue
                detail = {"detail-type": event.detail_type, **event.detail}
                out.write((json.dumps(detail, sort_keys=True) if args.json else event.line()) + "\n")
            out.flush()
            if args.once:
                return EXIT_OK
            _pause(TAIL_INTERVAL_SECONDS)
    except EventBusError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


#: How often ``events tail`` asks CloudWatch Logs for more (FilterLogEvents: 5 calls a second per account).
TAIL_INTERVAL_SECONDS = 2.0


def _pause(seconds: float) -> None:  # pragma: no cover - the wait between polls of a tail
    import time  # noqa: PLC0415

    time.sleep(seconds)


#: The statuses ``squadron pipelines list --status`` takes (Step Functions' own).
RUN_STATUSES = ("RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE")


def configure_pipelines(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("list", "show", "cancel"),
        help=(
            "list: the runs, newest first; show: one run, its current stages and what they wait for; "
            "cancel: stop a run and its sub-pipeline runs"
        ),
    )
    parser.add_argument(
        "execution",
        nargs="?",
        metavar="run",
        help="for show and cancel: the run's ARN, or <state machine>:<run name> as list prints it",
    )
    parser.add_argument("--repo", type=repo_name, help="list: only this repository's runs (owner/name)")
    parser.add_argument("--status", choices=RUN_STATUSES, help="list: only runs of this status")
    parser.add_argument("--limit", type=int, default=50, help="list: at most this many runs (default: 50)")
    parser.add_argument("--reason", help="cancel: why (the run's cause; default: cancelled by <your user>)")
    _where(parser)


def run_pipelines(args: argparse.Namespace, out: TextIO) -> int:
    """``squadron pipelines``: the deployment's pipeline runs on Step Functions."""
    import getpass  # noqa: PLC0415

    from squadron.adapters.operations import OperatorError  # noqa: PLC0415
    from squadron.adapters.pipeline_runs import RunRefusedError  # noqa: PLC0415
    from squadron.adapters.step_functions import StepFunctionsUnavailableError  # noqa: PLC0415
    from squadron.domain.pipeline_runs import run_detail, run_id, runs_table  # noqa: PLC0415

    if args.action != "list" and not args.execution:
        out.write(
            f"squadron pipelines {args.action} needs a run: `squadron pipelines list{where_flags(args)}`\n"
        )
        return EXIT_PROBLEMS
    if not 1 <= args.limit <= 1000:
        out.write("--limit is 1 to 1000\n")
        return EXIT_PROBLEMS
    try:
        operations = _operations(args)
        runs = operations.pipeline_runs()
        if args.action == "list":
            repository_ids = [operations.repo_id(args.repo)] if args.repo else None
            listing = runs.listing(repository_ids=repository_ids, status=args.status, limit=args.limit)
            if args.json:
                out.write(
                    json.dumps({"runs": [r.row() for r in listing.runs], "more": listing.more}, indent=2)
                    + "\n"
                )
            else:
                out.write(runs_table(listing.runs, more=listing.more))
            return EXIT_OK
        if args.action == "show":
            found = runs.summary(runs.arn(args.execution))
            if found is None:
                out.write(
                    f"no run {args.execution}: `squadron pipelines list{where_flags(args)}` lists them\n"
                )
                return EXIT_PROBLEMS
            out.write(json.dumps(found.row(), indent=2) + "\n" if args.json else run_detail(found))
            return EXIT_OK
        by = f"operator:{getpass.getuser()}"
        reason = f"{args.reason} ({by})" if args.reason else f"cancelled by {by}"
        stopped = runs.cancel(args.execution, reason)
    except RunRefusedError as exc:
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    except (OperatorError, StepFunctionsUnavailableError) as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    if args.json:
        out.write(json.dumps({"stopped": stopped}) + "\n")
    elif stopped:
        out.write("stopped " + ", ".join(run_id(arn) for arn in stopped) + "\n")
    else:
        out.write(f"{args.execution} is over already: nothing to stop\n")
    return EXIT_OK


def configure_change_sets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("list", "show"),
        help="list: the change sets, newest first; show: one set, its repositories, merge order and check",
    )
    parser.add_argument("change_set", nargs="?", metavar="set", help="for show: the set's id (cs-...)")
    parser.add_argument("--repo", type=repo_name, help="list: only sets this repository is in (owner/name)")
    parser.add_argument("--limit", type=int, default=50, help="list: at most this many sets (default: 50)")
    _where(parser)


def run_change_sets(args: argparse.Namespace, out: TextIO) -> int:
    """``squadron change-sets``: change sets across repositories, read from the registry."""
    from squadron.adapters.operations import OperatorError  # noqa: PLC0415
    from squadron.domain.change_set_view import (  # noqa: PLC0415
        change_set_detail,
        change_set_row,
        change_sets_table,
    )

    if args.action == "show" and not args.change_set:
        out.write(f"squadron change-sets show needs a set: `squadron change-sets list{where_flags(args)}`\n")
        return EXIT_PROBLEMS
    if not 1 <= args.limit <= 1000:
        out.write("--limit is 1 to 1000\n")
        return EXIT_PROBLEMS
    try:
        operations = _operations(args)
        if args.action == "show":
            found = operations.change_set(args.change_set)
            out.write(
                json.dumps(change_set_row(found), indent=2) + "\n" if args.json else change_set_detail(found)
            )
            return EXIT_OK
        listed = operations.change_sets(args.limit)
    except OperatorError as exc:
        out.write(f"{exc}\n")
        return EXIT_UNAVAILABLE
    if args.repo:
        listed = [c for c in listed if any(m.repository.lower() == args.repo.lower() for m in c.members)]
    if args.json:
        out.write(json.dumps({"change_sets": [change_set_row(c) for c in listed]}, indent=2) + "\n")
    else:
        out.write(change_sets_table(listed))
    return EXIT_OK
