"""The `squadron` command as a whole (issue 33, item 5): examples in every --help, one meaning
per flag across commands (``--since`` above all), exit statuses that tell a usage error (2) from
an unreachable stack (3), and hints that name the stack the command ran on (``--local`` stays)."""

from __future__ import annotations

import argparse
import io
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from squadron.cli import SUBCOMMANDS, build_parser, main
from squadron.cli_types import EXIT_UNAVAILABLE, EXIT_USAGE, Since
from squadron.operator_cli import where_flags

NOW = datetime(2026, 11, 27, 16, 0, tzinfo=UTC)


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


# --- examples and exit statuses in every --help ------------------------------------------------


@pytest.mark.parametrize("name", [c.name for c in SUBCOMMANDS])
def test_every_command_s_help_shows_examples_and_the_exit_statuses(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        run(name, "--help")
    assert caught.value.code == 0
    shown = capsys.readouterr().out
    examples = shown.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples and all(line.startswith(f"  squadron {name}") for line in examples), shown
    assert f"  {EXIT_USAGE}    usage error" in shown and f"  {EXIT_UNAVAILABLE}    the stack" in shown


EXAMPLES = [(c.name, example) for c in SUBCOMMANDS for example in c.examples]


@pytest.mark.parametrize(("name", "example"), EXAMPLES, ids=[e for _, e in EXAMPLES])
def test_every_example_is_a_command_line_that_parses(name: str, example: str) -> None:
    words = shlex.split(example, comments=True)
    assert words[:2] == ["squadron", name]
    args = build_parser().parse_args(words[1:])  # a usage error would exit 2
    assert args.command == name


def test_the_top_level_help_lists_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run("--help")
    shown = capsys.readouterr().out
    assert "exit status:" in shown and "squadron COMMAND --help" in shown


# --- one meaning per flag ----------------------------------------------------------------------


def _options() -> dict[str, dict[str, argparse.Action]]:
    """{option string: {command: its action}} for every option of more than one command."""
    found: dict[str, dict[str, argparse.Action]] = {}
    for command, parser in _subparsers().items():
        for action in parser._actions:
            for option in action.option_strings:
                if (command, option) != ("app", "--local"):  # a refusal naming --local-credentials
                    found.setdefault(option, {})[command] = action
    return {option: by for option, by in found.items() if len(by) > 1}


SHARED = sorted(_options())


@pytest.mark.parametrize("option", SHARED)
def test_a_flag_shared_by_commands_takes_the_same_values_in_each(option: str) -> None:
    actions = _options()[option]
    # A repeatable flag (append) takes the same values each time it is given as a single one.
    kinds = {
        (
            type(a).__name__.replace("_AppendAction", "_StoreAction"),
            getattr(a.type, "__name__", None),
            a.nargs,
        )
        for a in actions.values()
    }
    assert len(kinds) == 1, f"{option} differs across commands: {actions}"


def test_local_names_the_running_local_stack_in_every_command_that_takes_it() -> None:
    """`--local` is never a flag of another meaning: each command that takes it also takes the
    local stack's --state (`app create` writes credentials for `squadron local` with
    --local-credentials, and creating an App never touches the running stack)."""
    with_local = {
        command
        for command, parser in _subparsers().items()
        if "--local" in parser._option_string_actions and command != "app"  # refused: see below
    }
    assert with_local, "no command takes --local"
    for command in sorted(with_local):
        options = _subparsers()[command]._option_string_actions
        assert "--state" in options, f"squadron {command} takes --local without --state"
        assert type(options["--local"]).__name__ == "_StoreTrueAction", command


@pytest.mark.parametrize(
    "argv",
    [
        ["app", "create", "--webhook-url", "https://x.example/webhook", "--local", "--timeout", "0.0001"],
        [
            "app",
            "create",
            "--local",
            "--webhook-url",
            "https://x.example/webhook",
            "--no-browser",
            "--timeout",
            "0.0001",
        ],
        ["app", "manifest", "--webhook-url", "https://x.example/webhook", "--local"],
    ],
)
def test_app_refuses_local_naming_the_flag_meant(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`squadron app create --local` is a usage error naming --local-credentials: argparse took it as
    that flag's abbreviation, silently, though --local names the running local stack elsewhere."""
    with pytest.raises(SystemExit) as caught:
        run(*argv)
    assert caught.value.code == EXIT_USAGE
    said = capsys.readouterr().err
    assert "--local: creating an App never touches the running local stack" in said
    assert "pass --local-credentials" in said


SINCE_CASES = [
    ("45s", Since(ago=timedelta(seconds=45))),
    ("30m", Since(ago=timedelta(minutes=30))),
    ("2h", Since(ago=timedelta(hours=2))),
    ("1d", Since(ago=timedelta(days=1))),
    ("1w", Since(ago=timedelta(weeks=1))),
    (" 10m ", Since(ago=timedelta(minutes=10))),
    ("2026-11-27T15:00Z", Since(at=datetime(2026, 11, 27, 15, 0, tzinfo=UTC))),
    ("2026-11-27T15:00:00+01:00", Since(at=datetime(2026, 11, 27, 14, 0, tzinfo=UTC))),
    ("2026-11-27T15:00", Since(at=datetime(2026, 11, 27, 15, 0, tzinfo=UTC))),  # no zone: UTC
    ("2026-11-01", Since(at=datetime(2026, 11, 1, tzinfo=UTC))),
]
SINCE_COMMANDS = [
    ["events", "tail", "--local"],
    ["retro", "start", "--repo", "octo/app", "--local"],
]


@pytest.mark.parametrize("command", SINCE_COMMANDS, ids=[" ".join(c[:2]) for c in SINCE_COMMANDS])
@pytest.mark.parametrize(("text", "meant"), SINCE_CASES, ids=[t for t, _ in SINCE_CASES])
def test_since_means_the_same_in_every_command(command: list[str], text: str, meant: Since) -> None:
    args = build_parser().parse_args([*command, "--since", text])
    assert args.since == meant
    assert args.since.start(NOW) == (meant.at if meant.at is not None else NOW - (meant.ago or timedelta()))


BAD_SINCE = [
    ("10", "say 10m for minutes"),  # a bare number was minutes for one command, an error for another
    ("yesterday", "is not a duration back from now (45s, 30m, 2h, 1d, 1w) or an ISO 8601 time"),
    ("5y", "is not a duration back from now"),
    ("-3m", "is not a duration back from now"),
    ("3.5h", "is not a duration back from now"),
    ("2026-13-01", "is not a duration back from now"),
    ("99999w", "more than 3653 days back"),
    ("", "is not a duration back from now"),
]


@pytest.mark.parametrize("command", SINCE_COMMANDS, ids=[" ".join(c[:2]) for c in SINCE_COMMANDS])
@pytest.mark.parametrize(("text", "said"), BAD_SINCE, ids=[t or "empty" for t, _ in BAD_SINCE])
def test_a_since_that_means_nothing_is_a_usage_error_saying_the_forms(
    command: list[str], text: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        run(*command, f"--since={text}")
    assert caught.value.code == EXIT_USAGE
    error = capsys.readouterr().err
    assert "argument --since" in error and said in error, error


def test_a_retrospective_since_a_future_time_is_refused(tmp_path: Path) -> None:
    status, output = run(
        "retro", "start", "--repo", "octo/app", "--local", "--state", str(tmp_path), "--since", "2999-01-01"
    )
    assert (status, output) == (1, "--since 2999-01-01T00:00:00+00:00: in the future\n")


# --- exit statuses: a usage error is not an unreachable stack ----------------------------------

STATUSES = [
    # (what, argv, environment, status)
    ("an unknown flag", ["status", "--frobnicate"], {}, EXIT_USAGE),
    ("an unknown command", ["stauts"], {}, EXIT_USAGE),
    ("a missing argument", ["agent", "show"], {}, EXIT_USAGE),
    ("no local stack running", ["status", "--local", "--state", "{tmp}"], {}, EXIT_UNAVAILABLE),
    (
        "no local stack for the events",
        ["events", "tail", "--local", "--state", "{tmp}"],
        {},
        EXIT_UNAVAILABLE,
    ),
    (
        "branch protection without a token to reach GitHub",
        ["branch-protection", "plan", "--repo", "octo/app", "--app-id", "1"],
        {"GITHUB_TOKEN": ""},
        EXIT_UNAVAILABLE,
    ),
]


@pytest.mark.parametrize(
    ("argv", "environment", "status"), [s[1:] for s in STATUSES], ids=[s[0] for s in STATUSES]
)
def test_usage_errors_exit_2_and_an_unreachable_stack_3(
    argv: list[str],
    environment: dict[str, str],
    status: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    try:
        got, _ = run(*argv)
    except SystemExit as exc:
        got = int(exc.code or 0)
    assert got == status


# --- hints name the stack the command ran on ---------------------------------------------------

WHERE = [
    (["status", "--local"], " --local"),
    (["status", "--local", "--state", "/tmp/my state"], " --local --state '/tmp/my state'"),
    (["status", "--local", "--state", ".squadron-local"], " --local"),
    (["status"], ""),
    (
        ["status", "--stack", "Squadron-prod", "--region", "eu-west-1"],
        " --stack Squadron-prod --region eu-west-1",
    ),
    # The stage's default is the checkout's (cdk.context.json), so a stack given is always repeated.
    (["dlq", "list", "--stack", "Squadron-dev"], " --stack Squadron-dev"),
    (["dlq", "list"], ""),
    (
        ["status", "--stage", "prod", "--file", "../other/cdk.context.json"],
        " --stage prod --file ../other/cdk.context.json",
    ),
]


@pytest.mark.parametrize(("argv", "flags"), WHERE, ids=[" ".join(a) for a, _ in WHERE])
def test_a_hint_repeats_the_flags_that_name_the_stack(argv: list[str], flags: str) -> None:
    assert where_flags(build_parser().parse_args(argv)) == flags


def test_a_hint_of_a_local_command_keeps_local(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    status, output = run("memory", "show", "--repo", "octo/app", "--local", "--state", state)
    assert status == 1
    assert f"`squadron memory list --repo octo/app --local --state {state}`" in output
