"""Retries, rate limits, the per-installation throttle, pagination and error mapping."""

from __future__ import annotations

import threading

import httpx
import pytest

from squadron.adapters.github.client import GitHubAppClient, GitHubClient
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
from squadron.domain.metrics import GitHubTraffic
from squadron.domain.permissions import Caller
from squadron.domain.repo_config.limits import MAX_LISTED
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


RESET = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 30)}


@pytest.mark.parametrize(
    ("answers", "error", "status", "sleeps"),
    [
        ([r(500, message="Server Error")] * 4, GitHubUnavailableError, 500, [2.0, 4.0, 8.0]),
        ([r(429, {"retry-after": "1"}, "slow down")] * 4, RateLimitedError, 429, [1.0, 1.0, 1.0]),
        ([r(403, RESET, "API rate limit exceeded")] * 4, RateLimitedError, 403, [31.0, 31.0, 31.0]),
        ([r(403, {}, "secondary rate limit")] * 4, RateLimitedError, 403, [60.0, 120.0, 240.0]),
    ],
    ids=["5xx bounded", "retry-after bounded", "primary limit bounded", "secondary limit bounded"],
)
def test_retries_are_bounded(
    answers: list[httpx.Response], error: type[GitHubError], status: int, sleeps: list[float]
) -> None:
    fake, clock = FakeGitHub(script=list(answers)), Clock()
    with pytest.raises(error) as gave_up:
        _http(fake, clock).request("GET", "/x", token="t", throttle_key="i")
    assert len(fake.requests) == 4
    assert clock.sleeps == sleeps
    assert gave_up.value.status == status
    assert gave_up.value.message == answers[0].json()["message"]
    assert (gave_up.value.method, gave_up.value.path) == ("GET", "/x")


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
        == f"POST /repos/o/r/issues: GitHub answered {status}: Resource not accessible by integration (invalid)"
    )  # GitHub's errors list is part of the words
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


def test_one_installation_waiting_does_not_hold_up_another() -> None:
    """A waiting installation holds only its own lock (really threaded; the sleeps block)."""
    released = threading.Event()
    waiting = threading.Event()
    clock = [0.0]

    def sleep(seconds: float) -> None:
        waiting.set()
        released.wait(timeout=10)

    throttle = Throttle(clock=lambda: clock[0], sleep=sleep, mutation_spacing=1.0)
    throttle.before("a", "POST")
    first = threading.Thread(target=throttle.before, args=("a", "POST"))  # must wait a second
    first.start()
    assert waiting.wait(timeout=10)
    other = threading.Thread(target=throttle.before, args=("b", "POST"))
    other.start()
    other.join(timeout=5)
    finished_while_a_waits = not other.is_alive()
    released.set()
    first.join(timeout=10)
    assert finished_while_a_waits


def test_deliveries_follow_the_cursor_and_stop_at_the_limit() -> None:
    def page(ids: list[int], cursor: str | None) -> httpx.Response:
        link = f'<https://api.github.com/app/hook/deliveries?per_page=100&cursor={cursor}>; rel="next"'
        return httpx.Response(200, json=[{"id": i} for i in ids], headers={"link": link} if cursor else {})

    fake, clock = FakeGitHub(script=[page([1, 2], "c2"), page([3, 4], "c3"), page([5], None)]), Clock()
    app = GitHubAppClient(http=_http(fake, clock), jwt=lambda: "jwt", app_id=42, caller=Caller.framework())
    assert [d["id"] for d in app.list_deliveries(limit=3)] == [1, 2, 3]
    assert [str(q.url) for q in fake.requests] == [
        "https://api.github.com/app/hook/deliveries?per_page=100",
        "https://api.github.com/app/hook/deliveries?per_page=100&cursor=c2",
    ]


@pytest.mark.parametrize(
    ("operation", "items_key"),
    [
        ("list_comments", None),
        ("list_pull_files", None),
        ("list_reviews", None),
        ("list_check_runs", "check_runs"),
    ],
)
def test_client_lists_read_every_page(operation: str, items_key: str | None) -> None:
    def page(n: int, last: bool) -> httpx.Response:
        items = [{"id": n * 100 + i} for i in range(100 if not last else 3)]
        body: object = {"total_count": 203, items_key: items} if items_key else items
        link = (
            "" if last else f'<https://api.github.com/repositories/1/x?per_page=100&page={n + 1}>; rel="next"'
        )
        return httpx.Response(200, json=body, headers={"link": link} if link else {})

    fake, clock = FakeGitHub(script=[page(1, False), page(2, False), page(3, True)]), Clock()
    client = GitHubClient(
        http=_http(fake, clock),
        token=lambda: "t",
        installation_id=1,
        repo="octo/app",
        caller=Caller.framework(),
    )
    items = getattr(client, operation)(101 if operation != "list_check_runs" else "main")
    assert len(items) == 203
    assert len(fake.requests) == 3
    assert fake.requests[0].url.params["per_page"] == "100"


@pytest.mark.parametrize(
    ("limit", "items", "calls"),
    [(None, 250, 3), (250, 250, 3), (200, 200, 2), (150, 150, 2), (100, 100, 1), (1, 1, 1)],
)
def test_pagination_stops_at_its_limit_without_asking_for_more(
    limit: int | None, items: int, calls: int
) -> None:
    def page(n: int) -> httpx.Response:
        link = f'<https://api.github.com/x?per_page=100&page={n + 1}>; rel="next"' if n < 3 else ""
        return httpx.Response(
            200, json=list(range(100 if n < 3 else 50)), headers={"link": link} if link else {}
        )

    fake, clock = FakeGitHub(script=[page(1), page(2), page(3)]), Clock()
    got = list(_http(fake, clock).paginate("/x", token="t", throttle_key="i", limit=limit))
    assert (len(got), len(fake.requests)) == (items, calls)


def test_a_list_anyone_can_grow_is_read_to_max_listed_only() -> None:
    """A hostile issue with endless comments costs MAX_LISTED / 100 calls, not one per page."""
    pages_asked: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        n = int(request.url.params.get("page", "1"))
        pages_asked.append(n)
        link = (
            f'<https://api.github.com/repositories/1/issues/7/comments?per_page=100&page={n + 1}>; rel="next"'
        )
        return httpx.Response(200, json=[{"id": n * 100 + i} for i in range(100)], headers={"link": link})

    clock = Clock()
    http = GitHubHttp(
        transport=httpx.MockTransport(handler),
        sleep=clock.sleep,
        wall_clock=lambda: NOW,
        throttle=Throttle(clock=clock, sleep=clock.sleep),
    )
    client = GitHubClient(
        http=http, token=lambda: "t", installation_id=1, repo="octo/app", caller=Caller.framework()
    )
    assert len(client.list_comments(7)) == MAX_LISTED
    assert len(pages_asked) == MAX_LISTED // 100


def test_a_wait_longer_than_the_bound_fails_at_once() -> None:
    reset = str(int(NOW) + 600)
    fake, clock = (
        FakeGitHub(
            script=[
                r(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}, "API rate limit exceeded")
            ]
        ),
        Clock(),
    )
    http = GitHubHttp(
        transport=fake.transport(),
        sleep=clock.sleep,
        wall_clock=lambda: NOW,
        throttle=Throttle(clock=clock, sleep=clock.sleep),
        max_wait_seconds=20,
    )
    with pytest.raises(RateLimitedError, match=r"GitHub asks to wait 601 s, over 20 s"):
        http.request("GET", "/x", token="t", throttle_key="i")
    assert clock.sleeps == []


@pytest.mark.parametrize(
    ("answers", "traffic"),
    [
        ([OK], GitHubTraffic(calls=1)),
        (
            [httpx.Response(200, json={}, headers={"x-ratelimit-remaining": "4999"})],
            GitHubTraffic(calls=1, lowest_remaining=4999),
        ),
        ([r(502), r(503), OK], GitHubTraffic(calls=3, retries=2)),
        ([r(429, {"retry-after": "7"}), OK], GitHubTraffic(calls=2, rate_limit_waits=1)),
        (
            [
                r(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 1)}),
                httpx.Response(200, json={}, headers={"x-ratelimit-remaining": "5000"}),
            ],
            GitHubTraffic(calls=2, rate_limit_waits=1, lowest_remaining=0),
        ),
    ],
    ids=["one call", "headroom", "5xx retried", "rate limited", "lowest remaining kept"],
)
def test_traffic_is_counted_for_the_metrics(answers: list[httpx.Response], traffic: GitHubTraffic) -> None:
    fake, clock = FakeGitHub(script=list(answers)), Clock()
    http = _http(fake, clock)
    http.request("GET", "/x", token="t", throttle_key="i")
    assert http.stats.drain() == traffic
    assert http.stats.drain() == GitHubTraffic()  # drained: the next invocation starts from zero


def test_network_failures_count_as_calls_and_retries() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    clock = Clock()
    http = GitHubHttp(
        transport=httpx.MockTransport(broken),
        sleep=clock.sleep,
        throttle=Throttle(clock=clock, sleep=clock.sleep),
    )
    with pytest.raises(GitHubUnavailableError):
        http.request("GET", "/x", token="t", throttle_key="i")
    assert http.stats.drain() == GitHubTraffic(calls=4, retries=3)
