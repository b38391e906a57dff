"""Retries, rate limits, the per-installation throttle, pagination and error mapping."""

from __future__ import annotations

import httpx
import pytest

from squadron.adapters.github.errors import (
    AuthenticationError,
    ForbiddenError,
    GitHubConflictError,
    GitHubError,
    GitHubUnavailableError,
    NotFoundError,
    RateLimitedError,
    ValidationFailedError,
)
from squadron.adapters.github.http import GitHubHttp, Throttle
from tests.support.github_fake import FakeGitHub

NOW = 1_800_000_000.0
OK = httpx.Response(200, json={"ok": True})


def r(
    status: int, headers: dict[str, str] | None = None, message: str = "x", **extra: object
) -> httpx.Response:
    return httpx.Response(status, json={"message": message, **extra}, headers=headers or {})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _http(fake: FakeGitHub, clock: Clock) -> GitHubHttp:
    return GitHubHttp(
        transport=fake.transport(),
        sleep=clock.sleep,
        wall_clock=lambda: NOW,
        throttle=Throttle(clock=clock, sleep=clock.sleep),
    )


@pytest.mark.parametrize(
    ("answers", "sleeps"),
    [
        ([OK], []),
        ([r(429, {"retry-after": "7"}), OK], [7.0]),
        ([r(403, {"retry-after": "30"}, "secondary rate limit"), OK], [30.0]),
        ([r(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 120)}), OK], [121.0]),
        ([r(403, {}, "You have exceeded a secondary rate limit"), OK], [60.0]),
        ([r(403, {}, "secondary rate limit"), r(403, {}, "secondary rate limit"), OK], [60.0, 120.0]),
        ([r(502), r(503), OK], [2.0, 4.0]),
    ],
    ids=[
        "ok",
        "429 retry-after",
        "403 retry-after",
        "primary limit reset",
        "secondary",
        "secondary twice",
        "5xx",
    ],
)
def test_waits_as_github_documents(answers: list[httpx.Response], sleeps: list[float]) -> None:
    fake, clock = FakeGitHub(script=list(answers)), Clock()
    response = _http(fake, clock).request("GET", "/x", token="t", throttle_key="i")
    assert response.status_code == 200
    assert clock.sleeps == sleeps
    assert len(fake.requests) == len(answers)


@pytest.mark.parametrize(
    ("answers", "error", "requests"),
    [
        ([r(500)] * 4, GitHubUnavailableError, 4),
        ([r(429, {"retry-after": "1"})] * 4, RateLimitedError, 4),
    ],
    ids=["5xx bounded", "rate limit bounded"],
)
def test_retries_are_bounded(answers: list[httpx.Response], error: type[GitHubError], requests: int) -> None:
    fake, clock = FakeGitHub(script=list(answers)), Clock()
    with pytest.raises(error):
        _http(fake, clock).request("GET", "/x", token="t", throttle_key="i")
    assert len(fake.requests) == requests


def test_network_failures_are_retried_then_named() -> None:
    calls = 0

    def broken(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("connection refused", request=request)

    clock = Clock()
    http = GitHubHttp(
        transport=httpx.MockTransport(broken),
        sleep=clock.sleep,
        throttle=Throttle(clock=clock, sleep=clock.sleep),
    )
    with pytest.raises(GitHubUnavailableError, match="network failure: connection refused"):
        http.request("GET", "/x", token="t", throttle_key="i")
    assert calls == 4


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, AuthenticationError),
        (403, ForbiddenError),
        (404, NotFoundError),
        (409, GitHubConflictError),
        (422, ValidationFailedError),
        (418, GitHubError),
    ],
)
def test_errors_are_named_and_carry_githubs_words(status: int, error: type[GitHubError]) -> None:
    answer = r(
        status,
        message="Resource not accessible by integration",
        documentation_url="https://docs",
        errors=[{"code": "invalid"}],
    )
    fake, clock = FakeGitHub(script=[answer]), Clock()
    with pytest.raises(error) as caught:
        _http(fake, clock).request("POST", "/repos/o/r/issues", token="t", throttle_key="i", json={})
    assert type(caught.value) is error
    assert caught.value.status == status
    assert caught.value.message == "Resource not accessible by integration"
    assert (
        str(caught.value)
        == f"POST /repos/o/r/issues: GitHub answered {status}: Resource not accessible by integration"
    )
    assert caught.value.documentation_url == "https://docs"
    assert caught.value.errors == [{"code": "invalid"}]
    assert clock.sleeps == []


def test_mutations_are_spaced_per_installation() -> None:
    clock = Clock()
    throttle = Throttle(clock=clock, sleep=clock.sleep, mutation_spacing=1.0)
    throttle.before("a", "POST")
    throttle.before("a", "GET")  # reads are not throttled
    throttle.before("b", "PATCH")  # another installation: no wait
    throttle.before("a", "PATCH")
    clock.now += 5
    throttle.before("a", "DELETE")
    assert clock.sleeps == [1.0]


def test_content_creation_is_capped_per_minute() -> None:
    clock = Clock()
    throttle = Throttle(clock=clock, sleep=clock.sleep, mutation_spacing=0.0, content_per_minute=80)
    for _ in range(80):
        throttle.before("a", "POST")
        clock.now += 0.1
    assert clock.sleeps == []
    throttle.before("a", "POST")  # the 81st within the minute waits for the first to age out
    assert clock.sleeps == [pytest.approx(52.0)]
    throttle.before("b", "POST")  # other installations are not affected
    assert len(clock.sleeps) == 1


def test_pagination_follows_next_links() -> None:
    pages = [
        httpx.Response(
            200,
            json=[1, 2],
            headers={
                "link": '<https://api.github.com/x?page=2&per_page=100>; rel="next", <https://api.github.com/x?page=3>; rel="last"'
            },
        ),
        httpx.Response(
            200, json=[3], headers={"link": '<https://api.github.com/x?page=3&per_page=100>; rel="next"'}
        ),
        httpx.Response(200, json=[4], headers={"link": '<https://api.github.com/x?page=1>; rel="first"'}),
    ]
    fake, clock = FakeGitHub(script=pages), Clock()
    items = list(_http(fake, clock).paginate("/x", token="t", throttle_key="i"))
    assert items == [1, 2, 3, 4]
    assert [str(q.url) for q in fake.requests] == [
        "https://api.github.com/x?per_page=100",
        "https://api.github.com/x?page=2&per_page=100",
        "https://api.github.com/x?page=3&per_page=100",
    ]


def test_every_request_names_the_api_version() -> None:
    fake, clock = FakeGitHub(script=[OK]), Clock()
    _http(fake, clock).request("GET", "/x", token="tok", throttle_key="i")
    headers = fake.requests[0].headers
    assert headers["x-github-api-version"] == "2022-11-28"
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["authorization"] == "Bearer tok"
