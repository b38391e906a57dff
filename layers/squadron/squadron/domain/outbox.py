"""Carrying out a committed decision's outbox: one executor at a time, each effect once — pure.

A committed decision (:class:`~squadron.domain.effects.Decision`) can be carried out by its
delivery's attempt, by a retry of that delivery (the queue's, or a dead-letter redrive), and
by the reconciler's :class:`~squadron.domain.commands.FinishDecision`. They run in different
message groups, so the queue does not keep them apart: an executor first *claims* the
decision, a conditional write that succeeds only while nobody else holds an unexpired claim
(:data:`EXECUTION_LEASE`). Each effect is recorded as settled once it is done (or refused for
good, :func:`permanent`), so a later executor skips it. A decision claimed more than
:data:`MAX_EXECUTIONS` times is given up: what is left is recorded as failed, with the last
error, and an operator sees it (``EffectsFailed``, ``squadron status``, the dashboard issue).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from squadron.domain.effects import Outside

#: How long a claim holds. Longer than the router Lambda's timeout (90 s: three records of
#: ``LAMBDA_RATE_LIMIT_WAIT_SECONDS`` + work each, ``infra/constructs/event_queue.py``), which
#: ends every invocation: a claim outlives the executor that holds it, so an expired claim's
#: executor is gone and cannot carry out an effect next to its successor (tests/infra checks it).
EXECUTION_LEASE = timedelta(minutes=2)

#: Claims of one decision before it is given up (its delivery's five receives, then about as
#: many of the reconciler's sweeps, each :data:`~squadron.domain.reconcile.UNFINISHED_AFTER` apart).
MAX_EXECUTIONS = 10

#: GitHub's answers that a retry cannot change: the issue or repository is gone or hidden (404),
#: deleted (410), or the request is refused as it is (422: a locked issue, a label too long).
PERMANENT_STATUSES = frozenset({404, 410, 422})

#: A message reaches the dead-letter queue no sooner than one visibility timeout (9 min) after
#: its first receive; so a record handed over "for the first time" (ApproximateReceiveCount 1)
#: whose event is older than this may be a redrive from the dead-letter queue, which SQS counts
#: as a new message: it is a redelivery, and its decision is looked up (tests/infra checks it).
REDRIVE_AFTER = timedelta(minutes=9)

#: How much of a failure's text is kept (the record, the status table, the dashboard).
MAX_REASON = 300


def permanent(status: object) -> bool:
    """Whether an error with HTTP ``status`` would be answered the same on every retry."""
    return isinstance(status, int) and status in PERMANENT_STATUSES


def maybe_redriven(received_at: datetime, now: datetime) -> bool:
    """Whether a record of an event received at ``received_at`` may be a dead-letter redrive
    (a new message to SQS, its receive count 1 again): then it counts as a redelivery."""
    return now - received_at >= REDRIVE_AFTER


@dataclass(frozen=True)
class Claim:
    """One executor's hold on a decision, and what earlier executors settled."""

    owner: str
    #: Claims of the decision so far, this one included.
    attempts: int
    #: Indexes of the effects carried out or refused for good (never carried out again).
    settled: frozenset[int] = frozenset()
    #: What made the previous executor stop, if it said.
    last_error: str = ""

    @property
    def exhausted(self) -> bool:
        return self.attempts > MAX_EXECUTIONS


@dataclass(frozen=True)
class FailedEffect:
    """An effect of a committed decision that was not carried out and never will be."""

    decision: str
    index: int
    #: The effect's kind (``post_comment``, ``add_labels``, ...).
    effect: str
    repo_id: int
    repo_full_name: str
    #: The issue or pull request it was for, if any.
    number: int | None
    reason: str
    at: datetime


def subject(effect: Outside) -> int | None:
    """The issue or pull request ``effect`` acts on, if it names one."""
    for name in ("number", "pr_number", "issue_number"):
        value = getattr(effect, name, None)
        if isinstance(value, int):
            return value
    return None


def failed_effect(
    decision: str, index: int, effect: Outside, *, repo_id: int, repo: str, reason: str, at: datetime
) -> FailedEffect:
    return FailedEffect(
        decision=decision,
        index=index,
        effect=effect.kind,
        repo_id=repo_id,
        repo_full_name=repo,
        number=subject(effect),
        reason=" ".join(reason.split())[:MAX_REASON] or "no reason given",
        at=at,
    )


def given_up(claim: Claim) -> str:
    """The reason recorded for each effect left when ``claim`` found the decision exhausted."""
    last = f": {claim.last_error}" if claim.last_error else ""
    return f"not carried out after {claim.attempts - 1} attempts{last}"
