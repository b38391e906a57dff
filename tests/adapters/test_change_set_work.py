"""Working a change set (squadron.shell.change_set_work) on the real parts: the GitHub sandbox
through the App's client (three repositories of one installation; GitHub applies a write and
then answers 502) and the registry on moto. Played by the attacker: what a stranger's pull request
from the set's branch GOT, what the same webhook twice, two routers stepping the set at once and
a merge gate judging a member's ready pull request left behind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.for_router import AppGitHub
from squadron.config.parse import parse_files
from squadron.domain import change_sets as domain
from squadron.domain.change_set_events import events_of
from squadron.domain.change_set_steps import marked_set
from squadron.domain.change_sets import CHECK_NAME, ChangeSet, SetState, branch_for
from squadron.domain.event_trimming import pull_request_fields
from squadron.domain.events import EventEnvelope
from squadron.local.sandbox import GitHubSandbox
from squadron.shell.change_set_work import ChangeSetWork
from squadron.shell.merge_gate import MergeGate
from tests.support.aws import registry_and_queue
from tests.support.events import agent_did
from tests.support.sandbox_app import FailFirst, app_client, app_on, app_sandbox
from tests.support.world import ListQueue

BOT = "squadron[bot]"
SCHEMA, SERVER, CLIENT = "octo/schema", "octo/server", "octo/client"
REPOS = {SCHEMA: 1, SERVER: 2, CLIENT: 3}
T0 = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
#: Every repository merges a ready pull request on its own: only the set must stop that.
AUTO = parse_files(
    {
        "config.yaml": "version: 1\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  required_reviews: []\n  merge_policy: {method: squash, auto_merge: true}\n"
        ),
    }
)


@dataclass
class Stage:
    github: GitHubSandbox
    app: GitHubApp
    faults: FailFirst
    registry: DynamoRegistry
    queue: ListQueue

    def work(self, **extra: Any) -> ChangeSetWork:
        return ChangeSetWork(
            registry=self.registry,
            github=AppGitHub(self.app, bot_login=BOT),
            queue=self.queue,
            bot_login=BOT,
            clock=lambda: T0,
            **extra,
        )

    def client(self, repo: str, login: str | None = None) -> GitHubClient:
        return app_client(self.app, repo, login)

    def issues(self, repo: str) -> list[dict[str, Any]]:
        return [i for i in self.github.repos[repo].issues.values() if "pull_request" not in i]

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return list(self.github.repos[repo].comments.get(number, []))

    def commit(self, repo: str, branch: str, text: str) -> str:
        """A commit on ``branch`` (from main) changing one file, as a push would leave it."""
        store = self.github.repos[repo].store
        blob = store.git("hash-object", "-w", "--stdin", stdin=text)
        tree = store.git("mktree", stdin=f"100644 blob {blob}\tchange.txt\n")
        parent = store.sha("refs/heads/main") or ""
        sha = store.git("commit-tree", tree, "-p", parent, "-m", f"work on {branch}")
        store.git("update-ref", f"refs/heads/{branch}", sha)
        return sha

    def open_pull(self, repo: str, branch: str, login: str | None = None) -> dict[str, Any]:
        self.commit(repo, branch, f"{repo} {branch} {login}\n")
        return self.client(repo, login).create_pull(title=f"{repo} part", head=branch, base="main", body="")

    def status(self, repo: str, sha: str, context: str) -> dict[str, Any] | None:
        statuses = self.client(repo).get_combined_status(sha).get("statuses") or []
        return next((s for s in statuses if s.get("context") == context), None)


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Stage]:
    github = app_sandbox(tmp_path / "sandbox")
    for repo in REPOS:
        github.add_repository(repo, {"README.md": f"# {repo}\n"}, permissions={"alice": "write"})
    faults = FailFirst()
    github.api_fault = faults
    with app_on(github) as app, mock_aws():
        registry, _, _ = registry_and_queue()
        yield Stage(github, app, faults, registry, ListQueue())


def approved(stage: Stage) -> ChangeSet:
    created = domain.propose(
        set_id=domain.change_set_id(77, 1, 5, "proposal"),
        installation_id=77,
        origin=SCHEMA,
        issue=5,
        repositories=(SERVER, CLIENT),
        dependencies=((SERVER, SCHEMA), (CLIENT, SERVER)),
        installation_repositories=REPOS,
        proposed_by="1-pm",
        open_sets=0,
        at=T0,
    )
    stage.registry.create_change_set(created, events_of(None, created, correlation_id="p"))
    after, _ = domain.approve(created, "alice", dict.fromkeys(REPOS, "write"), T0)
    stage.registry.save_change_set(created, after, events_of(created, after, correlation_id="a"))
    # the origin issue, a person's
    stage.client(SCHEMA, "alice").create_issue("Rename the user field", "schema, server and client")
    for _ in range(4):
        stage.client(SCHEMA, "alice").create_issue("filler", "")
    return after


def pr_event(stage: Stage, repo: str, pr: dict[str, Any], action: str = "opened") -> EventEnvelope:
    fields = pull_request_fields(stage.client(repo).get_pull(int(pr["number"])))
    return EventEnvelope.model_validate(
        {
            "delivery_id": f"d-{repo}-{pr['number']}-{action}",
            "event": "pull_request",
            "action": action,
            "received_at": T0,
            "occurred_at": T0,
            "installation_id": 77,
            "repository": {"id": REPOS[repo], "full_name": repo, "default_branch": "main"},
            "sender": {"login": str(pr["user"]["login"]), "id": 9, "type": "User"},
            "pull_request": fields.model_dump(),
        }
    )


def test_start_opens_each_member_issue_once_and_hands_each_to_its_repository(stage: Stage) -> None:
    change_set = approved(stage)
    stage.faults.wanted[("POST", f"/repos/{SERVER}/issues")] = "502"  # applied, answer lost
    work = stage.work()
    started = work.start(change_set, correlation_id="approve-1")
    again = work.start(change_set, correlation_id="approve-1")  # the same approval delivered twice
    assert stage.faults.hit == [("POST", f"/repos/{SERVER}/issues")]
    assert started.state is SetState.WORKING and again.version == started.version
    for repo in (SERVER, CLIENT):
        [issue] = stage.issues(repo)
        assert issue["user"]["login"] == BOT
        assert marked_set(issue["body"]) == change_set.id
        assert branch_for(change_set.id) in issue["body"] and "Rename the user field" not in issue["body"]
    assert len(stage.issues(SCHEMA)) == 5  # the origin works on its own issue
    [said] = stage.comments(SCHEMA, 5)
    assert branch_for(change_set.id) in said["body"]
    handed = {(e.repository.full_name, e.command.issue_number, e.delivery_id) for e in stage.queue}  # type: ignore[union-attr]
    assert {(repo, number) for repo, number, _ in handed} == {(SCHEMA, 5), (SERVER, 1), (CLIENT, 1)}
    assert len({delivery for *_, delivery in handed}) == 3  # the same three ids on the second start
    assert all(marked_set(e.command.issue.body) == change_set.id for e in stage.queue)  # type: ignore[union-attr]


def test_a_set_not_approved_starts_nothing(stage: Stage) -> None:
    change_set = approved(stage)
    proposed = change_set.model_copy(update={"id": domain.change_set_id(77, 1, 5, "other")})
    created = proposed.model_copy(update={"state": SetState.PROPOSED, "version": 1})
    stage.registry.create_change_set(created, [])
    with pytest.raises(domain.ChangeSetRefusedError):
        stage.work().start(created, correlation_id="x")
    assert stage.issues(SERVER) == [] and stage.queue == []


@pytest.mark.parametrize(
    ("who", "branch", "recorded"),
    [
        (None, "set", True),  # the App's pull request (its agent's) from the set's branch
        ("agent", "set", True),  # the same, as the agent gateway reports it
        ("alice", "set", False),  # a writer's own pull request from the same branch
        ("mallory", "set", False),  # a stranger's
        (None, "feat/issue-1", False),  # the App's, from another branch
    ],
)
def test_only_the_apps_pull_request_from_the_sets_branch_is_the_members(
    stage: Stage, who: str | None, branch: str, recorded: bool
) -> None:
    change_set = stage.work().start(approved(stage), correlation_id="a")
    login = None if who == "agent" else who
    pr = stage.open_pull(SERVER, branch_for(change_set.id) if branch == "set" else branch, login)
    event = pr_event(stage, SERVER, pr)
    if who == "agent":
        event = agent_did(event, f"2-1-feat-dev-{change_set.id}")
    work = stage.work()
    work.pull_request(event)
    work.pull_request(event)  # the same webhook twice
    stored = stage.registry.get_change_set(change_set.id)
    assert stored is not None
    assert stored.member(SERVER).pr_number == (pr["number"] if recorded else None)
    check = stage.status(SERVER, pr["head"]["sha"], CHECK_NAME)
    assert (check is not None) is recorded
    told = [c for c in stage.comments(CLIENT, 1) if pr["head"]["sha"] in c["body"]]
    assert len(told) == (1 if recorded else 0)  # keyed by the push: once, however often delivered
    assert len([c for c in stage.comments(SCHEMA, 5) if pr["head"]["sha"] in c["body"]]) == len(told)


def gate(stage: Stage, work: ChangeSetWork) -> MergeGate:
    github = AppGitHub(stage.app, bot_login=BOT)
    return MergeGate(
        client=github.client,
        config_for=lambda repo: AUTO,
        bot_login=BOT,
        change_set_hook=work.gate_judged,
    )


def test_the_check_passes_only_when_every_members_gate_is_ready_and_no_gate_merges_a_member(
    stage: Stage,
) -> None:
    change_set = stage.work().start(approved(stage), correlation_id="a")
    branch = branch_for(change_set.id)
    pulls = {repo: stage.open_pull(repo, branch) for repo in REPOS}
    work = stage.work()
    merge_gate = gate(stage, work)
    for repo in (SCHEMA, SERVER):
        outcome = merge_gate.evaluate(77, repo, int(pulls[repo]["number"]))
        assert not outcome.merged  # ready by its own flow, yet not merged on its own
        assert outcome.result is not None and outcome.result.verdict == "ready"
        assert outcome.result.description == f"ready: change set {change_set.id} merges it in order"
    states = {repo: stage.status(repo, pr["head"]["sha"], CHECK_NAME) for repo, pr in pulls.items()}
    assert {s["state"] for s in states.values() if s} == {"pending"}
    assert states[CLIENT] is None  # its pull request is not known to the set yet
    merge = stage.status(SCHEMA, pulls[SCHEMA]["head"]["sha"], "squadron/merge")
    assert merge is not None and merge["state"] == "pending"  # a person's click waits on it too
    outcome = merge_gate.evaluate(77, CLIENT, int(pulls[CLIENT]["number"]))
    assert not outcome.merged
    stored = stage.registry.get_change_set(change_set.id)
    assert stored is not None and stored.state is SetState.READY
    for repo, pr in pulls.items():
        check = stage.status(repo, pr["head"]["sha"], CHECK_NAME)
        assert check is not None and check["state"] == "success", repo
        said = stage.status(repo, pr["head"]["sha"], "squadron/merge")
        assert said is not None and said["state"] == "success", repo
        assert not stage.client(repo).get_pull(int(pr["number"]))["merged"]
    # the same gate still merges a ready pull request that is no member's (the flow merges it)
    other = stage.open_pull(SERVER, "feat/issue-9")
    assert merge_gate.evaluate(77, SERVER, int(other["number"])).merged


def test_a_member_going_back_to_waiting_turns_the_check_back(stage: Stage) -> None:
    change_set = stage.work().start(approved(stage), correlation_id="a")
    pulls = {repo: stage.open_pull(repo, branch_for(change_set.id)) for repo in REPOS}
    readies: list[str] = []
    work = stage.work(on_ready=lambda s: readies.append(s.id))
    merge_gate = gate(stage, work)
    for repo, pr in pulls.items():
        merge_gate.evaluate(77, repo, int(pr["number"]))
    assert readies == [change_set.id]
    draft = stage.github.repos[SERVER].pulls[int(pulls[SERVER]["number"])]
    draft["draft"] = True  # the server's pull request went back to draft: its own gate waits
    merge_gate.evaluate(77, SERVER, int(pulls[SERVER]["number"]))
    stored = stage.registry.get_change_set(change_set.id)
    assert stored is not None and stored.state is SetState.WORKING
    for repo, pr in pulls.items():
        check = stage.status(repo, pr["head"]["sha"], CHECK_NAME)
        assert check is not None and check["state"] == "pending", repo
    held = stage.status(SCHEMA, pulls[SCHEMA]["head"]["sha"], "squadron/merge")
    assert held is not None and held["state"] == "pending"  # the others' gates turned back with it


class Racing(DynamoRegistry):
    """The registry, where another router stores its step of the set just before this one's."""

    def __init__(self, inner: DynamoRegistry, first: Callable[[], object]) -> None:
        self.__dict__.update(inner.__dict__)
        self.first: Callable[[], object] | None = first

    def save_change_set(self, before: ChangeSet, after: ChangeSet, events: Any) -> None:
        first, self.first = self.first, None
        if first is not None:
            first()
        super().save_change_set(before, after, events)


def test_two_routers_recording_two_members_at_once_both_count(stage: Stage) -> None:
    change_set = stage.work().start(approved(stage), correlation_id="a")
    pulls = {repo: stage.open_pull(repo, branch_for(change_set.id)) for repo in (SERVER, CLIENT)}
    other = stage.work()
    racing = Racing(stage.registry, lambda: other.pull_request(pr_event(stage, CLIENT, pulls[CLIENT])))
    mine = ChangeSetWork(
        registry=racing, github=AppGitHub(stage.app, bot_login=BOT), queue=stage.queue, bot_login=BOT
    )
    mine.pull_request(pr_event(stage, SERVER, pulls[SERVER]))
    stored = stage.registry.get_change_set(change_set.id)
    assert stored is not None
    assert stored.member(SERVER).pr_number == pulls[SERVER]["number"]
    assert stored.member(CLIENT).pr_number == pulls[CLIENT]["number"]
    # the check on both heads names the newest version: an older one never stays over it
    for repo, pr in pulls.items():
        check = stage.status(repo, pr["head"]["sha"], CHECK_NAME)
        assert check is not None and check["description"].endswith(f"(v{stored.version})"), repo


def test_an_older_check_never_replaces_a_newer_one(stage: Stage) -> None:
    change_set = stage.work().start(approved(stage), correlation_id="a")
    pr = stage.open_pull(SERVER, branch_for(change_set.id))
    work = stage.work()
    work.pull_request(pr_event(stage, SERVER, pr))
    newest = stage.registry.get_change_set(change_set.id)
    assert newest is not None
    work.post_checks(change_set)  # a late retry holding the set as it was before the pull request
    check = stage.status(SERVER, pr["head"]["sha"], CHECK_NAME)
    assert check is not None and check["description"].endswith(f"(v{newest.version})")


def test_two_routers_starting_the_set_at_once_open_each_member_issue_once(stage: Stage) -> None:
    change_set = approved(stage)
    other = stage.work()
    racing = Racing(stage.registry, lambda: other.start(change_set, correlation_id="approve-2"))
    mine = ChangeSetWork(
        registry=racing, github=AppGitHub(stage.app, bot_login=BOT), queue=stage.queue, bot_login=BOT
    )
    started = mine.start(change_set, correlation_id="approve-1")
    assert started.state is SetState.WORKING
    assert started.version == change_set.version + 1  # one step to working, not two
    for repo in (SERVER, CLIENT):
        assert len(stage.issues(repo)) == 1, repo
    assert len(stage.comments(SCHEMA, 5)) == 1
    assert len({e.delivery_id for e in stage.queue}) == 3  # events.fifo drops the repeats


@pytest.mark.parametrize("who", ["alice", "mallory"])
def test_a_persons_pull_request_from_the_sets_branch_is_no_member_at_the_gate_either(
    stage: Stage, who: str
) -> None:
    change_set = stage.work().start(approved(stage), correlation_id="a")
    pr = stage.open_pull(SERVER, branch_for(change_set.id), who)
    gate(stage, stage.work()).evaluate(77, SERVER, int(pr["number"]))
    stored = stage.registry.get_change_set(change_set.id)
    assert stored is not None and stored.member(SERVER).pr_number is None
    assert stored.version == change_set.version
    assert stage.status(SERVER, pr["head"]["sha"], CHECK_NAME) is None
