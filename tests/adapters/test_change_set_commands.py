"""``/squadron change-set approve <id>`` from a comment to the stored set and the App's one answer,
through the router's real path: the dispatcher with its delivery records and the router on
DynamoDB (moto), GitHub the sandbox (three repositories of one installation, each person's
permission as GitHub gives it), played by the attacker. Asserted on what each got: the stored set,
the comments on GitHub, the calls of the set's ``on_approved``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import boto3
import httpx
import pytest
from moto import mock_aws

from squadron.adapters.delivery_records import DeliveryRecords
from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.for_router import AppGitHub
from squadron.domain.change_sets import ChangeSet, SetState
from squadron.domain.effects import DeliverInbox, LaunchAgent
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.local.sandbox import GitHubSandbox
from squadron.shell.change_set_commands import ChangeSetCommands
from squadron.shell.change_set_merging import ChangeSetMerger
from squadron.shell.change_set_work import ChangeSetWork
from squadron.shell.change_sets import ChangeSetDesk
from squadron.shell.dispatch import Dispatcher
from squadron.shell.router import RouterService
from squadron.shell.wiring import ChangeSetSteps, build_gateway, build_router
from tests.adapters.test_router_wiring import ENVIRONMENT
from tests.support.events import Events
from tests.support.fake_registry import FakeLauncher
from tests.support.sandbox_app import app_of

INSTALLATION = 77
ORIGIN, SERVER, CLIENT = "octo/schema", "octo/server", "octo/client"
#: Each person's permission in each repository, as GitHub gives it.
PEOPLE = {
    "ada": {ORIGIN: "admin", SERVER: "admin", CLIENT: "maintain"},  # a writer of all three
    "sam": {ORIGIN: "write", SERVER: "read", CLIENT: "read"},  # the origin's writer alone
    "cat": {ORIGIN: "read", SERVER: "read", CLIENT: "write"},  # the client's writer alone
    "rae": {ORIGIN: "read", SERVER: "read", CLIENT: "read"},  # a reader
    "mal": {},  # a stranger
}
T0 = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)


@dataclass
class World:
    sandbox: GitHubSandbox
    dispatcher: Dispatcher
    registry: DynamoRegistry
    desk: ChangeSetDesk
    change_set: ChangeSet
    approved: list[ChangeSet] = field(default_factory=list)

    def events(self, repo: str = ORIGIN) -> Events:
        return Events(repo_id=self.sandbox.repos[repo].id, full_name=repo, installation_id=INSTALLATION)

    def comment(
        self, login: str, body: str | None = None, *, repo: str = ORIGIN, issue: int = 1
    ) -> EventEnvelope:
        text = body if body is not None else f"/squadron change-set approve {self.change_set.id}"
        envelope = self.events(repo).comment(issue, text, by=login)
        return envelope.model_copy(
            update={"delivery_id": f"d-{login}-{repo.replace('/', '-')}-{issue}-{len(text)}"}
        )

    def stored(self) -> ChangeSet:
        found = self.registry.get_change_set(self.change_set.id)
        assert found is not None
        return found

    def answers(self, repo: str = ORIGIN, issue: int = 1) -> list[str]:
        """What the App wrote on the issue (nobody else writes there in these tests)."""
        return [
            str(c["body"])
            for c in self.sandbox.repos[repo].comments.get(issue, [])
            if c["user"]["login"] == self.sandbox.bot_login
        ]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    sandbox = GitHubSandbox(tmp_path, installation_id=INSTALLATION, webhook_secret="s")
    for repo in (ORIGIN, SERVER, CLIENT):
        permissions = {login: given[repo] for login, given in PEOPLE.items() if repo in given}
        sandbox.add_repository(repo, {"README.md": f"# {repo}\n"}, permissions=permissions)
    sandbox.start()
    for repo in (ORIGIN, SERVER):  # #1 and #2 of the origin, #1 of the server
        for _ in range(2 if repo == ORIGIN else 1):
            answer = httpx.post(
                f"{sandbox.base_url}/repos/{repo}/issues",
                json={"title": "one change"},
                headers={"authorization": "token human:ada"},
            )
            assert answer.status_code == 201, answer.text
    app = app_of(sandbox)
    github = AppGitHub(app, bot_login=sandbox.bot_login)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
        registry = DynamoRegistry("registry", client=dynamodb)
        desk = ChangeSetDesk(registry, github, clock=lambda: T0)
        change_set = desk.propose(
            installation_id=INSTALLATION,
            origin=ORIGIN,
            issue=1,
            repositories=(SERVER, CLIENT),
            dependencies=((SERVER, ORIGIN), (CLIENT, SERVER)),
            proposed_by="1-pm",
            proposal="proposal-1",
        )
        approved: list[ChangeSet] = []
        service = RouterService(
            registry=registry,
            launcher=FakeLauncher(),
            github=github,
            policies=lambda _event: RoutingPolicy(bot_login=sandbox.bot_login),
            clock=lambda: T0,
            change_sets=ChangeSetCommands(desk, on_approved=approved.append),
        )
        records = DeliveryRecords("registry", client=dynamodb)
        yield World(sandbox, Dispatcher(service, once=records.once), registry, desk, change_set, approved)
    sandbox.stop()


def _approvers(change_set: ChangeSet) -> dict[str, str | None]:
    return {m.repository: m.approved_by for m in change_set.members}


@pytest.mark.parametrize(
    ("who", "approvers", "state", "answer"),
    [
        ("ada", {ORIGIN: "ada", SERVER: "ada", CLIENT: "ada"}, "approved", "Merge order: `octo/schema` -> "),
        (
            "sam",
            {ORIGIN: "sam", SERVER: None, CLIENT: None},
            "proposed",
            "of each of `octo/server`, `octo/client`",
        ),
        ("cat", {ORIGIN: None, SERVER: None, CLIENT: "cat"}, "proposed", "@cat approved `octo/client`."),
        ("rae", {ORIGIN: None, SERVER: None, CLIENT: None}, "proposed", None),
        ("mal", {ORIGIN: None, SERVER: None, CLIENT: None}, "proposed", None),
    ],
    ids=["writer of all", "origin writer alone", "another repository's writer", "reader", "stranger"],
)
def test_a_command_approves_what_its_writer_can_write_and_is_answered_once(
    world: World, who: str, approvers: dict[str, str | None], state: str, answer: str | None
) -> None:
    summary = world.dispatcher.handle(world.comment(who).model_dump_json(), first_receive=True)
    again = world.dispatcher.handle(world.comment(who).model_dump_json(), first_receive=False)

    assert again["duplicate"] is True
    assert summary["effects"] == ["ApproveChangeSet"]  # no agent hears of it, whoever wrote it
    stored = world.stored()
    assert _approvers(stored) == approvers
    assert stored.state == state
    assert world.approved == ([stored] if state == "approved" else [])
    answers = world.answers()
    if answer is None:  # a non-writer's command is silent, as every stranger's input is
        assert answers == []
    else:
        [said] = answers
        assert answer in said and f"`{world.change_set.id}`" in said


def test_writers_of_each_repository_approve_in_turn_and_the_last_one_completes_the_set(world: World) -> None:
    for who in ("sam", "cat"):
        world.dispatcher.handle(world.comment(who).model_dump_json(), first_receive=True)
    assert world.stored().state is SetState.PROPOSED and world.approved == []
    world.dispatcher.handle(world.comment("ada").model_dump_json(), first_receive=True)

    stored = world.stored()
    assert _approvers(stored) == {ORIGIN: "sam", SERVER: "ada", CLIENT: "cat"}
    assert stored.state is SetState.APPROVED and world.approved == [stored]
    sam, cat, ada = world.answers()
    assert (
        "`octo/server`, `octo/client`" in sam
        and "`octo/server`" in cat
        and "`octo/client`" not in cat.split("Still")[1]
    )
    assert "@ada approved `octo/server`." in ada and "the set is `approved`" in ada


@pytest.mark.parametrize(
    ("who", "repo", "issue", "reason"),
    [
        ("ada", ORIGIN, 2, "is approved on octo/schema#1, where it was proposed"),
        ("ada", SERVER, 1, "is approved on octo/schema#1, where it was proposed"),
        ("sam", ORIGIN, 1, "no change set cs-000000000000 in this installation"),
    ],
    ids=["another issue", "another repository's issue", "no such set"],
)
def test_a_writers_command_that_changes_nothing_is_answered_with_the_reason(
    world: World, who: str, repo: str, issue: int, reason: str
) -> None:
    body = "/squadron change-set approve cs-000000000000" if "no change set" in reason else None
    world.dispatcher.handle(
        world.comment(who, body, repo=repo, issue=issue).model_dump_json(), first_receive=True
    )

    assert _approvers(world.stored()) == dict.fromkeys((ORIGIN, SERVER, CLIENT))
    assert world.approved == []
    [said] = world.answers(repo, issue)
    assert reason in said and f"@{who}'s approval changed nothing" in said
    assert world.answers() == [] or (repo, issue) == (ORIGIN, 1)


def test_an_approval_whose_answer_failed_is_answered_once_by_the_retry(world: World) -> None:
    """GitHub refuses the answer (nothing posted) after the approval was stored: the delivery goes
    back to the queue; its retry finds the approval stored and posts the answer, once."""
    comments = f"/repos/{ORIGIN}/issues/1/comments"
    world.sandbox.api_fault = lambda method, path: "refuse" if (method, path) == ("POST", comments) else None
    envelope = world.comment("ada")
    with pytest.raises(GitHubError):
        world.dispatcher.handle(envelope.model_dump_json(), first_receive=True)
    assert world.stored().state is SetState.APPROVED and world.answers() == []

    world.sandbox.api_fault = None
    summary = world.dispatcher.handle(envelope.model_dump_json(), first_receive=False)

    assert summary["resumed"] is True
    [said] = world.answers()
    assert "@ada approved `octo/schema`, `octo/server`, `octo/client`." in said
    assert [s.id for s in world.approved] == [world.change_set.id] * 2  # once per attempt: idempotent


def test_a_comment_without_the_command_is_routed_as_a_comment(world: World) -> None:
    """The control: the same writer's ordinary comment is no command (it reaches the router's
    usual path, which has no agent to tell here) and approves nothing."""
    summary = world.dispatcher.handle(
        world.comment("ada", f"please approve change-set {world.change_set.id}").model_dump_json(),
        first_receive=True,
    )

    assert "ApproveChangeSet" not in summary["effects"]
    assert not {DeliverInbox.__name__, LaunchAgent.__name__} & set(summary["effects"])
    assert world.stored().state is SetState.PROPOSED and world.answers() == []


def test_the_deployed_router_and_gateway_carry_change_sets() -> None:
    """What the Lambdas build from their environment (no AWS call): the router carries the
    command to a desk over its own registry and GitHub, its approved sets to their work, a ready
    set to its merging; the gateway stores the PM's proposals in the same registry."""
    service = build_router(ENVIRONMENT).dispatcher.service
    assert isinstance(service.change_sets, ChangeSetCommands)
    desk = service.change_sets.desk
    assert (id(desk.registry), id(desk.github)) == (id(service.registry), id(service.github))
    # an approved set's work starts, a ready one merges, and each delivery steps the sets
    work = service.change_sets.on_approved.__self__  # type: ignore[attr-defined]
    assert isinstance(work, ChangeSetWork) and service.change_sets.on_approved.__name__ == "begin"
    steps = build_router(ENVIRONMENT).dispatcher.change_sets
    assert isinstance(steps, ChangeSetSteps) and isinstance(steps.merger, ChangeSetMerger)
    assert isinstance(steps.work, ChangeSetWork)
    assert work.on_ready.__self__.__class__ is ChangeSetMerger  # type: ignore[attr-defined]
    gateway = build_gateway({**ENVIRONMENT, "REGISTRY_TABLE_NAME": "registry"})
    assert isinstance(gateway.change_sets, ChangeSetDesk)
    assert id(gateway.change_sets.registry) == id(gateway.registry)
