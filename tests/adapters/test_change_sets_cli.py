"""`squadron change-sets list|show` against a local stack's moto server (the registry's table),
from a shell without AWS credentials: a three-repository set listed and shown, a set of another
repository left out by --repo, an unknown set said, and a show without a set refused."""

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.operations import Target
from squadron.cli import main
from squadron.cli_types import EXIT_PROBLEMS, EXIT_UNAVAILABLE
from squadron.domain import change_sets as cs
from squadron.domain.change_set_events import events_of
from squadron.domain.change_sets import ChangeSet

T0 = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
INSTALLED = {"octo/schema": 11, "octo/server": 12, "octo/client": 13, "octo/other": 14, "octo/web": 15}


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoRegistry]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        # moto's backends are the process's: start from an empty one.
        reset = urllib.request.Request(f"http://{host}:{port}/moto-api/reset", data=b"", method="POST")
        urllib.request.urlopen(reset).close()  # noqa: S310 (loopback)
        target = Target(
            table_name="registry",
            queue_url="",
            dead_letter_queue_url="",
            endpoint=f"http://{host}:{port}",
            region="us-east-1",
        )
        target.dynamodb().create_table(TableName="registry", **TABLE_DEFINITION)
        target.write(tmp_path)
        yield DynamoRegistry("registry", client=target.dynamodb())
    finally:
        server.stop()


def cli(tmp_path: Path, *command: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(["change-sets", *command, "--local", "--state", str(tmp_path)], out=out)
    return status, out.getvalue()


def stored(registry: DynamoRegistry, origin: str, others: tuple[str, ...], n: int) -> ChangeSet:
    created = cs.propose(
        set_id=cs.change_set_id(77, INSTALLED[origin], 5, f"d-{n}"),
        installation_id=77,
        origin=origin,
        issue=5,
        repositories=others,
        dependencies=[(b, a) for a, b in zip((origin, *others), others, strict=False)],
        installation_repositories=INSTALLED,
        proposed_by="11-pm",
        open_sets=0,
        at=T0 + timedelta(minutes=n),
    )
    registry.create_change_set(created, events_of(None, created, correlation_id=f"d-{n}"))
    approved, _ = cs.approve(created, "alice", {origin: "write"}, T0)
    registry.save_change_set(created, approved, ())
    return approved


def test_the_cli_lists_and_shows_change_sets(tmp_path: Path, registry: DynamoRegistry) -> None:
    three = stored(registry, "octo/schema", ("octo/server", "octo/client"), 1)
    other = stored(registry, "octo/other", ("octo/web",), 2)

    status, listed = cli(tmp_path, "list")
    assert status == 0, listed
    lines = listed.splitlines()
    assert lines[0].split() == ["SET", "STATE", "ORIGIN", "REPOSITORIES", "APPROVED", "CREATED"]
    assert [line.split()[0] for line in lines[1:]] == [other.id, three.id]  # newest first
    assert lines[2].split()[1:5] == ["proposed", "octo/schema#5", "3", "1/3"]

    status, listed = cli(tmp_path, "list", "--repo", "octo/client", "--json")
    assert status == 0, listed
    assert [c["id"] for c in json.loads(listed)["change_sets"]] == [three.id]

    status, shown = cli(tmp_path, "show", three.id)
    assert status == 0, shown
    assert f"change set {three.id}: proposed (version 2)" in shown
    assert "merge order: octo/schema -> octo/server -> octo/client" in shown
    assert "octo/schema: branch change-set/" in shown and "approved by alice" in shown
    assert "octo/server: " in shown and "waiting for a writer's approval" in shown
    assert "check squadron/change-set: pending" in shown

    status, shown = cli(tmp_path, "show", three.id, "--json")
    row = json.loads(shown)
    assert (row["state"], row["merge_order"], row["check"]["state"]) == (
        "proposed",
        ["octo/schema", "octo/server", "octo/client"],
        "pending",
    )

    status, said = cli(tmp_path, "show", "cs-000000000000")
    assert status == EXIT_UNAVAILABLE and "no change set cs-000000000000" in said
    assert "`squadron change-sets list --local --state" in said
    status, said = cli(tmp_path, "show")
    assert status == EXIT_PROBLEMS and "needs a set" in said


def test_no_change_sets_says_so(tmp_path: Path, registry: DynamoRegistry) -> None:
    assert cli(tmp_path, "list") == (0, "no change sets\n")
