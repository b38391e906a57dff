"""The outbox's timing against the queue's: a claim outlives the executor that holds it, and the
reconciler's sweep takes over a decision only once its delivery's own retries have stopped."""

from __future__ import annotations

from datetime import timedelta

import pytest

from infra.constructs.event_queue import EventQueue
from infra.constructs.router import EventRouter
from squadron.domain.outbox import EXECUTION_LEASE, REDRIVE_AFTER
from squadron.domain.reconcile import TICK, UNFINISHED_AFTER

pytestmark = pytest.mark.infra


def _seconds(duration: object) -> timedelta:
    return timedelta(seconds=float(duration.to_seconds()))  # type: ignore[attr-defined]


def test_a_claim_outlives_every_router_invocation() -> None:
    """An expired claim's executor was ended by the Lambda timeout: it cannot run next to the next."""
    assert _seconds(EventRouter.TIMEOUT) < EXECUTION_LEASE


def test_the_sweep_waits_for_the_deliverys_next_receive_and_its_run() -> None:
    """Every attempt touches the decision; its next receive comes a visibility timeout after."""
    assert _seconds(EventQueue.VISIBILITY_TIMEOUT) + EXECUTION_LEASE < UNFINISHED_AFTER


def test_the_sweep_comes_back_within_a_window_of_its_commands() -> None:
    """One FinishDecision per decision and window (its id): a run lands in every window."""
    assert TICK < UNFINISHED_AFTER


def test_a_record_older_than_a_visibility_timeout_may_be_a_redrive() -> None:
    """A message reaches the dead-letter queue a visibility timeout after its first receive at the
    soonest: an event that old, handed over with receive count 1, is looked up as a redelivery."""
    assert _seconds(EventQueue.VISIBILITY_TIMEOUT) >= REDRIVE_AFTER
