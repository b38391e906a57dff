"""The typed wire between an agent task and the agent gateway (squadron.domain.gateway_wire): what
each side puts on it, and what the task's door does with a request or an answer that is not one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import pytest

from squadron.adapters.gateway_client import GatewayUnavailableError
from squadron.agent.door import Door
from squadron.agent.writes import GatewayWrites
from squadron.domain.agents import AgentRecord, AgentStatus, ReplacedLaunch, RoleKind
from squadron.domain.gateway_wire import (
    ANSWERS,
    ModelKeyAnswer,
    Refusal,
    Remember,
    Request,
    TokenAnswer,
    WhoAmIAnswer,
    WriteAnswer,
)
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.permissions import Caller
from squadron.shell.gateway import HANDLERS

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
SECRET = "s" * 43


def _record() -> AgentRecord:
    return AgentRecord(
        agent_id="1-38-feat-dev",
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/repo",
        issue_number=38,
        status=AgentStatus.ACTIVE,
        created_at=NOW,
        updated_at=NOW,
        launch_secret_hash="ab" * 32,
        launch_secret_expires_at=NOW + timedelta(hours=12),
    )


def test_every_request_has_one_answer_and_one_handler() -> None:
    ops = {model.model_fields["op"].default for model in get_args(Request)}
    assert set(ANSWERS) == ops == set(HANDLERS)


def test_a_request_carries_its_secret_on_the_wire_only() -> None:
    request = Remember(agent_id="1-38-feat-dev", launch_token="t", secret=SECRET, fact="f", evidence="#38")
    assert request.wire()["secret"] == SECRET and request.wire()["op"] == "remember"
    assert SECRET not in repr(request) and SECRET not in json.dumps(request.model_dump(mode="json"))


def test_the_task_never_gets_its_launch_secrets_hash() -> None:
    """The attacker: a hijacked task reads its own record, hoping for what verifies its launch
    (or the launch it replaced)."""
    replaced = ReplacedLaunch(token="1-38-feat-dev-g1-l0", secret_hash="cd" * 32, expires_at=NOW)
    record = _record().model_copy(update={"replaced_launch": replaced})
    got = json.dumps(WhoAmIAnswer(agent=record, bot_login="squadron[bot]").wire())
    assert "launch_secret_hash" not in got and "ab" * 32 not in got and "cd" * 32 not in got
    shown = AgentRecord.model_validate(json.loads(got)["agent"])
    assert (shown.launch_secret_hash, shown.replaced_launch) == (None, None)


ANSWERED: list[tuple[str, Any, dict[str, Any]]] = [
    # (case, the answer, its JSON): a field with a default is there only when it says something
    ("a write done", WriteAnswer(result={"id": 1}), {"result": {"id": 1}}),
    ("a write repeated", WriteAnswer(result=[], repeated=True), {"result": [], "repeated": True}),
    ("no model key", ModelKeyAnswer(kind="none"), {"kind": "none"}),
    ("a copilot key", ModelKeyAnswer(kind="copilot", key="k"), {"kind": "copilot", "key": "k"}),
    (
        "a token",
        TokenAnswer(token="ghs", expires_at=NOW, repository="octo/repo", permissions={"issues": "read"}),
        {
            "token": "ghs",
            "expires_at": "2026-11-24T12:00:00+00:00",
            "repository": "octo/repo",
            "permissions": {"issues": "read"},
        },
    ),
    ("a refusal", Refusal(error="no", code="forbidden"), {"error": "no", "code": "forbidden"}),
]


@pytest.mark.parametrize(("answer", "wire"), [c[1:] for c in ANSWERED], ids=[c[0] for c in ANSWERED])
def test_an_answer_on_the_wire(answer: Any, wire: dict[str, Any]) -> None:
    assert answer.wire() == wire
    assert type(answer).model_validate(wire) == answer


class Recorded:
    """A transport that records what the task sent and answers what it is told."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> Mapping[str, Any]:
        self.sent.append(json.loads(json.dumps(request)))
        return self.answer


def _door(answer: Mapping[str, Any]) -> tuple[Door, Recorded]:
    transport = Recorded(answer)
    return Door(transport, agent_id="1-38-feat-dev", launch_token="t", secret=SECRET), transport


REFUSED_HERE: list[tuple[str, Any]] = [
    # (case, what the task's tools ask): the gateway would refuse it as invalid, so nothing is sent
    ("a fact too long", lambda d: d.remember("x" * 2_001, "#38")),
    ("an audience nobody has", lambda d: d.remember("x", "#38", audience="everyone")),
    ("an empty comment", lambda d: GatewayWrites(d, Caller.framework()).comment(38, "")),
    (
        "a status on no commit",
        lambda d: GatewayWrites(d, Caller.framework()).create_status(
            "main", state="success", context="ci", description=""
        ),
    ),
    ("a write of no known kind", lambda d: d.github({"action": "merge", "number": 38})),
]


@pytest.mark.parametrize("ask", [c[1] for c in REFUSED_HERE], ids=[c[0] for c in REFUSED_HERE])
def test_a_request_the_gateway_would_refuse_is_refused_by_the_door_and_never_sent(ask: Any) -> None:
    door, transport = _door({"remembered": "ok"})
    with pytest.raises(LaunchRefusedError) as refused:
        ask(door)
    assert refused.value.code == "invalid_request" and str(refused.value).startswith("invalid request: ")
    assert transport.sent == []


def test_a_refusal_is_raised_with_its_code_and_an_unknown_code_reads_invalid_request() -> None:
    door, _ = _door({"error": "not yours", "code": "forbidden"})
    with pytest.raises(LaunchRefusedError, match="not yours") as refused:
        door.heartbeat()
    assert refused.value.code == "forbidden"
    door, _ = _door({"error": "odd", "code": "no_such_code"})
    with pytest.raises(LaunchRefusedError) as refused:
        door.heartbeat()
    assert refused.value.code == "invalid_request"


MALFORMED: list[tuple[str, Any, dict[str, Any]]] = [
    # (case, the call, what the gateway answered)
    ("a key of no known kind", lambda d: d.model_key(), {"kind": "stolen", "key": "k"}),
    ("a begin without a uid", lambda d: d.begin(), {"agent": {}}),
    ("facts that are not a list", lambda d: d.recall("q"), {"facts": "all of them"}),
]


@pytest.mark.parametrize(("ask", "answer"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_an_answer_that_is_not_the_operations_is_the_gateway_failing(
    ask: Any, answer: dict[str, Any]
) -> None:
    door, transport = _door(answer)
    with pytest.raises(GatewayUnavailableError, match="answered"):
        ask(door)
    assert len(transport.sent) == 1


def test_what_the_door_sends_is_the_wires_request() -> None:
    door, transport = _door({"result": {"id": 7}})
    assert GatewayWrites(door, Caller.framework()).comment(38, "progress") == {"id": 7}
    (sent,) = transport.sent
    assert sent == {
        "op": "github",
        "agent_id": "1-38-feat-dev",
        "launch_token": "t",
        "secret": SECRET,
        "write": {"action": "comment", "number": 38, "body": "progress"},
        "key": "t.w1",
    }
