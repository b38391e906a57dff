"""The outbox's timing against the queue's: a claim outlives the executor that holds it, and the
reconciler's sweep takes over a decision only once its delivery's own retries have stopped."""

from __future__ import annotations

from datetime import timedelta

import pytest

from infra.constructs.event_queue import EventQueue
from infra.constructs.router import EventRouter
from squadron.adapters.local_aws import ROUTER_RUN
from squadron.domain.launches import ARMING_HELD
from squadron.domain.outbox import EXECUTION_LEASE, REDRIVE_AFTER
from squadron.domain.reconcile import TICK, UNFINISHED_AFTER
from tests.infra.synth import Synthesized

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


def test_a_retry_of_events_fifo_comes_after_what_its_first_run_held(synthesized: Synthesized) -> None:
    """What a router run holds (a launch's arming, a decision's claim: ARMING_HELD) is taken up to
    the router's timeout after the receive; the delivery's retry comes a visibility timeout after
    it, so it finds that hold lapsed and carries the launch and the outbox on itself (read from
    the synthesized template). The local stack's queue is derived from the same timeout."""
    router = synthesized.resources("AWS::Lambda::Function")[
        synthesized.logical_id(synthesized.stack.router.function)
    ]
    queue = synthesized.resources("AWS::SQS::Queue")[synthesized.logical_id(synthesized.stack.events.queue)]
    visibility = timedelta(seconds=queue["Properties"]["VisibilityTimeout"])
    timeout = timedelta(seconds=router["Properties"]["Timeout"])
    assert visibility >= ARMING_HELD + timeout and visibility >= EXECUTION_LEASE + timeout
    assert _seconds(EventQueue.ROUTER_TIMEOUT) == timeout == ROUTER_RUN  # the local stack's run
