"""The :class:`~squadron.registry_ports.Outbox` contract: one executor holds a committed decision at a
time, each effect it settles or refuses stays settled, and a refusal is shown to operators."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import pytest

from squadron.domain.effects import Decision, PostComment
from squadron.domain.outbox import EXECUTION_LEASE, FailedEffect
from squadron.registry_ports import Decisions, Outbox
from tests.unit.registry.support import REPO, T0


class Subject(Outbox, Decisions, Protocol):
    """The outbox of the decisions the commit point stored."""


def committed(registry: Subject, key: str = "d-1", *, done: bool = False) -> Decision:
    effects = tuple(PostComment("octo/app", 77, 38, f"comment {n}", "framework") for n in range(3))
    decision = Decision(
        key, T0, effects, done=done, installation_id=77, repo_full_name="octo/app", repo_id=REPO
    )
    registry.commit([], decision)
    return decision


def refused(index: int, *, key: str = "d-1", seconds: int = 0, repo: int = REPO) -> FailedEffect:
    return FailedEffect(
        decision=key,
        index=index,
        effect="post_comment",
        repo_id=repo,
        repo_full_name="octo/app",
        number=38,
        reason="422: locked",
        at=T0 + timedelta(seconds=seconds),
    )


def test_one_executor_holds_a_decision_until_its_claim_expires_or_is_given_up(registry: Subject) -> None:
    committed(registry)
    first = registry.claim_decision("d-1", "runner-a", T0)
    assert first is not None and (first.owner, first.attempts, first.settled) == ("runner-a", 1, frozenset())
    assert registry.claim_decision("d-1", "runner-b", T0 + timedelta(seconds=30)) is None  # held
    again = registry.claim_decision("d-1", "runner-a", T0 + timedelta(seconds=30))  # its holder: renewed
    assert again is not None and again.attempts == 2
    registry.release_decision("d-1", "runner-b", "not mine")  # not the holder: nothing
    registry.release_decision("d-1", "runner-a", "GitHub unavailable")
    taken = registry.claim_decision("d-1", "runner-b", T0 + timedelta(seconds=31))
    assert taken is not None and (taken.owner, taken.attempts, taken.last_error) == (
        "runner-b",
        3,
        "GitHub unavailable",
    )
    late = T0 + timedelta(seconds=31) + EXECUTION_LEASE + timedelta(seconds=1)
    expired = registry.claim_decision("d-1", "runner-c", late)  # runner-b went silent
    assert expired is not None and expired.owner == "runner-c"


@pytest.mark.parametrize("key", ["unknown", "done"])
def test_nothing_to_claim_in_an_unknown_or_finished_decision(registry: Subject, key: str) -> None:
    committed(registry, "done", done=True)
    assert registry.claim_decision(key, "runner-a", T0) is None


def test_what_an_executor_settled_is_what_the_next_one_skips(registry: Subject) -> None:
    committed(registry)
    assert registry.claim_decision("d-1", "runner-a", T0) is not None
    assert registry.settle_effect("d-1", "runner-a", 0)
    assert registry.fail_effect("d-1", "runner-a", refused(1))
    assert not registry.settle_effect("d-1", "runner-b", 2)  # not the holder: refused, not settled
    assert not registry.fail_effect("d-1", "runner-b", refused(2))
    registry.release_decision("d-1", "runner-a", "stopped")
    next_claim = registry.claim_decision("d-1", "runner-b", T0 + timedelta(seconds=1))
    assert next_claim is not None and next_claim.settled == frozenset({0, 1})
    assert registry.failed_effects(REPO) == [refused(1)]


def test_refused_effects_are_listed_per_repository_newest_first(registry: Subject) -> None:
    for key in ("d-1", "d-2"):
        committed(registry, key)
        assert registry.claim_decision(key, "runner-a", T0) is not None
    assert registry.fail_effect("d-1", "runner-a", refused(0, seconds=1))
    assert registry.fail_effect("d-1", "runner-a", refused(2, seconds=3))
    assert registry.fail_effect("d-2", "runner-a", refused(1, key="d-2", seconds=2, repo=REPO + 1))
    assert registry.failed_effects(REPO) == [refused(2, seconds=3), refused(0, seconds=1)]
    assert registry.failed_effects(REPO, limit=1) == [refused(2, seconds=3)]
    assert registry.failed_effects(REPO + 1) == [refused(1, key="d-2", seconds=2, repo=REPO + 1)]
    assert registry.failed_effects(REPO + 2) == []
