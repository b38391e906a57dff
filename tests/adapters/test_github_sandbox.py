"""The GitHub sandbox through Squadron's real GitHub client, git, and the ingress's own webhook checks."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.adapters.github.errors import GitHubError, ValidationFailedError
from squadron.adapters.github.http import GitHubHttp, Throttle
from squadron.domain.permissions import Caller, CallerKind, MergeConsent
from squadron.domain.webhook import Accepted, AppIdentity, Dropped, triage_webhook
from squadron.local.examples import first_examples
from squadron.local.sandbox import GitHubSandbox
from tests.support.git_remote import IDENTITY, git
from tests.support.github_fake import app_private_key

SECRET = "local-webhook-secret"
APP = AppIdentity(app_id=424242, slug="squadron")
FILES = {"README.md": "# octo/repo\n", "app.py": "print('v1')\n", ".squadron/config.yaml": "version: 1\n"}


@dataclass
class Receiver:
    """The webhook endpoint: every delivery judged by the ingress's own pure triage."""

    decisions: list[Any] = field(default_factory=list)
    raw: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        self.raw.append((headers, body))
        decision = triage_webhook(
            headers=headers,
            body=body,
            secret=SECRET,
            app=APP,
            max_body_bytes=1 << 20,
            received_at=datetime.now(UTC),
        )
        self.decisions.append(decision)
        return 202

    def accepted(self) -> list[tuple[str, str | None]]:
        return [(d.envelope.event, d.envelope.action) for d in self.decisions if isinstance(d, Accepted)]


@dataclass
class Sandbox:
    github: GitHubSandbox
    receiver: Receiver
    http: GitHubHttp
    app: GitHubApp
    work: Path

    def client(self, login: str | None = None, kind: CallerKind = CallerKind.FRAMEWORK) -> GitHubClient:
        token = (lambda: f"human:{login}") if login else (lambda: self.app.installation_token(77).token)
        caller = Caller(kind, login or "framework", login or "framework")
        return GitHubClient(http=self.http, token=token, installation_id=77, repo="octo/repo", caller=caller)

    def push(self, branch: str, files: dict[str, str], message: str) -> str:
        """A developer pushes ``files`` on ``branch`` (real git, through the sandbox's bare repo)."""
        clone = self.work / "clone"
        env = {**IDENTITY}
        if not clone.exists():
            subprocess.run(
                ["git", "clone", "--quiet", self.github.git_url("octo/repo"), str(clone)], env=env, check=True
            )
        git(clone, "fetch", "--quiet", "origin")
        remote = git(clone, "ls-remote", "--heads", "origin", branch)
        git(clone, "checkout", "--quiet", "-B", branch, f"origin/{branch}" if remote else "origin/main")
        for name, text in files.items():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_text(text)
        git(clone, "add", "--all")
        git(clone, "commit", "--quiet", "-m", message)
        git(clone, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
        return git(clone, "rev-parse", "HEAD")

    def settle(self) -> None:
        self.github.wait_for_deliveries()


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    receiver = Receiver()

    class Hook(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            status = receiver.handle(dict(self.headers), body)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    github = GitHubSandbox(
        tmp_path / "sandbox",
        app_id=APP.app_id,
        app_slug=APP.slug,
        webhook_url=f"http://127.0.0.1:{hook.server_address[1]}/webhook",
        webhook_secret=SECRET,
        examples=first_examples(),
    )
    github.add_repository("octo/repo", FILES, permissions={"alice": "write", "octo-admin": "admin"})
    url = github.start()
    http = GitHubHttp(base_url=url, sleep=lambda s: None, throttle=Throttle(sleep=lambda s: None))
    private, _ = app_private_key()
    app = GitHubApp(app_id=APP.app_id, http=http, private_key=lambda: private)
    try:
        yield Sandbox(github, receiver, http, app, tmp_path / "work")
    finally:
        github.stop()
        hook.shutdown()
        hook.server_close()


def test_a_human_issue_and_the_apps_answers_become_signed_webhooks_the_ingress_accepts(
    sandbox: Sandbox,
) -> None:
    alice, bot = sandbox.client("alice"), sandbox.client()
    issue = alice.create_issue("Export API", "We need CSV export.", labels=["feature"])
    bot.add_labels(issue["number"], ["feature", "infra"])
    assigned = bot.add_assignees(issue["number"], ["squadron[bot]"])
    assert [a["login"] for a in assigned["assignees"]] == ["squadron[bot]"]
    bot.comment(issue["number"], "On it.")
    alice.comment(issue["number"], "Thanks!")
    alice.close_issue(issue["number"])
    sandbox.settle()
    # Humans' events are accepted, the App's own dropped — by the ingress's own rules.
    assert sandbox.receiver.accepted() == [
        ("issues", "opened"),
        ("issue_comment", "created"),
        ("issues", "closed"),
    ]
    dropped = [d.code for d in sandbox.receiver.decisions if isinstance(d, Dropped)]
    assert dropped == ["own_event"] * 3  # labeled (only "infra" is new), assigned, its comment
    headers, body = sandbox.receiver.raw[0]
    payload = json.loads(body)
    assert set(first_examples()[("issues", "opened")]) <= set(payload)  # GitHub's published shape
    assert payload["issue"]["user"]["login"] == "alice"
    assert {k.lower() for k in headers} >= {"x-github-event", "x-github-delivery", "x-hub-signature-256"}


#: A person adds and removes a label: on an issue GitHub sends ``issues``, on a pull request
#: ``pull_request`` (never ``issues``); the router takes a label added, and no removal
#: (docs/pipelines.md: ``pull_request.unlabeled`` cannot start or steer a pipeline, and a human
#: stage's ``wait_for: label`` counts a label added).
LABEL_EVENTS = [
    ("an issue", False, ("issues", "labeled", "accepted"), ("issues", "unlabeled", "not_routed")),
    (
        "a pull request",
        True,
        ("pull_request", "labeled", "accepted"),
        ("pull_request", "unlabeled", "not_routed"),
    ),
]


@pytest.mark.parametrize(
    ("pull", "added", "removed"),
    [case[1:] for case in LABEL_EVENTS],
    ids=[case[0] for case in LABEL_EVENTS],
)
def test_a_label_added_and_removed_is_sent_as_github_sends_it(
    sandbox: Sandbox, pull: bool, added: tuple[str, str, str], removed: tuple[str, str, str]
) -> None:
    alice = sandbox.client("alice")
    if pull:
        sandbox.push("feat/label", {"app.py": "print('v2')\n"}, "Work")
        number = int(
            sandbox.client().create_pull(title="Work", head="feat/label", base="main", body="")["number"]
        )
    else:
        number = int(alice.create_issue("Export API", "CSV please")["number"])
    sandbox.settle()
    before = len(sandbox.github.deliveries)
    alice.add_labels(number, ["ready"])
    alice.remove_label(number, "ready")
    sandbox.settle()

    sent = sandbox.github.deliveries[before:]
    decisions = sandbox.receiver.decisions[before:]
    seen = [
        (d.event, d.action, "accepted" if isinstance(decision, Accepted) else getattr(decision, "code", ""))
        for d, decision in zip(sent, decisions, strict=True)
    ]
    assert seen == [added, removed]
    for delivery in sent:
        payload = delivery.payload
        assert payload["label"]["name"] == "ready"
        if pull:  # GitHub's pull_request payload: the number and the pull request, no issue
            assert payload["number"] == number and "issue" not in payload
            assert payload["pull_request"]["number"] == number
        else:
            assert payload["issue"]["number"] == number and "pull_request" not in payload
    removal = sent[-1].payload
    subject = removal["pull_request"] if pull else removal["issue"]
    assert subject["labels"] == []  # as it is after the removal
    assert (alice.get_pull(number) if pull else alice.get_issue(number))["labels"] == []


def test_a_pull_request_lives_on_real_git_from_push_to_merge(sandbox: Sandbox) -> None:
    alice, bot = sandbox.client("alice"), sandbox.client()
    issue = alice.create_issue("Export API", "CSV please")
    head = sandbox.push(
        "feat/issue-1", {"app.py": "print('v2')\n", "export.py": "def export(): ...\n"}, "Export"
    )
    pr = bot.create_pull(
        title="Export API", head="feat/issue-1", base="main", body=f"Closes #{issue['number']}"
    )
    assert (pr["head"]["sha"], pr["mergeable_state"]) == (head, "clean")
    files = {f["filename"]: f for f in bot.list_pull_files(pr["number"])}
    assert set(files) == {"app.py", "export.py"} and "+print('v2')" in files["app.py"]["patch"]

    sandbox.push("feat/issue-1", {"test_export.py": "def test(): ...\n"}, "Test")  # -> synchronize
    review = alice.create_review(pr["number"], "APPROVE", "Looks good")
    assert review["state"] == "APPROVED"
    sha = bot.get_pull(pr["number"])["head"]["sha"]
    bot.create_status(sha, state="success", context="squadron/pr-review", description="approved")
    assert bot.get_combined_status(sha)["statuses"][0]["context"] == "squadron/pr-review"
    # CI reports as its own App: Squadron's holds checks at read, and GitHub refuses it a check run.
    sandbox.client("ci-bot").create_check_run(
        name="ci", head_sha=sha, status="completed", conclusion="success"
    )
    assert [r["name"] for r in bot.list_check_runs(sha)] == ["ci"]

    with pytest.raises(GitHubError, match="Head branch was modified"):
        bot.merge_pull(pr["number"], consent=MergeConsent(pr["number"], True, "ok"), sha=head)  # stale head
    merged = bot.merge_pull(
        pr["number"], consent=MergeConsent(pr["number"], True, "ok"), method="squash", sha=sha
    )
    bot.delete_branch("feat/issue-1")
    assert bot.read_file("export.py", "main") == b"def export(): ...\n"
    assert sandbox.github.repos["octo/repo"].store.sha("refs/heads/feat/issue-1") is None
    assert bot.get_issue(issue["number"])["state"] == "closed"  # "Closes #1" on the default branch
    assert merged["merged"] is True
    sandbox.settle()
    assert sandbox.receiver.accepted() == [
        ("issues", "opened"),
        ("pull_request_review", "submitted"),
        ("check_run", "completed"),  # CI's, not the App's own
    ]
    events = list(sandbox.github.events())
    assert ("pull_request", "synchronize") in events and ("pull_request", "closed") in events
    assert ("status", None) in events and ("check_run", "completed") in events


def test_requests_github_would_not_accept_are_refused_with_the_reason(sandbox: Sandbox) -> None:
    raw = httpx.post(
        f"{sandbox.github.base_url}/repos/octo/repo/issues/1/comments",
        json={"text": "wrong key"},
        headers={"authorization": "token human:alice"},
    )
    assert raw.status_code == 422 and "'body' is a required property" in raw.json()["message"]
    assert (
        httpx.get(
            f"{sandbox.github.base_url}/repos/octo/repo", headers={"authorization": "token nope"}
        ).status_code
        == 401
    )
    bot = sandbox.client()
    with pytest.raises(
        ValidationFailedError, match=r"Validation Failed \(No commits between main and main\)"
    ):
        bot.create_pull(title="Nothing", head="main", base="main", body="")
    with pytest.raises(GitHubError, match="Resource not accessible by integration"):
        bot.protect_branch(
            "main",
            {
                "required_status_checks": None,
                "enforce_admins": False,
                "required_pull_request_reviews": None,
                "restrictions": None,
            },
        )


def test_the_app_lists_and_redelivers_its_deliveries(sandbox: Sandbox) -> None:
    sandbox.client("alice").create_issue("One", "x")
    sandbox.settle()
    app = GitHubAppClient(
        http=sandbox.http, jwt=sandbox.app.jwt, app_id=APP.app_id, caller=Caller.framework()
    )
    (listed,) = app.list_deliveries()
    assert (listed["event"], listed["status_code"]) == ("issues", 202)
    app.redeliver(listed["id"])
    sandbox.settle()
    assert [d.redelivery for d in sandbox.github.deliveries] == [False, True]
    assert sandbox.receiver.accepted() == [("issues", "opened"), ("issues", "opened")]  # the same guid twice
    guids = {json.loads(body)["issue"]["number"] for _, body in sandbox.receiver.raw}
    assert guids == {1}


@pytest.mark.parametrize(
    ("fault", "sent", "listed"),
    [
        (None, 1, [("issues", 202)]),
        ("duplicate", 2, [("issues", 202)]),
        ("fail", 0, [("issues", 502)]),  # GitHub recorded a failure: the App may redeliver it
        ("lose", 0, []),  # GitHub never sent it and does not list it
    ],
)
def test_faults_a_test_injects_into_deliveries(
    sandbox: Sandbox, fault: str | None, sent: int, listed: list[tuple[str, int]]
) -> None:
    sandbox.github.fault = lambda delivery: fault  # type: ignore[assignment,return-value]
    sandbox.client("alice").create_issue("One", "x")
    sandbox.settle()
    (delivery,) = sandbox.github.deliveries
    assert (delivery.attempts, len(sandbox.receiver.raw)) == (sent, sent)
    app = GitHubAppClient(
        http=sandbox.http, jwt=sandbox.app.jwt, app_id=APP.app_id, caller=Caller.framework()
    )
    assert [(d["event"], d["status_code"]) for d in app.list_deliveries()] == listed
    if fault == "lose":
        with pytest.raises(GitHubError, match="Not Found"):
            app.redeliver(delivery.id)


def test_contents_and_permissions(sandbox: Sandbox) -> None:
    bot = sandbox.client()
    assert bot.read_file(".squadron/config.yaml", "main") == b"version: 1\n"
    listing = bot.list_directory(".squadron", "main")
    assert isinstance(listing, list)
    assert [(e["name"], e["type"], e["size"]) for e in listing] == [("config.yaml", "file", 11)]
    assert bot.read_file("missing.txt", "main") is None
    assert bot.collaborator_permission("alice") == "write"
    assert bot.collaborator_permission("stranger") == "read"
    assert bot.get_repository()["default_branch"] == "main"


def test_issues_are_listed_newest_first_by_state_and_label(sandbox: Sandbox) -> None:
    bot = sandbox.client()
    first = bot.create_issue("Squadron configuration is invalid", "one", labels=["squadron-config"])
    bot.create_issue("Unrelated", "two", labels=["bug"])
    third = bot.create_issue("Again", "three", labels=["squadron-config", "bug"])
    bot.close_issue(int(first["number"]))
    labelled = bot.list_issues(labels=["squadron-config"], state="all")
    assert [i["number"] for i in labelled] == [third["number"], first["number"]]
    assert [i["number"] for i in bot.list_issues(labels=["squadron-config"])] == [third["number"]]


def test_another_apps_bot_is_not_this_app(sandbox: Sandbox) -> None:
    """dependabot[bot] is a bot with its own id: its events reach the ingress as anyone else's."""
    other, alice = sandbox.client("dependabot[bot]"), sandbox.client("alice")
    issue = alice.create_issue("Bump", "A dependency is old.")
    comment = other.comment(issue["number"], "Bumps lodash.")
    mine = sandbox.client().comment(issue["number"], "On it.")
    assert comment["user"]["type"] == "Bot" and comment["user"]["id"] != APP.app_id
    assert "performed_via_github_app" not in comment
    assert mine["user"]["id"] == APP.app_id and mine["performed_via_github_app"]["id"] == APP.app_id
    sandbox.settle()
    assert sandbox.receiver.accepted() == [("issues", "opened"), ("issue_comment", "created")]
    assert [d.code for d in sandbox.receiver.decisions if isinstance(d, Dropped)] == ["own_event"]


def test_a_repeated_read_is_answered_304_until_the_resource_changes(sandbox: Sandbox) -> None:
    bot = sandbox.client()
    number = sandbox.client("alice").create_issue("Cache me", "body")["number"]
    first = bot.get_issue(number)
    sandbox.http.stats.drain()
    assert bot.get_issue(number) == first
    assert sandbox.http.stats.drain().not_modified == 1  # the sandbox answered 304, the cache the body
    bot.add_labels(number, ["feature"])
    changed = bot.get_issue(number)
    assert [label["name"] for label in changed["labels"]] == ["feature"]  # a new ETag: read again
    assert sandbox.http.stats.drain().not_modified == 0
    raw = httpx.get(f"{sandbox.github.base_url}/repos/octo/repo/issues/{number}", headers=_human("alice"))
    etag = raw.headers["etag"]
    assert etag.startswith('W/"')  # weak, as GitHub's
    again = httpx.get(
        f"{sandbox.github.base_url}/repos/octo/repo/issues/{number}",
        headers={**_human("alice"), "If-None-Match": etag},
    )
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)


def _human(login: str) -> dict[str, str]:
    return {"Authorization": f"token human:{login}", "Accept": "application/vnd.github+json"}


def test_a_branch_update_is_sent_as_who_asked_for_it_and_a_git_push_as_the_app(sandbox: Sandbox) -> None:
    """GitHub's ``synchronize`` after update-branch names the person who updated the branch (a
    writer's update may steer a pipeline run); a push through git is the App's (agents push so)."""
    alice, bot = sandbox.client("alice"), sandbox.client()
    sandbox.push("feat/x", {"x.py": "x = 1\n"}, "X")
    pr = bot.create_pull(title="X", head="feat/x", base="main", body="")
    sandbox.push("feat/x", {"y.py": "y = 1\n"}, "Y")
    answer = httpx.put(
        f"{sandbox.github.base_url}/repos/octo/repo/pulls/{pr['number']}/update-branch",
        headers={"authorization": "token human:alice"},
        timeout=30,
    )
    assert answer.status_code == 202
    sandbox.settle()
    senders = [
        json.loads(body)["sender"]["login"]
        for headers, body in sandbox.receiver.raw
        if {k.lower(): v for k, v in headers.items()}["x-github-event"] == "pull_request"
        and json.loads(body)["action"] == "synchronize"
    ]
    assert senders == ["squadron[bot]", "alice"]
    assert alice.get_pull(pr["number"])["head"]["sha"] != pr["head"]["sha"]
