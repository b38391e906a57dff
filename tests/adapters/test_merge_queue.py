"""GitHub's merge queue on the sandbox, through the real client and the real merge gate.

A branch whose rules require a merge queue refuses the REST merge (405); the gate queues the pull
request with GraphQL pinned to the head it judged, GitHub's queue merges it when its group's
required checks pass, and a queueing whose answer was lost is looked up, never sent twice. The
App takes out of the queue only the entries it made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubError, GraphQLError
from squadron.config.parse import parse_files
from squadron.domain.permissions import Caller, CallerKind, MergeConsent, PermissionDeniedError
from squadron.domain.pipeline_wire import execution_name, run_input
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.domain.pipelines.judge import Facts
from squadron.domain.pipelines.work import Where
from squadron.local.sandbox import ApiFault, GitHubSandbox
from squadron.local.sandbox.queues import MERGE_QUEUE_BOT
from squadron.shell.dispatch import Dispatcher
from squadron.shell.merge_gate import MergeGate
from tests.adapters.test_pipeline_stage_work import Router, drive
from tests.support.git_remote import IDENTITY
from tests.support.pipeline_tasks import outbox_over, pipeline_tasks
from tests.support.sandbox_app import Scripted, app_client, app_on, app_sandbox, push_branch
from tests.support.step_functions import Stack, step_functions
from tests.support.world import World
from tests.unit.pipelines.test_pipeline_config import files_with

BOT = "squadron[bot]"
REPO = "octo/repo"
FILES = {"README.md": "# octo/repo\n", "app.py": "print('v1')\n"}
GRAPHQL = ("POST", "/graphql")

MERGE_AT_ONCE = parse_files(
    {
        "config.yaml": "version: 1\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  required_reviews: []\n"
            "  merge_policy: {method: squash, auto_merge: true, delete_branch: true}\n"
        ),
    }
)
#: Nothing merges: a person must approve (the gate's verdict is "waiting").
HELD = parse_files(
    {
        "config.yaml": "version: 1\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  required_reviews: []\n"
            "  merge_policy: {method: squash, auto_merge: true, require_human: true}\n"
        ),
    }
)


@dataclass
class Sandbox:
    github: GitHubSandbox
    app: GitHubApp
    faults: Scripted
    work: Path

    def client(self, login: str | None = None) -> GitHubClient:
        return app_client(self.app, REPO, login)

    def push(self, branch: str, files: dict[str, str]) -> str:
        return push_branch(self.github, self.work / "clone", REPO, branch, files, message=f"work on {branch}")

    def pull_request(
        self, branch: str = "feat/issue-1", files: dict[str, str] | None = None
    ) -> dict[str, Any]:
        self.push(branch, files or {"app.py": "print('v2')\n"})
        return self.client().create_pull(title="Export", head=branch, base="main", body="Closes #1")

    def gate(self, config: Any = MERGE_AT_ONCE) -> MergeGate:
        return MergeGate(client=lambda _i, _r: self.client(), config_for=lambda _r: config, bot_login=BOT)

    def events(self, event: str) -> list[tuple[str | None, dict[str, Any]]]:
        return [(d.action, d.payload) for d in self.github.deliveries if d.event == event]

    #: What reached GitHub's GraphQL, in order: "query", "enqueuePullRequest", "dequeuePullRequest".
    sent: list[str]


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    github = app_sandbox(tmp_path / "sandbox")
    github.add_repository(REPO, FILES, permissions={"alice": "write", "octo-admin": "admin"})
    github.require_merge_queue(REPO, "main")
    faults = Scripted()
    github.api_fault = faults
    sent: list[str] = []
    answer = github.graphql

    def recording(body: bytes, caller: str, credential: str = "") -> dict[str, Any]:
        query = str(json.loads(body).get("query") or "")
        sent.append(next((w for w in ("enqueuePullRequest", "dequeuePullRequest") if w in query), "query"))
        return answer(body, caller, credential)

    github.graphql = recording  # type: ignore[method-assign]
    with app_on(github) as app:
        (tmp_path / "work").mkdir()
        yield Sandbox(github, app, faults, tmp_path / "work", sent)


def test_a_rest_merge_into_a_queued_branch_is_refused_as_github_does(sandbox: Sandbox) -> None:
    pr = sandbox.pull_request()
    consent = MergeConsent(pr["number"], True, "test")
    with pytest.raises(GitHubError) as refused:
        sandbox.client().merge_pull(pr["number"], consent=consent, sha=pr["head"]["sha"])
    assert (refused.value.status, refused.value.message) == (
        405,
        "Changes must be made through the merge queue",
    )
    assert sandbox.client().branch_requires_merge_queue("main")
    assert not sandbox.client().branch_requires_merge_queue("develop")


def test_an_enqueue_pinned_to_a_head_that_moved_is_refused(sandbox: Sandbox) -> None:
    pr = sandbox.pull_request()
    client = sandbox.client()
    node, entry = client.merge_queue_entry(pr["number"])
    assert entry is None
    consent = MergeConsent(pr["number"], True, "test")
    with pytest.raises(GraphQLError, match="Head branch was modified"):
        client.enqueue_pull(pr["number"], node_id=node, consent=consent, expected_head="0" * 40)
    assert sandbox.github.repos[REPO].queue == []


def test_only_the_framework_with_the_flows_consent_may_queue_a_merge(sandbox: Sandbox) -> None:
    pr = sandbox.pull_request()
    dev = GitHubClient(
        http=sandbox.app.http,
        token=lambda: "unused",
        installation_id=77,
        repo=REPO,
        caller=Caller(CallerKind.DEV, "dev-1", "feat-dev", "feat/issue-1"),
    )
    cases = [
        (dev, MergeConsent(pr["number"], True, "the dev says so")),
        (sandbox.client(), MergeConsent(pr["number"], False, "waiting on a review")),
        (sandbox.client(), MergeConsent(pr["number"] + 1, True, "another PR's verdict")),
    ]
    for client, consent in cases:
        with pytest.raises(PermissionDeniedError):
            client.enqueue_pull(pr["number"], node_id="x", consent=consent, expected_head=pr["head"]["sha"])
    with pytest.raises(PermissionDeniedError):
        dev.dequeue_pull(pr["number"], node_id="x")
    assert sandbox.sent == []  # refused before anything was sent


@pytest.mark.parametrize("fault", ["502", "drop", "refuse", None])
def test_the_gate_queues_the_judged_head_once_and_the_queue_merges_it(
    sandbox: Sandbox, fault: ApiFault | None
) -> None:
    """Applied and answered 502 or dropped: the entry is looked up and found, nothing is sent
    again. Refused before it was applied (503): not queued, so it is sent again."""
    pr = sandbox.pull_request()
    # The first GraphQL request is the entry's lookup; the fault is on the enqueue after it.
    sandbox.faults.wanted[GRAPHQL] = [None, fault]
    outcome = sandbox.gate().evaluate(77, REPO, pr["number"])
    assert outcome.queued and not outcome.merged, outcome.detail
    # What reached GitHub's GraphQL (a refused request never did).
    expected = {
        None: ["query", "enqueuePullRequest"],
        "502": ["query", "enqueuePullRequest", "query"],
        "drop": ["query", "enqueuePullRequest", "query"],
        "refuse": ["query", "query", "enqueuePullRequest"],
    }
    assert sandbox.sent == expected[fault]
    repo = sandbox.github.repos[REPO]
    # No checks are required: GitHub's queue merged the group at once, as its own bot.
    merged = repo.pulls[pr["number"]]
    assert merged["merged"] and merged["merged_by"]["login"] == MERGE_QUEUE_BOT
    assert repo.store.sha("refs/heads/main") == merged["merge_commit_sha"]
    assert [a for a, _ in sandbox.events("merge_group")] == ["checks_requested", "destroyed"]
    (_, destroyed) = sandbox.events("merge_group")[-1]
    assert destroyed["reason"] == "merged"
    assert (
        destroyed["merge_group"]["head_ref"]
        == f"refs/heads/gh-readonly-queue/main/pr-{pr['number']}-{pr['head']['sha']}"
    )
    (closed,) = [p for a, p in sandbox.events("pull_request") if a == "closed"]
    assert closed["sender"]["login"] == MERGE_QUEUE_BOT and closed["pull_request"]["merged"]
    # The queue merged it; the merged path deletes the branch (the gate, on merge_group destroyed).
    after = sandbox.gate().evaluate(77, REPO, pr["number"], queue_merged=True)
    assert after.merged and repo.store.sha("refs/heads/feat/issue-1") is None


def _protect(sandbox: Sandbox, *contexts: str) -> None:
    sandbox.github.repos[REPO].protections["main"] = {
        "required_status_checks": {
            "strict": True,
            "contexts": [],
            "checks": [{"context": c} for c in contexts],
        }
    }


def test_the_groups_checks_decide_and_squadrons_statuses_are_posted_on_the_group(sandbox: Sandbox) -> None:
    _protect(sandbox, "ci", "squadron/merge")
    pr = sandbox.pull_request()
    head = pr["head"]["sha"]
    sandbox.client("alice").create_status(head, state="success", context="ci")
    outcome = sandbox.gate().evaluate(77, REPO, pr["number"])
    assert outcome.queued, outcome.detail
    ((action, requested),) = sandbox.events("merge_group")
    group = requested["merge_group"]["head_sha"]
    assert action == "checks_requested" and group != head
    # checks_requested comes back to the gate: Squadron's contexts on the group's head.
    sandbox.gate().evaluate(77, REPO, pr["number"], merge_group=group)
    repo = sandbox.github.repos[REPO]
    assert {s["context"]: s["state"] for s in repo.statuses[group]} == {"squadron/merge": "success"}
    assert not repo.pulls[pr["number"]]["merged"]  # ci has not reported on the group yet
    sandbox.client("alice").create_status(group, state="success", context="ci")
    assert repo.pulls[pr["number"]]["merged"]
    assert repo.store.sha("refs/heads/main") == group


def test_a_failing_group_takes_the_pr_out_of_the_queue(sandbox: Sandbox) -> None:
    _protect(sandbox, "ci")
    pr = sandbox.pull_request()
    sandbox.client("alice").create_status(pr["head"]["sha"], state="success", context="ci")
    assert sandbox.gate().evaluate(77, REPO, pr["number"]).queued
    group = sandbox.events("merge_group")[0][1]["merge_group"]["head_sha"]
    sandbox.client("alice").create_status(group, state="failure", context="ci")
    repo = sandbox.github.repos[REPO]
    assert repo.queue == [] and not repo.pulls[pr["number"]]["merged"]
    (_, destroyed) = sandbox.events("merge_group")[-1]
    assert destroyed["reason"] == "dequeued"
    assert repo.store.sha(destroyed["merge_group"]["head_ref"]) is None  # the group's branch is gone


def test_a_broken_gate_takes_the_apps_entry_out_but_never_a_persons(sandbox: Sandbox) -> None:
    _protect(sandbox, "ci")  # nothing reports on groups here: entries wait in the queue
    ours = sandbox.pull_request("feat/issue-1")
    theirs = sandbox.pull_request("feat/issue-2", {"README.md": "# theirs\n"})
    for pr in (ours, theirs):
        sandbox.client("alice").create_status(pr["head"]["sha"], state="success", context="ci")
    assert sandbox.gate().evaluate(77, REPO, ours["number"]).queued
    # alice queues her own pull request herself (as a person does on GitHub)...
    alice = sandbox.client("alice")
    node, _ = alice.merge_queue_entry(theirs["number"])
    alice.enqueue_pull(
        theirs["number"],
        node_id=node,
        consent=MergeConsent(theirs["number"], True, "alice"),
        expected_head=theirs["head"]["sha"],
    )
    repo = sandbox.github.repos[REPO]
    assert [e["number"] for e in repo.queue] == [ours["number"], theirs["number"]]
    # ...and the gate, judging it ready too, finds it queued at its head and sends nothing.
    sent = len(sandbox.sent)
    outcome = sandbox.gate().evaluate(77, REPO, theirs["number"])
    assert outcome.queued and outcome.detail == "in the merge queue"
    assert "enqueuePullRequest" not in sandbox.sent[sent:]
    # The gate now says no to both (a person must approve): it takes out its own entry only.
    held = sandbox.gate(HELD)
    assert held.evaluate(77, REPO, theirs["number"]).detail.endswith("queued by alice: left to them")
    assert held.evaluate(77, REPO, ours["number"]).detail.endswith("taken out of the merge queue")
    assert [e["number"] for e in repo.queue] == [theirs["number"]]
    assert [n for n in sandbox.sent if n == "dequeuePullRequest"] == ["dequeuePullRequest"]


def test_a_push_to_a_queued_pr_takes_it_out_of_the_queue(sandbox: Sandbox) -> None:
    _protect(sandbox, "ci")
    pr = sandbox.pull_request()
    sandbox.client("alice").create_status(pr["head"]["sha"], state="success", context="ci")
    assert sandbox.gate().evaluate(77, REPO, pr["number"]).queued
    sandbox.push("feat/issue-1", {"app.py": "print('v3')\n"})
    assert sandbox.github.repos[REPO].queue == []
    assert sandbox.events("merge_group")[-1][1]["reason"] == "dequeued"


# --- a pipeline's merge_pr (issue 30, item 4) -----------------------------------------------------
# The action asks Squadron's merge gate, which queues the judged head with GraphQL: nothing merges
# past the queue (the gate's one REST attempt on a head's first merge is refused there, 405, as
# docs/exactly-once.md says, and never retried). The run goes on moto's interpreter; the router's
# side is PipelineTasks, whose outbox holds the real merge gate over this sandbox.

PIPELINE_MERGE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - {id: auto-merge, type: action, action: merge_pr, config: {method: squash, delete_branch: true}}
"""


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def merge_run(
    stack: Stack, world: World, gate: Callable[[], MergeGate], pipeline_yaml: str, pr: int
) -> tuple[Router, str]:
    """A router whose outbox asks ``gate()`` to merge, carrying out the tasks of pipeline ``p`` of
    ``pipeline_yaml`` (compiled for repository 42, :data:`REPO`), and that run started on ``pr``:
    (the router, the run's execution ARN)."""
    tasks = pipeline_tasks(
        stack,
        world,
        outbox=outbox_over(world, merge_gate=gate),
        facts=NoReads(),
        where=lambda repository_id: Where(REPO, 77) if repository_id == 42 else None,
    )
    router = Router(world, None, None, tasks, Dispatcher(world.router, pipeline_tasks=tasks))  # type: ignore[arg-type]
    pipelines = parse_files(files_with(pipeline_yaml)).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, "p", compiled.definition).version_arn
    arn = stack.pipelines.start(version, execution_name("d-1", "p"), run_input(42, pr)).execution_arn
    return router, arn


def test_a_pipelines_merge_pr_on_a_queued_branch_is_queued_by_the_gate_and_merged_by_the_queue(
    stack: Stack, sandbox: Sandbox
) -> None:
    pr = sandbox.pull_request()
    head = pr["head"]["sha"]
    requests: list[tuple[str, str]] = []
    faults = sandbox.faults

    def seen(method: str, path: str) -> ApiFault | None:
        requests.append((method, path.split("?", maxsplit=1)[0]))
        return faults(method, path)

    sandbox.github.api_fault = seen
    r, arn = merge_run(stack, World(), sandbox.gate, PIPELINE_MERGE, pr["number"])

    handled = drive(stack, r, arn)

    assert [stage for stage, _ in handled] == ["auto-merge"]
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    # The gate queued the judged head with GraphQL and GitHub's queue merged it, as its own bot.
    assert sandbox.sent[-1] == "enqueuePullRequest" and sandbox.sent.count("enqueuePullRequest") == 1
    (_, destroyed) = sandbox.events("merge_group")[-1]
    assert destroyed["reason"] == "merged"
    assert (
        destroyed["merge_group"]["head_ref"] == f"refs/heads/gh-readonly-queue/main/pr-{pr['number']}-{head}"
    )
    merged = sandbox.github.repos[REPO].pulls[pr["number"]]
    assert merged["merged"] and merged["merged_by"]["login"] == MERGE_QUEUE_BOT
    # The gate's first merge of a head tries REST once (docs/exactly-once.md: the 405 names the
    # queue) and GitHub refuses it there: nothing merged past the queue, and it is never retried.
    rest = ("PUT", f"/repos/{REPO}/pulls/{pr['number']}/merge")
    assert requests.count(rest) <= 1
    # The stage's answer says the merge was asked of the gate.
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    (output,) = [e["taskSucceededEventDetails"]["output"] for e in history if e["type"] == "TaskSucceeded"]
    assert '"merge":"asked"' in output.replace(" ", "")


class NoReads:
    def facts(
        self, where: Where, number: int, others: tuple[int, ...] = (), paths: tuple[str, ...] = ()
    ) -> Facts:
        raise AssertionError("a merge_pr stage reads nothing itself")
