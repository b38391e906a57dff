"""Per-launch secrets (pure): who a task is, decided from the agent's record alone."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from squadron.domain.agents import AgentRecord, AgentStatus, ReplacedLaunch, RoleKind, candidate_uid
from squadron.domain.launches import (
    ARMING_HELD,
    REFUSAL_CODES,
    SECRET_BYTES,
    SECRET_TTL,
    LaunchRefusedError,
    arming_abandoned,
    check_lease,
    check_push,
    secret_digest,
    verify_launch,
    verify_release,
)
from squadron.domain.lifecycle.transitions import with_launch

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
SECRET = secrets.token_urlsafe(SECRET_BYTES)


def armed(**changes: Any) -> AgentRecord:
    base = AgentRecord(
        agent_id="1-38-feat-dev",
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/repo",
        issue_number=38,
        status=AgentStatus.ACTIVE,
        created_at=NOW,
        updated_at=NOW,
        launch_secret_hash=secret_digest(SECRET),
        launch_secret_expires_at=NOW + timedelta(hours=12),
    )
    base = base.model_copy(update={"counters": base.counters.model_copy(update={"launches": 2})})
    return base.model_copy(update=changes)


TOKEN = armed().launch_token

CASES: list[tuple[str, AgentRecord | None, str, str, bool, str | None]] = [
    ("the launch's own task", armed(), TOKEN, SECRET, False, None),
    ("a created agent's first task", armed(status=AgentStatus.CREATED), TOKEN, SECRET, False, None),
    ("no such agent", None, TOKEN, SECRET, False, "unknown_agent"),
    ("an earlier launch (public token)", armed(), TOKEN.replace("-l2", "-l1"), SECRET, False, "replaced"),
    ("a guessed secret", armed(), TOKEN, secrets.token_urlsafe(SECRET_BYTES), False, "wrong_secret"),
    ("the hash instead of the secret", armed(), TOKEN, secret_digest(SECRET), False, "wrong_secret"),
    ("an empty secret", armed(), TOKEN, "", False, "wrong_secret"),
    ("a launch that reported its end", armed(launch_secret_hash=None), TOKEN, SECRET, False, "ended"),
    ("an expired secret", armed(launch_secret_expires_at=NOW), TOKEN, SECRET, False, "expired"),
    ("no expiry recorded", armed(launch_secret_expires_at=None), TOKEN, SECRET, False, "expired"),
    ("an agent put to sleep", armed(status=AgentStatus.SLEEPING), TOKEN, SECRET, False, "not_working"),
    ("an escalated agent", armed(status=AgentStatus.ESCALATED), TOKEN, SECRET, False, "not_working"),
    ("a sleeping agent's task winding down", armed(status=AgentStatus.SLEEPING), TOKEN, SECRET, True, None),
    (
        "winding down with a wrong secret",
        armed(status=AgentStatus.SLEEPING),
        TOKEN,
        "x" * 43,
        True,
        "wrong_secret",
    ),
]


@pytest.mark.parametrize(
    ("agent", "token", "secret", "winding_down", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verify_launch(
    agent: AgentRecord | None, token: str, secret: str, winding_down: bool, code: str | None
) -> None:
    if code is None:
        assert (
            verify_launch(
                agent,
                agent_id="1-38-feat-dev",
                launch_token=token,
                secret=secret,
                now=NOW,
                winding_down=winding_down,
            )
            == agent
        )
        return
    with pytest.raises(LaunchRefusedError) as refused:
        verify_launch(
            agent,
            agent_id="1-38-feat-dev",
            launch_token=token,
            secret=secret,
            now=NOW,
            winding_down=winding_down,
        )
    assert refused.value.code == code and code in REFUSAL_CODES
    assert SECRET not in str(refused.value)  # a refusal never repeats the secret


@pytest.mark.parametrize(
    ("owner", "expires", "refused"),
    [
        (None, None, False),
        (TOKEN, NOW + timedelta(minutes=5), False),
        ("another-task", NOW - timedelta(seconds=1), False),
        ("another-task", NOW + timedelta(minutes=5), True),
    ],
    ids=["free", "its own", "another's, expired", "another's, live"],
)
def test_check_lease(owner: str | None, expires: datetime | None, refused: bool) -> None:
    agent = armed(lease_owner=owner, lease_expires_at=expires)
    if refused:
        with pytest.raises(LaunchRefusedError, match="held by another-task"):
            check_lease(agent, TOKEN, NOW)
    else:
        check_lease(agent, TOKEN, NOW)


def test_the_secret_digest_is_sha256_hex_and_uids_are_spread_and_stable() -> None:
    assert secret_digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    uids = {candidate_uid(f"1-{n}-feat-dev", 0) for n in range(1000)}
    assert len(uids) == 1000 and min(uids) >= 1 << 24 and max(uids) < (1 << 24) + (1 << 30)
    assert candidate_uid("1-38-feat-dev", 0) == candidate_uid("1-38-feat-dev", 0)
    assert candidate_uid("1-38-feat-dev", 0) != candidate_uid("1-38-feat-dev", 1)


# (the arming's age at NOW, None: not armed; whether another executor may arm it again)
ARMINGS = [
    (None, True),  # nobody armed it (or its task reported its end)
    (timedelta(0), False),  # armed just now: its executor may be calling RunTask
    (ARMING_HELD - timedelta(seconds=1), False),
    (ARMING_HELD, True),  # its executor is gone (a claim outlives the router Lambda)
    (timedelta(hours=1), True),
]


@pytest.mark.parametrize(("age", "abandoned"), ARMINGS)
def test_an_arming_belongs_to_its_executor_for_a_claims_time(age: timedelta | None, abandoned: bool) -> None:
    agent = (
        armed(launch_secret_hash=None, launch_secret_expires_at=None)
        if age is None
        else armed(launch_secret_expires_at=NOW - age + SECRET_TTL)
    )
    assert arming_abandoned(agent, NOW) is abandoned


def test_a_new_launch_starts_unarmed_and_a_pending_one_keeps_its_arming() -> None:
    """The hash of the launch a new one replaces is dropped (its task is refused as replaced
    anyway), so "armed" always means armed for the pending launch; a launch still pending keeps
    its token and its arming (the task it names may be starting)."""
    new = with_launch(armed(), "delivery-2")
    assert new.pending_launch == new.launch_token == "1-38-feat-dev-g1-l3"
    assert (new.launch_secret_hash, new.launch_secret_expires_at) == (None, None)
    pending = armed(pending_launch="1-38-feat-dev-g1-l2")
    kept = with_launch(pending, "delivery-3")
    assert kept.pending_launch == "1-38-feat-dev-g1-l2"
    assert kept.launch_secret_hash == pending.launch_secret_hash


def test_a_new_launch_keeps_the_armed_launch_it_replaces_for_its_release() -> None:
    """The replaced launch's token and hash move to ``replaced_launch`` (its task may still hold
    the lease); a launch that had reported its end leaves the one before it there."""
    new = with_launch(armed(), "delivery-2")
    assert new.replaced_launch == ReplacedLaunch(
        token=TOKEN, secret_hash=secret_digest(SECRET), expires_at=NOW + timedelta(hours=12)
    )
    newer = with_launch(new.model_copy(update={"pending_launch": None}), "delivery-3")
    assert newer.launch_token == "1-38-feat-dev-g1-l4" and newer.replaced_launch == new.replaced_launch


OLD_SECRET = secrets.token_urlsafe(SECRET_BYTES)
OLD = TOKEN.replace("-l2", "-l1")


def relaunched(**changes: Any) -> AgentRecord:
    """Launch 2 armed and running, launch 1 (OLD, OLD_SECRET) the one it replaced."""
    replaced = ReplacedLaunch(
        token=OLD, secret_hash=secret_digest(OLD_SECRET), expires_at=NOW + timedelta(hours=1)
    )
    return armed(replaced_launch=replaced.model_copy(update=changes))


RELEASES: list[tuple[str, AgentRecord | None, str, str, str | None]] = [
    ("the replaced launch's task", relaunched(), OLD, OLD_SECRET, None),
    ("the latest launch's task", relaunched(), TOKEN, SECRET, None),
    ("the latest launch's task, put to sleep", armed(status=AgentStatus.SLEEPING), TOKEN, SECRET, None),
    ("the replaced token with the latest secret", relaunched(), OLD, SECRET, "wrong_secret"),
    ("the latest token with the replaced secret", relaunched(), TOKEN, OLD_SECRET, "wrong_secret"),
    ("the replaced token with a guess", relaunched(), OLD, "x" * 43, "wrong_secret"),
    ("the replaced hash as the secret", relaunched(), OLD, secret_digest(OLD_SECRET), "wrong_secret"),
    ("the replaced launch's secret expired", relaunched(expires_at=NOW), OLD, OLD_SECRET, "expired"),
    ("a launch before the replaced one", relaunched(), TOKEN.replace("-l2", "-l0"), OLD_SECRET, "replaced"),
    ("an earlier launch, none kept", armed(), OLD, OLD_SECRET, "replaced"),
    ("no such agent", None, OLD, OLD_SECRET, "unknown_agent"),
]


@pytest.mark.parametrize(
    ("agent", "token", "secret", "code"), [c[1:] for c in RELEASES], ids=[c[0] for c in RELEASES]
)
def test_a_replaced_launch_may_release_and_nothing_else(
    agent: AgentRecord | None, token: str, secret: str, code: str | None
) -> None:
    def release() -> AgentRecord:
        return verify_release(agent, agent_id="1-38-feat-dev", launch_token=token, secret=secret, now=NOW)

    if code is None:
        assert release() == agent
    else:
        with pytest.raises(LaunchRefusedError) as refused:
            release()
        assert refused.value.code == code
    if token == OLD:  # every other call of the replaced launch is refused as replaced
        for winding_down in (False, True):
            with pytest.raises(LaunchRefusedError) as refused:
                verify_launch(
                    agent,
                    agent_id="1-38-feat-dev",
                    launch_token=token,
                    secret=secret,
                    now=NOW,
                    winding_down=winding_down,
                )
            assert refused.value.code == ("unknown_agent" if agent is None else "replaced")


def _winding_down(status: AgentStatus, **changes: Any) -> AgentRecord:
    """A dev agent whose task (launch ``TOKEN``) holds its live lease, in ``status``."""
    held: dict[str, Any] = {
        "branch": "feat/issue-38",
        "lease_owner": TOKEN,
        "lease_expires_at": NOW + timedelta(minutes=10),
    }
    return armed(status=status, **{**held, **changes})


#: (case, the agent as its task's push token is asked for, the refusal's code or None: vended)
PUSHES: list[tuple[str, AgentRecord, str | None]] = [
    ("a working agent's task", _winding_down(AgentStatus.ACTIVE), None),
    ("a working agent's task, lease released", _winding_down(AgentStatus.ACTIVE, lease_owner=None), None),
    ("put to sleep while its task saves", _winding_down(AgentStatus.SLEEPING), None),
    ("handed to humans while its task saves", _winding_down(AgentStatus.ESCALATED), None),
    (
        "asleep, its task released its lease",
        _winding_down(AgentStatus.SLEEPING, lease_owner=None),
        "not_working",
    ),
    (
        "asleep, its task's lease lapsed",
        _winding_down(AgentStatus.SLEEPING, lease_expires_at=NOW),
        "not_working",
    ),
    (
        "asleep, another task holds the lease",
        _winding_down(AgentStatus.SLEEPING, lease_owner="1-38-feat-dev-g1-l3"),
        "not_working",
    ),
    ("completed (its branch may be merged and gone)", _winding_down(AgentStatus.COMPLETED), "not_working"),
    ("cancelled", _winding_down(AgentStatus.CANCELLED), "not_working"),
    (
        "working, another task holds the lease",
        _winding_down(AgentStatus.ACTIVE, lease_owner="1-38-feat-dev-g1-l3"),
        "lease_held",
    ),
    ("asleep without a branch", _winding_down(AgentStatus.SLEEPING, branch=None), "forbidden"),
    (
        "an escalated reviewer",
        _winding_down(AgentStatus.ESCALATED, kind=RoleKind.REVIEW, role="pr-review"),
        "forbidden",
    ),
]


@pytest.mark.parametrize(("agent", "code"), [c[1:] for c in PUSHES], ids=[c[0] for c in PUSHES])
def test_a_push_token_while_winding_down_is_the_current_tasks_one_save(
    agent: AgentRecord, code: str | None
) -> None:
    if code is None:
        check_push(agent, TOKEN, NOW)
        return
    with pytest.raises(LaunchRefusedError) as refused:
        check_push(agent, TOKEN, NOW)
    assert refused.value.code == code
