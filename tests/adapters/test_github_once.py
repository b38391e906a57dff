"""Exactly once against GitHub as it really behaves: on the sandbox, through the real adapters.

GitHub applies a write and then answers 502 (or drops the connection, or leaves the answer
hanging past the client's read timeout); lists come a page at a time; a person edits what the
App wrote. The router's escalation notice, the gateway's agent comment and the merge gate's
merge must each take effect exactly once, and each lookup must find what the key names.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import LookupIncompleteError
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import GitHubHttp, Throttle
from squadron.adapters.local_aws import EVENTS_VISIBILITY
from squadron.adapters.sqs import SqsEventQueue
from squadron.config.parse import parse_files
from squadron.config.policy import routing_policy
from squadron.domain.agents import AgentStatus
from squadron.domain.effects import marked
from squadron.domain.events import EventEnvelope
from squadron.domain.repo_config.limits import MAX_LISTED
from squadron.local.invocation import InvocationTimeout, invoke
from squadron.local.sandbox import ApiFault, GitHubSandbox
from squadron.shell.merge_gate import MergeGate
from squadron.shell.reconciler import ReconcilerService
from squadron.shell.router import RouterService
from tests.support.aws import registry_and_queue
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher
from tests.support.gateway import ROOT, door_of, gateway_for
from tests.support.git_remote import IDENTITY, git
from tests.support.github_fake import app_private_key
from tests.support.orchestration import FIXED, fixed_policy
from tests.support.sandbox_app import FailFirst, app_client, app_on, app_sandbox

BOT = "squadron[bot]"
REPO = "octo/repo"
KEY = "0123456789abcdef01234567"
FILES = {"README.md": "# octo/repo\n", "app.py": "print('v1')\n"}


@dataclass
class Sandbox:
    github: GitHubSandbox
    app: GitHubApp
    faults: FailFirst
    work: Path

    def client(self, login: str | None = None) -> GitHubClient:
        return app_client(self.app, REPO, login)

    def comments(self, number: int) -> list[dict[str, Any]]:
        return list(self.github.repos[REPO].comments.get(number, []))

    def push(self, branch: str, files: dict[str, str]) -> str:
        clone = self.work / "clone"
        if not clone.exists():
            git(self.work, "clone", "--quiet", self.github.git_url(REPO), str(clone))
        git(clone, "checkout", "--quiet", "-B", branch, "origin/main")
        for name, text in files.items():
            (clone / name).write_text(text)
        git(clone, "add", "--all")
        git(clone, "commit", "--quiet", "-m", f"work on {branch}")
        git(clone, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
        return git(clone, "rev-parse", "HEAD")


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    github = app_sandbox(tmp_path / "sandbox")
    github.add_repository(REPO, FILES, permissions={"alice": "write", "octo-admin": "admin"})
    faults = FailFirst()
    github.api_fault = faults
    with app_on(github) as app:
        (tmp_path / "work").mkdir()
        yield Sandbox(github, app, faults, tmp_path / "work")


# --- the router and the gateway, when GitHub applies and then answers 502 -----------------------


def test_the_routers_escalation_and_the_agents_comment_appear_once_when_github_answers_502(
    sandbox: Sandbox,
) -> None:
    alice = sandbox.client("alice")
    issue = alice.create_issue("Export API", "CSV please")["number"]
    comments = f"/repos/{REPO}/issues/{issue}/comments"
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        clock = [T0]
        launcher = FakeLauncher()
        router = RouterService(
            registry=registry,
            launcher=launcher,
            github=AppGitHub(sandbox.app, bot_login=BOT),
            policies=lambda _e: fixed_policy(ROOT / ".squadron"),
            clock=lambda: clock[0],
        )
        events = Events(full_name=REPO)
        router.process(events.assigned(issue))
        router.process(events.pr(101, f"feat/issue-{issue}", f"Closes #{issue}"))
        agent_id = f"1-{issue}-feat-dev"

        # The agent comments through the gateway: GitHub applies it, then answers 502.
        gateway = gateway_for(
            registry, SqsEventQueue(url, client=sqs), None, app=sandbox.app, clock=lambda: clock[0]
        )
        agent = registry.get_agent(agent_id)
        assert agent is not None
        door = door_of(gateway, launcher, agent)
        door.begin()
        sandbox.faults.wanted[("POST", comments)] = "502"
        answer = door.github({"action": "comment", "number": issue, "body": "Progress: parser done."})
        assert "Progress: parser done." in answer["body"]
        said = [c["body"] for c in sandbox.comments(issue) if "Progress: parser done." in c["body"]]
        assert len(said) == 1, said

        # Four failing rounds of CI escalate: the router's notice and needs-human issue, each
        # applied by GitHub and then answered 502.
        sandbox.faults.wanted[("POST", comments)] = "502"
        sandbox.faults.wanted[("POST", f"/repos/{REPO}/issues")] = "502"
        for n in range(4):
            router.process(events.check(f"feat/issue-{issue}", "failure", prs=(101,), sha=f"sha{n}"))
        assert sandbox.faults.hit == [
            ("POST", comments),
            ("POST", comments),
            ("POST", f"/repos/{REPO}/issues"),
        ]  # every fault was met
        record = registry.get_agent(agent_id)
        assert record is not None and record.status is AgentStatus.ESCALATED
    notices = [c for c in sandbox.comments(issue) if "@octo-maintainer" in c["body"]]
    assert len(notices) == 1, [c["body"] for c in notices]
    issues = sandbox.github.repos[REPO].issues.values()
    assert len([i for i in issues if i["title"].startswith("needs-human")]) == 1


@pytest.mark.parametrize("fault", ["502", "drop", "refuse"])
def test_the_reconcilers_timeout_notice_appears_once_and_its_assignment_follows(
    sandbox: Sandbox, fault: ApiFault
) -> None:
    """A pull request waited past its flow's on_timeout: the reconciler labels it, says so and
    assigns the people the rule names. GitHub applies the notice and answers 502 (or drops the
    answer; or refuses it before applying it): the notice appears once, the PR is assigned all the
    same, and the next runs add nothing."""
    alice = sandbox.client("alice")
    issue = int(alice.create_issue("Export API", "CSV please")["number"])
    branch = f"feat/issue-{issue}"
    sandbox.push(branch, {"app.py": "print('v2')\n"})
    pr = int(
        sandbox.client().create_pull(title="Export", head=branch, base="main", body=f"Closes #{issue}")[
            "number"
        ]
    )
    flows = parse_files(
        {
            "config.yaml": "version: 1\n" + FIXED,
            "workflows/approval-flows.yaml": (
                "version: 1\ndefault:\n  required_reviews: []\n"
                "  escalation:\n    on_timeout: {hours: 48, label: needs-human, assign: [alice]}\n"
            ),
        }
    )
    opened = (datetime.now(UTC) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    state = sandbox.github.repos[REPO]
    state.pulls[pr]["created_at"] = state.issues[pr]["created_at"] = opened  # it has waited 72 h
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        router = RouterService(
            registry=registry,
            launcher=FakeLauncher(),
            github=AppGitHub(sandbox.app, bot_login=BOT),
            policies=lambda _e: routing_policy(flows),
            clock=lambda: T0,
        )
        events = Events(full_name=REPO)
        router.process(events.assigned(issue))
        router.process(events.pr(pr, branch, f"Closes #{issue}"))
        reconciler = ReconcilerService(
            registry=registry,
            queue=SqsEventQueue(url, client=sqs),
            reader=lambda _i, _r: sandbox.client(),
            deliveries=None,
            completed=lambda _guid: True,
            policy_for=lambda _repo: routing_policy(flows),
            bot_login=BOT,
        )
        sandbox.faults.wanted[("POST", f"/repos/{REPO}/issues/{pr}/comments")] = fault
        report = reconciler.run()
        assert sandbox.faults.hit == [("POST", f"/repos/{REPO}/issues/{pr}/comments")]
        assert report.timed_out == [f"{REPO}#{pr}"], report.problems
        assert reconciler.run().timed_out == []  # labelled: told already
    notices = [c for c in sandbox.comments(pr) if "on_timeout of 48 h" in c["body"]]
    assert len(notices) == 1, [c["body"] for c in notices]
    pull = sandbox.client().get_issue(pr)  # as GitHub shows it
    assert [label["name"] for label in pull["labels"]] == ["needs-human"]
    assert [person["login"] for person in pull["assignees"]] == ["alice"]


class HeldFaults(FailFirst):
    """:class:`FailFirst` whose request of ``held`` waits, on the wire, until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.held: tuple[str, str] | None = None
        self.reached = threading.Event()
        self.released = threading.Event()

    def __call__(self, method: str, path: str) -> ApiFault | None:
        if (method, path.split("?", maxsplit=1)[0]) == self.held and not self.reached.is_set():
            self.reached.set()
            assert self.released.wait(60), "the test never released the held request"
        return super().__call__(method, path)


def test_a_router_run_past_its_timeout_is_stopped_and_its_event_carried_out_once(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local router's runs are bounded as the router Lambda's (squadron.local.invocation): the
    run that escalates is still waiting for GitHub's answer to its notice when its time is up. It
    is abandoned and stopped where it is (its batch is not deleted), GitHub applies the notice and
    answers 502 to nobody, and its claim on the decision stays until it lapses. The redelivery,
    after events.fifo's visibility timeout, carries out the rest: the notice and the needs-human
    issue appear once, the agent is escalated once."""
    alice = sandbox.client("alice")
    issue = alice.create_issue("Export API", "CSV please")["number"]
    comments = f"/repos/{REPO}/issues/{issue}/comments"
    faults = HeldFaults()
    monkeypatch.setattr(sandbox.github, "api_fault", faults)
    # The router's client waits for GitHub's answer longer than its run may last: what ends the
    # run is its timeout, not the client's.
    http = GitHubHttp(
        base_url=sandbox.github.base_url,
        sleep=lambda s: None,
        throttle=Throttle(sleep=lambda s: None),
        timeout=60.0,
    )
    private, _ = app_private_key()
    app = GitHubApp(app_id=sandbox.app.app_id, http=http, private_key=lambda: private)
    with mock_aws():
        registry, _sqs, _url = registry_and_queue()
        clock = [T0]
        router = RouterService(
            registry=registry,
            launcher=FakeLauncher(),
            github=AppGitHub(app, bot_login=BOT),
            policies=lambda _e: fixed_policy(ROOT / ".squadron"),
            clock=lambda: clock[0],
        )
        events = Events(full_name=REPO)
        router.process(events.assigned(issue))
        router.process(events.pr(101, f"feat/issue-{issue}", f"Closes #{issue}"))
        for n in range(3):
            router.process(events.check(f"feat/issue-{issue}", "failure", prs=(101,), sha=f"sha{n}"))
        escalating = events.check(f"feat/issue-{issue}", "failure", prs=(101,), sha="sha3")
        faults.held = ("POST", comments)  # the notice waits on the wire ...
        faults.wanted[("POST", comments)] = "502"  # ... and once released: applied, then 502
        run = invoke(lambda: router.process(escalating), timeout=5.0)
        assert run.abandoned and faults.reached.is_set()  # it was waiting on GitHub when stopped
        faults.released.set()
        assert run.ended.wait(60)
        assert isinstance(run.error, InvocationTimeout)  # stopped: nothing of its own ran after
        assert faults.hit == [("POST", comments)]
        assert len([c for c in sandbox.comments(issue) if "@octo-maintainer" in c["body"]]) == 1
        issues = sandbox.github.repos[REPO].issues.values()
        assert not [i for i in issues if i["title"].startswith("needs-human")]  # the rest: not yet

        clock[0] += EVENTS_VISIBILITY  # the batch comes back; the dead run's claim has lapsed
        router.process(escalating)
        record = registry.get_agent(f"1-{issue}-feat-dev")
        assert record is not None and record.status is AgentStatus.ESCALATED
    notices = [c for c in sandbox.comments(issue) if "@octo-maintainer" in c["body"]]
    assert len(notices) == 1, [c["body"] for c in notices]
    issues = sandbox.github.repos[REPO].issues.values()
    assert len([i for i in issues if i["title"].startswith("needs-human")]) == 1


# --- lookups: every page, whatever a person changed afterwards ---------------------------------


def _app_github(sandbox: Sandbox) -> AppGitHub:
    return AppGitHub(sandbox.app, bot_login=BOT)


SINCE = datetime.now(UTC) - timedelta(minutes=5)


def _many_comments_then_the_apps(sandbox: Sandbox, strangers: int) -> int:
    number = int(sandbox.client("alice").create_issue("Busy", "thread")["number"])
    for n in range(130):
        sandbox.client("mallory").comment(number, f"noise {n}")
    noise = sandbox.comments(number)[-1]
    thread = sandbox.github.repos[REPO].comments[number]
    thread.extend({**noise, "id": 10_000_000 + n} for n in range(strangers - 130))  # quicker than posting
    sandbox.client().comment(number, marked("The App's words", KEY))
    return number


def _many_issues_then_the_apps(sandbox: Sandbox) -> int:
    app = sandbox.client()
    app.create_issue("needs-human: #1", marked("Please decide", KEY), labels=["needs-human"])
    for n in range(120):  # other needs-human issues, opened later: the App's is on the second page
        sandbox.client("alice").create_issue(f"later {n}", "newer issue", labels=["needs-human"])
    return 1


def test_a_comment_past_the_first_page_is_found(sandbox: Sandbox) -> None:
    number = _many_comments_then_the_apps(sandbox, 130)
    assert _app_github(sandbox).find_comment(77, REPO, number, KEY, SINCE)
    assert not _app_github(sandbox).find_comment(77, REPO, number, "f" * 24, SINCE)


def test_a_comment_past_what_a_lookup_may_read_is_not_called_missing(sandbox: Sandbox) -> None:
    """A stranger floods the thread: the lookup says it could not tell, never "not there"
    (which would post the App's comment a second time)."""
    number = _many_comments_then_the_apps(sandbox, MAX_LISTED + 5)
    with pytest.raises(LookupIncompleteError):
        _app_github(sandbox).find_comment(77, REPO, number, KEY, SINCE)


def test_an_issue_past_the_first_page_is_found(sandbox: Sandbox) -> None:
    number = _many_issues_then_the_apps(sandbox)
    assert _app_github(sandbox).find_issue(77, REPO, KEY, ("needs-human",), SINCE) == number


EDITS: list[tuple[str, Callable[[Sandbox, int], object]]] = [
    (
        "its text reworded",
        lambda s, n: s.client("alice").update_issue(n, title="Reworded", body=_reworded(s, n)),
    ),
    ("its label taken off", lambda s, n: s.client("alice").remove_label(n, "needs-human")),
]


def _reworded(sandbox: Sandbox, number: int) -> str:
    body = str(sandbox.github.repos[REPO].issues[number]["body"])
    return body.replace("Please decide", "A person rewrote this")


@pytest.mark.parametrize("edit", [e[1] for e in EDITS], ids=[e[0] for e in EDITS])
def test_an_issue_a_person_changed_afterwards_is_found(
    sandbox: Sandbox, edit: Callable[[Sandbox, int], object]
) -> None:
    number = int(
        sandbox.client().create_issue(
            "needs-human: #1", marked("Please decide", KEY), labels=["needs-human"]
        )["number"]
    )
    edit(sandbox, number)
    assert _app_github(sandbox).find_issue(77, REPO, KEY, ("needs-human",), SINCE) == number


def test_a_comment_a_person_reworded_is_found(sandbox: Sandbox) -> None:
    number = int(sandbox.client("alice").create_issue("Thread", "x")["number"])
    comment = sandbox.client().comment(number, marked("The App's words", KEY))
    body = str(comment["body"]).replace("The App's words", "A maintainer's edit")
    sandbox.app.http.request(
        "PATCH",
        f"/repos/{REPO}/issues/comments/{comment['id']}",
        token="human:alice",
        throttle_key="alice",
        json={"body": body},
    )
    assert "A maintainer's edit" in sandbox.comments(number)[0]["body"]
    assert _app_github(sandbox).find_comment(77, REPO, number, KEY, SINCE)


def test_a_pull_request_whose_marker_a_person_removed_is_found_by_its_head(sandbox: Sandbox) -> None:
    sandbox.push("feat/issue-1", {"app.py": "print('v2')\n"})
    pr = sandbox.client().create_pull(
        title="Export", head="feat/issue-1", base="main", body=marked("Closes #1", KEY)
    )
    sandbox.client("alice").update_issue(pr["number"], body="Closes #1 (edited by a person)")
    found = sandbox.client().find_pull("feat/issue-1", KEY, BOT, SINCE)
    assert found is not None and found["number"] == pr["number"]
    assert sandbox.client().find_pull("feat/issue-2", KEY, BOT, SINCE) is None


# --- the transport against the sandbox's faults -------------------------------------------------


@pytest.mark.parametrize("fault", ["502", "drop", "hang"])
def test_a_comment_github_applied_without_answering_is_posted_once(sandbox: Sandbox, fault: ApiFault) -> None:
    number = int(sandbox.client("alice").create_issue("Thread", "x")["number"])
    sandbox.faults.wanted[("POST", f"/repos/{REPO}/issues/{number}/comments")] = fault
    _app_github(sandbox).comment(77, REPO, number, "Picked up.", "framework", key=KEY)
    (comment,) = sandbox.comments(number)  # applied once, found by its key, not sent again
    assert comment["body"].endswith(marked("Picked up.", KEY))


def test_a_write_refused_before_it_was_applied_is_sent_again(sandbox: Sandbox) -> None:
    number = int(sandbox.client("alice").create_issue("Thread", "x")["number"])
    sandbox.faults.wanted[("POST", f"/repos/{REPO}/issues/{number}/comments")] = "refuse"
    _app_github(sandbox).comment(77, REPO, number, "Picked up.", "framework", key=KEY)
    assert len(sandbox.comments(number)) == 1  # the lookup found nothing: sent again, once


# --- merges ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["502", "drop", "refuse"])
def test_a_merge_whose_answer_was_lost_still_announces_it_and_deletes_the_branch(
    sandbox: Sandbox, fault: ApiFault
) -> None:
    """Applied and answered 502 or dropped: read back as merged. Refused before it was applied
    (503, nothing done): the pull request is still open, so the merge is sent again."""
    head = sandbox.push("feat/issue-1", {"app.py": "print('v2')\n"})
    pr = sandbox.client().create_pull(title="Export", head="feat/issue-1", base="main", body="Closes #1")
    announced: list[EventEnvelope] = []
    gate = MergeGate(
        client=lambda _i, _r: sandbox.client(),
        config_for=lambda _r: MERGE_AT_ONCE,
        bot_login=BOT,
        announce=announced.append,
    )
    sandbox.faults.wanted[("PUT", f"/repos/{REPO}/pulls/{pr['number']}/merge")] = fault
    outcome = gate.evaluate(77, REPO, pr["number"])
    assert outcome.merged, outcome.detail
    merged = sandbox.github.repos[REPO].pulls[pr["number"]]
    assert merged["merged"] and merged["merged_by"]["login"] == BOT
    (closed,) = announced  # at once, from what GitHub says, under the id a normal merge has
    assert (closed.event, closed.action, closed.origin) == ("pull_request", "closed", "squadron")
    assert closed.pull_request is not None and closed.pull_request.merged
    assert closed.delivery_id.endswith(str(merged["merge_commit_sha"])[:12])
    assert sandbox.github.repos[REPO].store.sha("refs/heads/feat/issue-1") is None  # deleted at once
    assert head != merged["merge_commit_sha"]


MERGE_AT_ONCE = parse_files(
    {
        "config.yaml": "version: 1\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  required_reviews: []\n"
            "  merge_policy: {method: squash, auto_merge: true, delete_branch: true}\n"
        ),
    }
)
