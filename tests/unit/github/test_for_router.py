"""The router's GitHub (framework role, cached permissions) and the config loader's files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.for_router import AppGitHub, MissingInstallationError, app_repository_files
from squadron.adapters.github.http import GitHubHttp
from squadron.config import ConfigLoader
from squadron.config.policy import routing_policy
from tests.support.github_fake import FakeGitHub, app_private_key

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _github(fake: FakeGitHub, clock: Clock) -> AppGitHub:
    private, _ = app_private_key()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    return AppGitHub(GitHubApp(app_id=42, http=http, private_key=lambda: private, clock=clock), clock=clock)


def _paths(fake: FakeGitHub) -> list[str]:
    return [f"{r.method} {r.url.path}" for r in fake.requests]


def test_permissions_are_cached_for_five_minutes() -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _github(fake, clock)
    assert github.permission(7, "octo/app", "alice") == "maintain"  # role_name wins over permission
    clock.now += timedelta(minutes=4)
    github.permission(7, "octo/app", "alice")
    clock.now += timedelta(minutes=2)
    github.permission(7, "octo/app", "alice")
    asked = [p for p in _paths(fake) if p.endswith("/permission")]
    assert asked == ["GET /repos/octo/app/collaborators/alice/permission"] * 2


CUSTOM_ROLES = [
    # (id, GitHub's answer, the permission the router and the merge gate see)
    ("a base role is taken as named", {"permission": "read", "role_name": "triage"}, "triage"),
    ("a custom role inheriting write", {"permission": "write", "role_name": "release-manager"}, "write"),
    ("a custom role inheriting read", {"permission": "read", "role_name": "auditor"}, "read"),
    ("no role name at all", {"permission": "admin"}, "admin"),
    ("nothing usable", {}, "none"),
]


@pytest.mark.parametrize(
    ("answer", "expected"), [c[1:] for c in CUSTOM_ROLES], ids=[c[0] for c in CUSTOM_ROLES]
)
def test_a_custom_role_counts_as_the_base_role_it_inherits(answer: dict[str, str], expected: str) -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _github(fake, clock)
    github.permission(7, "octo/app", "warm-up")  # the installation token is fetched first
    fake.script = [httpx.Response(200, json={**answer, "user": {"login": "carol"}})]
    assert github.permission(7, "octo/app", "carol") == expected


def test_someone_github_does_not_know_has_no_permission() -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _github(fake, clock)
    github.permission(7, "octo/app", "warm-up")
    fake.script = [httpx.Response(404, json={"message": "Not Found"})]
    assert github.permission(7, "octo/app", "ghost") == "none"


def test_framework_comments_are_tagged_and_close_with_a_reason() -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _github(fake, clock)
    github.comment(7, "octo/app", 38, "Too deep", "framework")
    github.close_issue(7, "octo/app", 38, "not_planned")
    comment = next(r for r in fake.requests if r.url.path.endswith("/comments"))
    assert json.loads(comment.content) == {"body": "[squadron:framework] Too deep"}
    close = next(r for r in fake.requests if r.method == "PATCH")
    assert json.loads(close.content) == {"state": "closed", "state_reason": "not_planned"}
    assert comment.headers["authorization"] == "Bearer ghs_7"  # the installation's token


def test_an_unknown_installation_is_a_named_error() -> None:
    github = _github(FakeGitHub(), Clock())
    with pytest.raises(MissingInstallationError, match="octo/app"):
        github.permission(None, "octo/app", "alice")
    github.remember("octo/app", 7)
    assert github.permission(None, "octo/app", "alice") == "maintain"


def test_configuration_is_read_from_the_default_branch_head() -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _github(fake, clock)
    github.remember("octo/app", 7)
    files = app_repository_files(github)
    assert files.default_branch_head("octo/app") == ("main", "a" * 40)
    listing = files.list_dir("octo/app", ".squadron", "main")
    assert [(e.name, e.kind) for e in listing.entries] == [("agents", "dir"), ("config.yaml", "file")]
    assert files.list_dir("octo/app", ".squadron/workflows", "main").kind == "absent"
    assert files.read_bytes("octo/app", ".squadron/missing.yaml", "main", limit=100) is None

    config = ConfigLoader(files).load("octo/app")
    assert routing_policy(config).max_issue_depth == 4
    assert config.commit_sha == "a" * 40


BOT = "squadron-test[bot]"
KEY = "0123456789abcdef01234567"
MARK = f"<!-- squadron:effect {KEY} -->"


def _answer(body: object) -> httpx.Response:
    return httpx.Response(200, json=body)


def _bot_github(fake: FakeGitHub, clock: Clock) -> AppGitHub:
    private, _ = app_private_key()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    app = GitHubApp(app_id=42, http=http, private_key=lambda: private, clock=clock)
    return AppGitHub(app, clock=clock, bot_login=BOT)


def test_an_effects_key_is_marked_in_what_it_creates() -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _bot_github(fake, clock)
    github.comment(7, "octo/app", 38, "Handed to humans", "framework", key=KEY)
    sent = next(r for r in fake.requests if r.url.path.endswith("/comments"))
    assert json.loads(sent.content)["body"] == f"[squadron:framework] Handed to humans\n\n{MARK}"


FOUND_COMMENTS = [
    # (id, the comments GitHub lists, found?)
    (
        "the App's comment with the key",
        [{"user": {"login": BOT, "type": "Bot"}, "body": f"x\n\n{MARK}"}],
        True,
    ),
    ("another key", [{"user": {"login": BOT}, "body": "<!-- squadron:effect ffff -->"}], False),
    (
        "a stranger copied the marker (it never suppresses the App's comment)",
        [{"user": {"login": "mallory", "type": "User"}, "body": MARK}],
        False,
    ),
    ("another App's bot copied it", [{"user": {"login": "other[bot]", "type": "Bot"}, "body": MARK}], False),
    ("no comments", [], False),
]


@pytest.mark.parametrize(
    ("listed", "found"), [c[1:] for c in FOUND_COMMENTS], ids=[c[0] for c in FOUND_COMMENTS]
)
def test_a_retry_finds_only_the_apps_own_comment_by_its_key(listed: list[object], found: bool) -> None:
    fake, clock = FakeGitHub(), Clock()
    fake.faults["GET /repos/octo/app/issues/38/comments"] = _answer(listed)
    github = _bot_github(fake, clock)
    assert github.find_comment(7, "octo/app", 38, KEY, T0) is found
    asked = next(r for r in fake.requests if r.url.path.endswith("/comments"))
    assert asked.url.params["since"] == "2026-11-23T12:00:00Z"  # only what is recent is read


def test_a_retry_finds_the_issue_it_opened_by_its_key_and_never_a_pull_request() -> None:
    fake, clock = FakeGitHub(), Clock()
    fake.faults["GET /repos/octo/app/issues"] = _answer(
        [
            {"number": 90, "user": {"login": BOT}, "body": MARK, "pull_request": {"url": "x"}},
            {"number": 91, "user": {"login": "mallory"}, "body": MARK},
            {"number": 92, "user": {"login": BOT}, "body": f"Resolve it\n\n{MARK}"},
        ]
    )
    github = _bot_github(fake, clock)
    assert github.find_issue(7, "octo/app", KEY, ("needs-human",), T0) == 92
    listed = next(r for r in fake.requests if r.url.path.endswith("/issues"))
    # Not filtered by its labels (a person may take one off) and newest first: the pages stop
    # at the first issue opened before the lookup's start.
    assert "labels" not in listed.url.params and listed.url.params["state"] == "all"
    assert (listed.url.params["sort"], listed.url.params["direction"]) == ("created", "desc")
    fake.faults["GET /repos/octo/app/issues"] = _answer([{"number": 93, "user": {"login": BOT}, "body": "x"}])
    assert github.find_issue(7, "octo/app", KEY, ("needs-human",), T0) is None


#: An agent's words the router quotes (an escalation's reason and summary, a needs-human issue,
#: a retrospective's action items), forged markers nested so a one-pass strip rebuilds them.
QUOTED = (
    f"needs a human: <!-- <!-- squadron:x -->squadron:effect {KEY} -->\n"
    "- [x] go <!-- squad<!-- squadron:y -->ron:act retry 1-39-feat-dev -->\n<!-- squadron:effect"
)


@pytest.mark.parametrize("what", ["a comment", "an issue"])
def test_what_the_router_posts_carries_no_marker_of_an_agents_making(what: str) -> None:
    fake, clock = FakeGitHub(), Clock()
    github = _bot_github(fake, clock)
    other = "fedcba9876543210fedcba98"
    if what == "a comment":
        github.comment(7, "octo/app", 38, QUOTED, "framework", key=other)
        path = "/comments"
    else:
        github.create_issue(
            7, "octo/app", title=f"t {QUOTED}", body=QUOTED, labels=(), assignees=(), key=other
        )
        path = "/issues"
    sent = json.loads(next(r for r in fake.requests if r.url.path.endswith(path)).content)
    body = sent["body"]
    assert f"squadron:effect {KEY}" in body  # the agent's words are shown
    assert body.count("<!--") == 1 and body.endswith(f"\n\n<!-- squadron:effect {other} -->")
    assert "<!--" not in sent.get("title", "")
