"""A change set's merges, all or nothing (squadron.shell.change_set_merging), on the GitHub sandbox
(three repositories of one installation, real git) and the registry on moto, through the real
client, the real merge gate and the real DynamoDB adapter.

What the attacker of each case GOT is read back from GitHub (merged pull requests, the commits on
each default branch, revert pull requests, the comments on the origin issue) and from the registry
(the set and its events): never from log lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import boto3
import pytest

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.errors import QueueUnavailableError
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.sqs import SqsEventQueue
from squadron.config.parse import parse_files
from squadron.domain import change_sets as cs
from squadron.domain.change_set_merges import SWEEP_KIND
from squadron.domain.change_sets import ChangeSet, SetState
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import EventEnvelope
from squadron.domain.permissions import Caller
from squadron.domain.routing import RoutingPolicy
from squadron.local.sandbox import GitHubSandbox
from squadron.shell.change_set_merging import ChangeSetMerger, request_sweep
from squadron.shell.dispatch import Dispatcher
from squadron.shell.merge_gate import MergeGate
from squadron.shell.router import RouterService
from tests.adapters.test_reconciler import deployed
from tests.support.git_remote import IDENTITY
from tests.support.sandbox_app import Scripted, app_client, app_on, app_sandbox, push_branch
from tests.unit.registry.support import implementation

BOT = "squadron[bot]"
SCHEMA, SERVER, CLIENT = "octo/schema", "octo/server", "octo/client"
#: Members in the set's own order; the client needs the server, the server the schema.
REPOSITORIES = (SCHEMA, CLIENT, SERVER)
ORDER = (SCHEMA, SERVER, CLIENT)
FILES = {"README.md": "# one of three\n", "api.txt": "v1\n"}
MERGE_AT_ONCE = parse_files(
    {
        "config.yaml": "version: 1\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  required_reviews: []\n"
            "  merge_policy: {method: squash, auto_merge: true, delete_branch: false}\n"
        ),
    }
)


@dataclass
class World:
    github: GitHubSandbox
    app: GitHubApp
    faults: Scripted
    work: Path
    registry: DynamoRegistry

    def client(self, repo: str) -> GitHubClient:
        return app_client(self.app, repo)

    def push(self, repo: str, branch: str, files: dict[str, str]) -> str:
        clone = self.work / repo.replace("/", "-")
        return push_branch(self.github, clone, repo, branch, files, message=f"work on {branch} of {repo}")

    def merger(self, gate: MergeGate | None = None) -> ChangeSetMerger:
        return ChangeSetMerger(
            registry=self.registry,
            github=AppGitHub(self.app, bot_login=BOT),
            gate=gate or self.gate(),
            policy_for=lambda _repo, _installation: RoutingPolicy(escalation_mentions=("@octo-leads",)),
            bot_login=BOT,
        )

    def queue_required(self, repo: str) -> None:
        """``repo``'s main merges through a merge queue, and requires the ``ci`` check."""
        self.github.require_merge_queue(repo, "main")
        self.github.repos[repo].protections["main"] = {
            "required_status_checks": {"checks": [{"context": "ci"}]}
        }

    def gate(self) -> MergeGate:
        return MergeGate(
            client=lambda _i, repo: self.client(repo), config_for=lambda _r: MERGE_AT_ONCE, bot_login=BOT
        )

    def ready_set(self) -> ChangeSet:
        """A set in ``ready``: each member's pull request open on ``change-set/<id>``, each judged
        ready by its gate at its head."""
        installed = {name: self.github.repos[name].id for name in REPOSITORIES}
        at = datetime.now(UTC) - timedelta(minutes=1)
        made = cs.propose(
            set_id=cs.change_set_id(77, installed[SCHEMA], 5, "proposal-1"),
            installation_id=77,
            origin=SCHEMA,
            issue=5,
            repositories=REPOSITORIES[1:],
            dependencies=((SERVER, SCHEMA), (CLIENT, SERVER)),
            installation_repositories=installed,
            proposed_by="11-pm",
            open_sets=0,
            at=at,
        )
        made, _ = cs.approve(made, "octo-admin", dict.fromkeys(REPOSITORIES, "admin"), at)
        made = cs.start_work(made, at)
        for name in REPOSITORIES:
            head = self.push(name, cs.branch_for(made.id), {"api.txt": f"v2 of {name}\n"})
            pr = self.client(name).create_pull(
                title=f"Change set {made.id}", head=cs.branch_for(made.id), base="main", body="part of a set"
            )
            made = cs.record_pull_request(made, name, int(pr["number"]), at)
            made = cs.record_gate(made, name, "ready", at, head_sha=head)
        assert made.state is SetState.READY
        self.registry.create_change_set(made, ())
        return made

    def stored(self, set_id: str) -> ChangeSet:
        found = self.registry.get_change_set(set_id)
        assert found is not None
        return found

    def pull(self, repo: str, number: int | None) -> dict[str, Any]:
        assert number is not None
        return self.github.repos[repo].pulls[number]

    def commits_on_main(self, repo: str) -> int:
        return int(self.github.repos[repo].store.git("rev-list", "--count", "main"))

    def reverts(self, repo: str) -> list[dict[str, Any]]:
        return [p for p in self.github.repos[repo].pulls.values() if p["head"]["ref"].startswith("revert-")]

    def escalations(self) -> list[str]:
        repo = self.github.repos[SCHEMA]
        return [c["body"] for c in repo.comments.get(5, []) if "stopped" in c["body"]]

    def events(self, set_id: str) -> list[str]:
        start, end = datetime.now(UTC) - timedelta(days=1), datetime.now(UTC) + timedelta(days=1)
        found = self.registry.history(self.github.repos[SCHEMA].id, start, end)
        return [e.detail_type.removesuffix(".v1") for e in found if e.data.get("change_set") == set_id]

    def merges(self) -> list[str]:
        """The repositories whose pull requests merged, in the order GitHub sent their webhooks."""
        return [
            d.payload["repository"]["full_name"]
            for d in self.github.deliveries
            if d.event == "pull_request" and d.action == "closed" and d.payload["pull_request"]["merged"]
        ]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    github = app_sandbox(tmp_path / "sandbox")
    for name in REPOSITORIES:
        github.add_repository(name, FILES, permissions={"octo-admin": "admin"})
    faults = Scripted()
    github.api_fault = faults
    with app_on(github) as app:
        (tmp_path / "work").mkdir()
        with implementation("dynamodb") as registry:
            origin = GitHubClient(
                http=app.http,
                token=lambda: "human:octo-admin",
                installation_id=77,
                repo=SCHEMA,
                caller=Caller.framework(),
            )
            origin.create_issue("A change across three repositories", "schema, server, client")  # issue #1
            for n in range(2, 6):
                origin.create_issue(f"filler {n}", "")  # the set's origin issue is #5
            yield World(github, app, faults, tmp_path / "work", registry)


def conflict_on_main(world: World, repo: str) -> None:
    """A person changes the same line on ``repo``'s main: the member's pull request conflicts."""
    world.push(repo, "main", {"api.txt": "v1 and a person's change\n"})


def test_three_members_merge_in_dependency_order_once_each(world: World) -> None:
    made = world.ready_set()
    before = {name: world.commits_on_main(name) for name in REPOSITORIES}
    after = world.merger().on_ready(made)
    assert after is not None and after.state is SetState.MERGED
    for name in REPOSITORIES:
        assert world.pull(name, after.member(name).pr_number)["merged"]
        assert world.commits_on_main(name) == before[name] + 1  # one squash commit, once
    assert world.merges() == list(ORDER)
    assert [n for n in ORDER if after.member(n).merge_commit_sha] == list(ORDER)
    assert world.events(made.id) == ["change_set.merging", "change_set.merged"]
    assert world.escalations() == [] and all(world.reverts(n) == [] for n in REPOSITORIES)


def test_the_last_merge_failing_reverts_the_first_two_newest_first_and_escalates_once(world: World) -> None:
    made = world.ready_set()
    conflict_on_main(world, CLIENT)
    merger = world.merger()
    after = merger.on_ready(made)
    assert after is not None and after.state is SetState.REVERTING
    assert not world.pull(CLIENT, after.member(CLIENT).pr_number)["merged"]
    assert after.failure is not None and after.failure.startswith(f"merging {CLIENT} failed")
    reverts = {name: world.reverts(name) for name in REPOSITORIES}
    assert [len(reverts[n]) for n in ORDER] == [1, 1, 0]
    server_revert, schema_revert = reverts[SERVER][0], reverts[SCHEMA][0]
    assert server_revert["number"] == after.member(SERVER).revert_pr
    assert schema_revert["number"] == after.member(SCHEMA).revert_pr
    assert server_revert["created_at"] <= schema_revert["created_at"]  # newest merge first
    for revert in (server_revert, schema_revert):
        assert revert["user"]["login"] == BOT and not revert["merged"]  # gated like any other
        assert revert["head"]["ref"].startswith("revert-")
    (escalation,) = world.escalations()
    assert CLIENT in escalation and f"{SERVER}#{server_revert['number']}" in escalation
    (listed,) = [line for line in escalation.splitlines() if line.startswith("Revert pull requests")]
    assert listed.index(SERVER) < listed.index(SCHEMA)  # newest merge first
    assert "needs-human" in {label["name"] for label in world.github.repos[SCHEMA].issues[5]["labels"]}
    # the same webhook twice, a sweep: nothing more is opened or said
    for _ in range(2):
        merger.on_pull_request_closed(CLIENT, world.pull(CLIENT, after.member(CLIENT).pr_number))
    merger.sweep()
    assert [len(world.reverts(n)) for n in ORDER] == [1, 1, 0] and len(world.escalations()) == 1
    # the revert pull requests merge through their repository's own gate; the gate's echo of the
    # App's merge (what the router gets) steps the set: once both merged, it is over
    echoes: list[EventEnvelope] = []
    gate = MergeGate(
        client=lambda _i, repo: world.client(repo),
        config_for=lambda _r: MERGE_AT_ONCE,
        bot_login=BOT,
        announce=echoes.append,
    )
    for name in (SERVER, SCHEMA):
        revert = world.reverts(name)[0]
        assert gate.evaluate(77, name, revert["number"]).merged
        assert world.github.repos[name].store.read("main", "api.txt") == "v1\n"  # undone
    for echo in echoes * 2:  # each echo twice: the same webhook again changes nothing
        merger.after_routing(echo)
    over = world.stored(made.id)
    assert over.state is SetState.ESCALATED and {n for n in REPOSITORIES if over.member(n).reverted} == {
        SCHEMA,
        SERVER,
    }
    assert len(world.escalations()) == 1
    assert world.events(made.id) == [
        "change_set.merging",
        "change_set.reverted",
        "change_set.escalated",
    ]


def test_a_members_own_gate_never_merges_it_alone(world: World) -> None:
    made = world.ready_set()
    for name in REPOSITORIES:
        number = made.member(name).pr_number
        assert number is not None
        outcome = world.gate().evaluate(77, name, number)
        assert outcome.result is not None and outcome.result.merge  # its gate passes...
        assert not outcome.merged and "merges with its change set" in outcome.detail
        assert not world.pull(name, number)["merged"]  # ...yet it waits for its set


def test_a_failure_in_the_first_merge_escalates_with_no_revert(world: World) -> None:
    made = world.ready_set()
    conflict_on_main(world, SCHEMA)
    after = world.merger().on_ready(made)
    assert after is not None and after.state is SetState.ESCALATED
    assert not any(world.pull(n, after.member(n).pr_number)["merged"] for n in REPOSITORIES)
    assert all(world.reverts(n) == [] for n in REPOSITORIES)
    (escalation,) = world.escalations()
    assert "Nothing had merged" in escalation and "@octo-leads" in escalation
    assert world.events(made.id) == ["change_set.merging", "change_set.escalated"]


@pytest.mark.parametrize("fault", ["502", "drop"])
def test_a_merge_github_applied_then_answered_badly_is_merged_once_not_failed(
    world: World, fault: str
) -> None:
    made = world.ready_set()
    number = made.member(SERVER).pr_number
    where = ("PUT", f"/repos/{SERVER}/pulls/{number}/merge")
    world.faults.wanted[where] = [fault]  # type: ignore[list-item]
    before = world.commits_on_main(SERVER)
    after = world.merger().on_ready(made)
    assert world.faults.wanted[where] == []  # GitHub applied it and answered badly
    assert after is not None and after.state is SetState.MERGED and after.failure is None
    assert world.commits_on_main(SERVER) == before + 1
    assert after.member(SERVER).merge_commit_sha == world.pull(SERVER, number)["merge_commit_sha"]


def test_a_member_whose_head_moved_after_its_gate_judged_it_is_not_merged(world: World) -> None:
    made = world.ready_set()
    moved = world.push(SERVER, cs.branch_for(made.id), {"api.txt": "v3, pushed after the gate judged v2\n"})
    after = world.merger().on_ready(made)
    assert after is not None and after.state is SetState.REVERTING
    assert not world.pull(SERVER, after.member(SERVER).pr_number)["merged"]
    assert world.pull(SERVER, after.member(SERVER).pr_number)["head"]["sha"] == moved
    assert not world.pull(CLIENT, after.member(CLIENT).pr_number)["merged"]
    assert "the head moved" in (after.failure or "")
    assert [len(world.reverts(n)) for n in ORDER] == [1, 0, 0]


def test_a_head_that_moves_between_the_judgement_and_the_merge_is_refused_and_fails_the_set(
    world: World,
) -> None:
    made = world.ready_set()
    gate = world.gate()
    judged = gate.judgement

    def judging_then_pushed(
        installation: int | None, repo: str, pr: dict[str, Any], role: str | None = None
    ) -> Any:
        decision = judged(installation, repo, pr, role)
        if repo == SCHEMA:
            world.push(SCHEMA, cs.branch_for(made.id), {"api.txt": "v3, a push racing the merge\n"})
        return decision

    gate.judgement = judging_then_pushed  # type: ignore[method-assign,assignment]
    after = world.merger(gate).on_ready(made)
    assert after is not None and after.state is SetState.ESCALATED
    assert not world.pull(SCHEMA, after.member(SCHEMA).pr_number)["merged"]
    assert "the head moved" in (after.failure or "") and "409" not in (after.failure or "x")


def test_two_routers_stepping_the_same_set_at_once_merge_each_member_once(world: World) -> None:
    made = world.ready_set()
    before = {name: world.commits_on_main(name) for name in REPOSITORIES}
    other = world.merger()
    saves = world.registry.save_change_set
    raced: list[int] = []

    def racing(b: ChangeSet, a: ChangeSet, events: Any) -> None:
        if len(raced) < 2 and a.state is SetState.MERGING and any(m.merged for m in a.members):
            raced.append(a.version)
            other.step(made.id)  # the other router takes the same step first, and on
        saves(b, a, events)

    world.registry.save_change_set = racing  # type: ignore[method-assign,assignment]
    after = world.merger().on_ready(made)
    assert raced and after is not None and after.state is SetState.MERGED
    for name in REPOSITORIES:
        assert world.commits_on_main(name) == before[name] + 1
    assert world.events(made.id) == ["change_set.merging", "change_set.merged"]


def test_a_webhook_naming_a_set_from_a_repository_outside_it_steps_nothing(world: World) -> None:
    made = world.ready_set()
    merger = world.merger()
    forged: dict[str, Any] = {"number": 1, "head": {"ref": cs.branch_for(made.id)}, "merged": True}
    assert merger.on_pull_request_closed("evil/fork", forged) is None
    assert merger.on_pull_request_closed(SCHEMA, {"head": {"ref": "feature/x"}}) is None
    assert world.stored(made.id).state is SetState.READY  # not begun by a forged nudge
    assert not any(world.pull(n, made.member(n).pr_number)["merged"] for n in REPOSITORIES)


class RouterDied(Exception):
    """The router's Lambda ended between GitHub's merge and the registry's record of it."""


def test_a_router_dying_between_two_merges_leaves_a_set_the_sweep_carries_on(world: World) -> None:
    made = world.ready_set()
    before = {name: world.commits_on_main(name) for name in REPOSITORIES}
    saves = world.registry.save_change_set

    def dying(b: ChangeSet, a: ChangeSet, events: Any) -> None:
        if a.member(SERVER).merged:
            raise RouterDied  # the server merged on GitHub, never recorded
        saves(b, a, events)

    world.registry.save_change_set = dying  # type: ignore[method-assign,assignment]
    with pytest.raises(RouterDied):
        world.merger().on_ready(made)
    world.registry.save_change_set = saves  # type: ignore[method-assign]
    stuck = world.stored(made.id)
    assert stuck.state is SetState.MERGING and not stuck.member(SERVER).merged
    assert world.pull(SERVER, stuck.member(SERVER).pr_number)["merged"]
    # a later router: the sweep record on events.fifo (no webhook is left to nudge the set)
    merger = world.merger()
    dispatcher = Dispatcher(cast(RouterService, None), kinds={SWEEP_KIND: merger.sweep_record})
    summary = dispatcher.handle(json.dumps({"kind": SWEEP_KIND}), "m-1")
    assert summary["change_sets"] == {made.id: "merged"}
    after = world.stored(made.id)
    assert after.state is SetState.MERGED and after.failure is None
    for name in REPOSITORIES:
        assert world.commits_on_main(name) == before[name] + 1  # the server's merge not sent again
    assert dispatcher.handle(json.dumps({"kind": SWEEP_KIND}), "m-2")["change_sets"] == {}


def test_the_reconcilers_tick_asks_the_router_to_sweep_only_while_a_set_is_in_motion(world: World) -> None:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(
        QueueName="events.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    )["QueueUrl"]
    queue = SqsEventQueue(url, client=sqs)
    now = datetime.now(UTC)
    made = world.ready_set()
    assert not request_sweep(world.registry, queue, now)  # ready: its merge starts from on_ready
    world.registry.save_change_set(made, merging := cs.begin_merging(made, now), ())
    assert request_sweep(world.registry, queue, now) and request_sweep(world.registry, queue, now)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    (message,) = received["Messages"]  # the same minute's twice is one record
    assert message["Attributes"]["MessageGroupId"] == "change-sets"
    dispatcher = Dispatcher(cast(RouterService, None), kinds={SWEEP_KIND: world.merger().sweep_record})
    assert dispatcher.handle(message["Body"], message["MessageId"])["change_sets"] == {merging.id: "merged"}
    assert not request_sweep(world.registry, queue, now + timedelta(minutes=5))  # over: nothing to ask


def test_each_reconciler_run_asks_and_a_queue_that_refuses_is_reported_for_the_next_run() -> None:
    asked: list[datetime] = []

    def asking(now: datetime) -> bool:
        asked.append(now)
        return True

    def refusing(now: datetime) -> bool:
        asked.append(now)
        raise QueueUnavailableError("SendMessage to events.fifo failed: throttled")

    with deployed() as stack:
        service = stack.reconciler()
        service.change_sets = asking
        assert service.run().change_sets_swept and asked == [stack.now]
        service.change_sets = refusing
        report = service.run()
        assert not report.change_sets_swept and len(asked) == 2
        assert report.problems == ["change sets: SendMessage to events.fifo failed: throttled"]


def test_a_member_whose_base_requires_a_merge_queue_is_queued_and_its_queued_merge_steps_the_set(
    world: World,
) -> None:
    world.queue_required(SERVER)
    made = world.ready_set()
    server_pr = made.member(SERVER).pr_number
    assert server_pr is not None
    world.client(SERVER).create_status(made.member(SERVER).head_sha or "", state="success", context="ci")
    merger = world.merger()
    waiting = merger.on_ready(made)
    assert waiting is not None and waiting.state is SetState.MERGING
    assert waiting.member(SCHEMA).merged and not waiting.member(SERVER).merged
    (entry,) = world.github.repos[SERVER].queue  # queued by the App, pinned to the judged head
    assert entry["head_sha"] == made.member(SERVER).head_sha and entry["enqueuer"] == BOT
    assert not world.pull(CLIENT, made.member(CLIENT).pr_number)["merged"]  # it waits its turn
    assert merger.step(made.id) == world.stored(made.id) and len(world.github.repos[SERVER].queue) == 1
    # the group's check passes: GitHub's queue merges it and its webhook (from the queue's bot) comes
    world.client(SERVER).create_status(entry["group"]["head_sha"], state="success", context="ci")
    assert world.pull(SERVER, server_pr)["merged"]
    (closed,) = [
        d
        for d in world.github.deliveries
        if d.event == "pull_request"
        and d.action == "closed"
        and d.payload["repository"]["full_name"] == SERVER
    ]
    envelope = build_envelope(
        event="pull_request", delivery_id=closed.guid, payload=closed.payload, received_at=datetime.now(UTC)
    )
    after = merger.after_routing(envelope)
    assert after == {"change_set": {"id": made.id, "state": "merged"}}
    assert world.merges() == list(ORDER)


def test_two_routers_failing_the_same_set_at_once_open_each_revert_and_tell_once(world: World) -> None:
    made = world.ready_set()
    conflict_on_main(world, CLIENT)
    other = world.merger()
    saves = world.registry.save_change_set
    raced: list[SetState] = []

    def racing(b: ChangeSet, a: ChangeSet, events: Any) -> None:
        if not raced and a.state in (SetState.FAILED, SetState.REVERTING):
            raced.append(a.state)
            other.step(made.id)  # the other router fails it, opens the reverts and tells, first
        saves(b, a, events)

    world.registry.save_change_set = racing  # type: ignore[method-assign,assignment]
    after = world.merger().on_ready(made)
    assert raced and after is not None and after.state is SetState.REVERTING
    assert [len(world.reverts(n)) for n in ORDER] == [1, 1, 0]
    assert len(world.escalations()) == 1
    assert world.events(made.id) == ["change_set.merging"]
