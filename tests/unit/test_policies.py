"""Per-repository routing policies: re-read after a TTL, and a bad config never stops routing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from squadron.config import ConfigLoader
from squadron.config.default_pipelines import default_pipelines
from squadron.domain.orchestration import DEFAULT_ORCHESTRATION, effective_pipelines
from squadron.domain.routing import RoutingPolicy
from squadron.shell.policies import PolicyCache
from tests.support.repo_files import FakeRepositoryFiles

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
DEPTH_5 = {"config.yaml": "version: 1\nmax_issue_depth: 5\n"}
DEPTH_7 = {"config.yaml": "version: 1\nmax_issue_depth: 7\n"}
BROKEN = {"config.yaml": "version: 1\nmax_issue_depht: 7\n"}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _cache(files: FakeRepositoryFiles, clock: Clock) -> PolicyCache:
    return PolicyCache(ConfigLoader(files), ttl=timedelta(seconds=60), clock=clock)


def test_policy_is_rechecked_only_after_the_ttl() -> None:
    files, clock = FakeRepositoryFiles(), Clock()
    files.commit("octo/app", "sha1", DEPTH_5)
    cache = _cache(files, clock)

    assert cache.policy_for("octo/app").max_issue_depth == 5
    files.commit("octo/app", "sha2", DEPTH_7)
    clock.now += timedelta(seconds=59)
    assert cache.policy_for("octo/app").max_issue_depth == 5
    assert files.calls["default_branch_head"] == 1
    clock.now += timedelta(seconds=1)
    assert cache.policy_for("octo/app").max_issue_depth == 7
    assert files.calls["default_branch_head"] == 2


def test_an_invalid_config_keeps_the_last_valid_policy_and_says_why() -> None:
    files, clock = FakeRepositoryFiles(), Clock()
    files.commit("octo/app", "sha1", DEPTH_5)
    cache = _cache(files, clock)
    cache.policy_for("octo/app")

    files.commit("octo/app", "sha2", BROKEN)
    clock.now += timedelta(minutes=2)
    assert cache.policy_for("octo/app").max_issue_depth == 5
    problem = cache.problem("octo/app")
    assert problem is not None
    assert "config.yaml" in problem
    assert "max_issue_depht" in problem

    files.commit("octo/app", "sha3", DEPTH_7)  # fixed: the problem goes away
    clock.now += timedelta(minutes=2)
    assert cache.policy_for("octo/app").max_issue_depth == 7
    assert cache.problem("octo/app") is None


def test_a_repository_that_was_never_valid_routes_with_the_defaults() -> None:
    files, clock = FakeRepositoryFiles(), Clock()
    files.commit("octo/app", "sha1", BROKEN)
    cache = _cache(files, clock)
    builtins = effective_pipelines({}, default_pipelines(), DEFAULT_ORCHESTRATION)
    assert cache.policy_for("octo/app") == RoutingPolicy(pipelines=builtins)
    assert cache.problem("octo/app") is not None


def test_repositories_are_independent() -> None:
    files, clock = FakeRepositoryFiles(), Clock()
    files.commit("octo/a", "a1", DEPTH_5)
    files.commit("octo/b", "b1", DEPTH_7)
    cache = _cache(files, clock)
    assert (cache.policy_for("octo/a").max_issue_depth, cache.policy_for("octo/b").max_issue_depth) == (5, 7)


APP_LOGINS = [
    # (case id, the repository's config.yaml, a warning expected): the deployment's App login wins
    ("no-config-yaml", {}, False),
    ("config-without-bot-login", DEPTH_5, False),
    ("config-naming-the-default-login", {"config.yaml": "version: 1\nbot_login: squadron[bot]\n"}, False),
    ("config-naming-another-login", {"config.yaml": "version: 1\nbot_login: other-app[bot]\n"}, True),
]


@pytest.mark.parametrize(
    ("files_at_head", "warned"), [row[1:] for row in APP_LOGINS], ids=[row[0] for row in APP_LOGINS]
)
def test_the_deployed_apps_login_is_every_policys_and_configs(
    files_at_head: dict[str, str], warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    files, clock = FakeRepositoryFiles(), Clock()
    files.commit("octo/app", "sha1", files_at_head)
    cache = PolicyCache(
        ConfigLoader(files, bot_login="acme-bot[bot]"), ttl=timedelta(seconds=60), clock=clock
    )
    assert cache.policy_for("octo/app").bot_login == "acme-bot[bot]"
    assert cache.config_for("octo/app").config.bot_login == "acme-bot[bot]"
    assert [r.getMessage() for r in caplog.records if "bot_login" in r.getMessage()] == (
        [
            "bot_login other-app[bot] in .squadron/config.yaml is not the App's login acme-bot[bot]: the App's is used"
        ]
        if warned
        else []
    )


def test_the_defaults_of_a_broken_repository_act_as_the_deployed_app_too() -> None:
    files, clock = FakeRepositoryFiles(), Clock()
    files.commit("octo/app", "sha1", BROKEN)
    cache = PolicyCache(
        ConfigLoader(files, bot_login="acme-bot[bot]"), ttl=timedelta(seconds=60), clock=clock
    )
    assert cache.policy_for("octo/app").bot_login == "acme-bot[bot]"


class Notices:
    """Records what each repository is told; can refuse (GitHub down) a number of times."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str, str]] = []
        self.refuse = 0

    def __call__(self, repo: str, problems: object, branch: str, sha: str) -> None:
        if self.refuse:
            self.refuse -= 1
            raise RuntimeError("GitHub is down")
        self.told.append((repo, sha, "valid" if problems is None else "invalid"))


def test_a_broken_repository_is_paused_and_told_once_per_change() -> None:
    files, clock, notices = FakeRepositoryFiles(), Clock(), Notices()
    files.commit("octo/app", "sha1", DEPTH_5)
    cache = PolicyCache(ConfigLoader(files), ttl=timedelta(seconds=60), clock=clock, notices=notices)

    assert cache.pause_reason("octo/app") is None
    files.commit("octo/app", "sha2", BROKEN)
    clock.now += timedelta(minutes=2)
    assert cache.pause_reason("octo/app") == "the configuration on main at sha2 is invalid (1 problem)"
    files.commit("octo/app", "sha3", {"config.yaml": "version: 1\nmax_issue_depht: 7\n# same problem\n"})
    clock.now += timedelta(minutes=2)
    assert cache.pause_reason("octo/app") is not None  # the same problem at another commit: not told again
    files.commit("octo/app", "sha4", DEPTH_7)
    clock.now += timedelta(minutes=2)
    assert cache.pause_reason("octo/app") is None

    assert notices.told == [
        ("octo/app", "sha1", "valid"),  # first sight: an old notice may wait to be closed
        ("octo/app", "sha2", "invalid"),
        ("octo/app", "sha4", "valid"),
    ]


def test_a_notice_that_could_not_be_posted_is_tried_again_at_the_next_check() -> None:
    files, clock, notices = FakeRepositoryFiles(), Clock(), Notices()
    files.commit("octo/app", "sha1", BROKEN)
    cache = PolicyCache(ConfigLoader(files), ttl=timedelta(seconds=60), clock=clock, notices=notices)
    notices.refuse = 1

    assert cache.pause_reason("octo/app") is not None  # routing is not held up by the notice
    assert notices.told == []
    clock.now += timedelta(minutes=2)
    cache.policy_for("octo/app")
    assert notices.told == [("octo/app", "sha1", "invalid")]
