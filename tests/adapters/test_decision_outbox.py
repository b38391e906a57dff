"""One executor per decision, each effect once, refusals recorded: the router on DynamoDB (moto).

A committed decision's outbox can be carried out by its delivery's retry (or a dead-letter
redrive) and by the reconciler's FinishDecision at the same moment: they run in different
message groups. These tests play both executors against one table, one inside the other's
GitHub call (the worst interleaving, with no timing), and assert on what GitHub got.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.github.errors import GitHubUnavailableError, NotFoundError, ValidationFailedError
from squadron.domain.dashboard import render
from squadron.domain.effects import AddLabels, CloseIssue, Decision, Outside, PostComment, effect_key
from squadron.domain.events import EventEnvelope
from squadron.domain.metrics import routing_points
from squadron.domain.outbox import EXECUTION_LEASE, MAX_EXECUTIONS, REDRIVE_AFTER
from squadron.domain.reconcile import UNFINISHED_AFTER, finish_commands
from squadron.domain.routing import RoutingPolicy
from squadron.operator_view import failed_effects_table
from squadron.shell.dispatch import Dispatcher
from squadron.shell.router import RouterService
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRegistry, FakeRouterGitHub

if TYPE_CHECKING:
    from squadron.ports import Registry

REPO = "octo/repo"


class GitHub(FakeRouterGitHub):
    """The sandbox's answers, with a hook run inside a call (another executor, a refusal)."""

    def __init__(self) -> None:
        super().__init__()
        #: number -> what happens when a comment is posted on it (before it lands)
        self.on_comment: dict[int, Callable[[], None]] = {}
        #: number -> the error labelling it raises
        self.refuse_labels: dict[int, Exception] = {}
        self.calls: list[str] = []

    def comment(
        self,
        installation_id: int | None,
        repo_full_name: str,
        number: int,
        body: str,
        author: str,
        *,
        key: str | None = None,
    ) -> None:
        self.calls.append(f"comment #{number}")
        hook = self.on_comment.pop(number, None)
        if hook is not None:
            hook()
        super().comment(installation_id, repo_full_name, number, body, author, key=key)

    def add_labels(
        self, installation_id: int | None, repo: str, number: int, labels: tuple[str, ...]
    ) -> None:
        self.calls.append(f"label #{number}")
        if number in self.refuse_labels:
            raise self.refuse_labels[number]
        super().add_labels(installation_id, repo, number, labels)

    def close_issue(self, installation_id: int | None, repo: str, number: int, reason: str) -> None:
        self.calls.append(f"close #{number}")
        super().close_issue(installation_id, repo, number, reason)


@dataclass
class World:
    registry: Registry
    github: GitHub = field(default_factory=GitHub)
    events: Events = field(default_factory=Events)
    now: datetime = T0

    def router(self) -> RouterService:
        """One executor (a Lambda invocation): its own router over the shared table and GitHub."""
        return RouterService(
            registry=self.registry,
            launcher=FakeLauncher(),
            github=self.github,
            policies=lambda _event: RoutingPolicy(),
            clock=lambda: self.now,
        )

    def committed(self, *outside: Outside, at: datetime | None = None) -> EventEnvelope:
        """A delivery whose decision (``outside``) is committed and not carried out yet."""
        envelope = self.events.comment(38)
        decision = Decision(
            envelope.delivery_id,
            at or self.now,
            outside,
            installation_id=77,
            repo_full_name=REPO,
            repo_id=1,
        )
        self.registry.commit([], decision)
        return envelope

    def sweep(self, limit: int = 100) -> list[EventEnvelope]:
        """The reconciler's FinishDecision commands for the decisions left now."""
        left = self.registry.unfinished_decisions(self.now - UNFINISHED_AFTER, limit)
        return finish_commands(left, self.now)


def comment(number: int, body: str = "hello") -> PostComment:
    return PostComment(REPO, 77, number, body, "squadron")


@pytest.fixture(params=["moto", "fake"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    if request.param == "fake":
        yield World(FakeRegistry())
        return
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        yield World(DynamoRegistry("registry", client=client))


def test_the_sweep_and_the_delivery_retry_at_once_carry_out_each_effect_once(world: World) -> None:
    delivery = world.committed(comment(38), AddLabels(REPO, 77, 38, ("squadron",)), comment(39))
    world.now += UNFINISHED_AFTER + timedelta(minutes=1)  # the sweep sees it: its delivery is retried now
    [finish] = world.sweep()
    swept: list[object] = []
    # The sweep's executor starts while the delivery's retry is inside its first GitHub call.
    world.github.on_comment[38] = lambda: swept.append(world.router().process(finish))
    world.router().process(delivery, first_receive=False)

    assert [c[1] for c in world.github.comments] == [38, 39]  # each once
    assert world.github.labelled == [(REPO, 38, ("squadron",))]
    assert world.registry.decision(delivery.delivery_id).done  # type: ignore[union-attr]
    assert swept and getattr(swept[0], "busy", None) is True  # the second executor did nothing


def test_a_resume_after_a_crash_between_effects_carries_out_only_the_rest(world: World) -> None:
    delivery = world.committed(comment(38), AddLabels(REPO, 77, 38, ("squadron",)), comment(39))
    world.github.refuse_labels[38] = GitHubUnavailableError(502, "Bad Gateway")
    with pytest.raises(GitHubUnavailableError):
        world.router().process(delivery, first_receive=False)
    assert world.github.calls == ["comment #38", "label #38"]
    del world.github.refuse_labels[38]
    world.github.calls.clear()
    world.github.lookups.clear()

    world.now += UNFINISHED_AFTER + timedelta(minutes=1)
    [finish] = world.sweep()  # the delivery went to the dead-letter queue: the sweep finishes it
    world.router().process(finish)

    assert world.github.calls == ["label #38", "comment #39"]  # not the comment done before
    # Only the creation not recorded done is looked up (it may have happened unrecorded).
    assert world.github.lookups == [effect_key(delivery.delivery_id, 2)]
    assert [c[1] for c in world.github.comments] == [38, 39]
    assert world.registry.decision(delivery.delivery_id).done  # type: ignore[union-attr]


def test_an_executor_whose_claim_expired_is_followed_and_a_live_claim_is_not(world: World) -> None:
    delivery = world.committed(comment(38))
    assert world.registry.claim_decision(delivery.delivery_id, "crashed", world.now) is not None
    # While the crashed executor's claim lasts, nobody else carries the decision out.
    result = world.router().process(delivery, first_receive=False)
    assert result.busy
    assert world.github.comments == []
    world.now += EXECUTION_LEASE  # its Lambda is gone by now (the claim outlasts its timeout)
    world.router().process(delivery, first_receive=False)
    assert [c[1] for c in world.github.comments] == [38]
    assert world.registry.decision(delivery.delivery_id).done  # type: ignore[union-attr]


REFUSALS = [
    ("issue gone", NotFoundError(404, "Not Found", method="POST", path="/repos/octo/repo/issues/38/labels")),
    ("issue deleted", NotFoundError(410, "Gone")),
    ("label refused", ValidationFailedError(422, "Validation Failed", errors=[{"message": "name too long"}])),
]


@pytest.mark.parametrize("error", [r[1] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_an_effect_github_refuses_for_good_is_recorded_and_the_rest_goes_on(
    world: World, error: Exception
) -> None:
    delivery = world.committed(
        AddLabels(REPO, 77, 38, ("squadron",)), comment(38), CloseIssue(REPO, 77, 40, "done")
    )
    world.github.refuse_labels[38] = error

    result = world.router().process(delivery, first_receive=False)  # no exception: nothing goes back

    assert result.failed == ("add_labels",)
    assert [c[1] for c in world.github.comments] == [38]
    assert world.github.closed == [(REPO, 40, "done")]
    assert world.registry.decision(delivery.delivery_id).done  # type: ignore[union-attr]
    [failed] = world.registry.failed_effects(1)
    assert (failed.effect, failed.number, failed.decision) == ("add_labels", 38, delivery.delivery_id)
    assert str(getattr(error, "status", "")) in failed.reason
    # An operator sees it: the metric (one point), `squadron status`, the dashboard issue.
    summary = {"event": "issue_comment.created", "effects": [], "failed": list(result.failed)}
    assert [p.name for p in routing_points(summary)].count("EffectsFailed") == 1
    status = failed_effects_table(world.registry.failed_effects(1), world.now)
    assert "octo/repo#38" in status and "add_labels" in status and failed.reason in status
    body = render(REPO, [], failed=world.registry.failed_effects(1), now=world.now)
    assert "## Not carried out" in body and "`add_labels`" in body and "issues/38" in body
    # A redelivery finds the decision done: the refused effect is not tried again.
    world.github.calls.clear()
    world.router().process(delivery, first_receive=False)
    assert world.github.calls == []


def test_a_decision_that_keeps_failing_is_given_up_and_recorded(world: World) -> None:
    delivery = world.committed(comment(38), AddLabels(REPO, 77, 38, ("squadron",)))
    world.github.refuse_labels[38] = GitHubUnavailableError(503, "Service Unavailable")
    for _ in range(MAX_EXECUTIONS):
        with pytest.raises(GitHubUnavailableError):
            world.router().process(delivery, first_receive=False)
    world.now += UNFINISHED_AFTER + timedelta(minutes=1)
    [finish] = world.sweep()
    result = world.router().process(finish)

    assert result.failed == ("add_labels",)
    assert world.registry.decision(delivery.delivery_id).done  # type: ignore[union-attr]
    [failed] = world.registry.failed_effects(1)
    assert failed.reason.startswith(f"not carried out after {MAX_EXECUTIONS} attempts")
    assert "503" in failed.reason
    assert [c[1] for c in world.github.comments] == [38]  # once, in the first attempt
    assert world.sweep() == []


def test_a_stuck_decision_does_not_starve_a_newer_one(world: World) -> None:
    stuck = world.committed(AddLabels(REPO, 77, 38, ("squadron",)), at=world.now)
    newer = world.committed(comment(39), at=world.now + timedelta(minutes=1))
    world.github.refuse_labels[38] = GitHubUnavailableError(502, "Bad Gateway")
    world.now += UNFINISHED_AFTER + timedelta(minutes=2)

    # The sweep takes one decision a run: the oldest untouched. The stuck one fails...
    [first] = world.sweep(limit=1)
    assert first.command is not None and getattr(first.command, "decision", None) == stuck.delivery_id
    with pytest.raises(GitHubUnavailableError):
        world.router().process(first)
    # ...and the next run takes the newer one, which its failure no longer hides.
    world.now += timedelta(minutes=5)
    [second] = world.sweep(limit=1)
    assert getattr(second.command, "decision", None) == newer.delivery_id
    world.router().process(second)
    assert [c[1] for c in world.github.comments] == [39]


# (how long after the event its record comes with ApproximateReceiveCount 1; is it carried out)
FIRST_RECEIVES = [
    ("a dead-letter redrive, hours later", timedelta(hours=3), True),
    ("a redrive right after the first receive's visibility timeout", REDRIVE_AFTER, True),
    # A true first receive skips the read: no earlier attempt can have committed (and should
    # one have, its commit condition says so; here re-routing decides nothing, so it is left).
    ("a first receive a minute after the event", timedelta(minutes=1), False),
]


@pytest.mark.parametrize(
    ("later", "carried_out"), [f[1:] for f in FIRST_RECEIVES], ids=[f[0] for f in FIRST_RECEIVES]
)
def test_a_redriven_record_counts_as_a_redelivery(world: World, later: timedelta, carried_out: bool) -> None:
    """SQS counts a redriven message's receives from 1 again: the router must still find the
    decision an earlier attempt committed (re-routing the event decides nothing new here)."""
    delivery = world.committed(comment(38))
    world.now = delivery.received_at + later
    Dispatcher(world.router()).handle(delivery.to_message(), "m-1", first_receive=True)
    assert ([c[1] for c in world.github.comments] == [38]) is carried_out
    assert world.registry.decision(delivery.delivery_id).done is carried_out  # type: ignore[union-attr]
