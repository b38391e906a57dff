"""Conditional GETs (ETag / If-None-Match): GitHub's 304 answered from the cache, never across
credentials, bounded in entries and bytes, thread-safe; a 304 the cache cannot answer is a named
error."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.adapters.github.errors import GitHubError, NotModifiedWithoutCacheError
from squadron.adapters.github.http import MAX_ETAG_LENGTH, ETagCache, GitHubHttp
from squadron.domain.metrics import GitHubTraffic
from squadron.domain.permissions import Caller
from tests.support.github_fake import FakeGitHub, conditional

PULL = "/repos/octo/app/pulls/7"
URL = f"https://api.github.com{PULL}"


@dataclass
class Server:
    """GitHub's conditional GET over bodies per (token, path): a weak ETag, 304 on a match.

    ``hostile`` answers 304 to everything (as a broken or malicious upstream might)."""

    bodies: dict[tuple[str, str], Any] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)
    hostile: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    #: Extra headers on a 304 (GitHub's fresh rate-limit figures).
    not_modified_headers: dict[str, str] = field(default_factory=dict)
    #: Runs when a conditional request arrives, before it is answered (another thread's work).
    meanwhile: Callable[[], None] | None = None

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.meanwhile is not None and "if-none-match" in request.headers:
            self.meanwhile()
        if self.hostile:
            return httpx.Response(304, headers={"ETag": 'W/"anything"'})
        token = request.headers["authorization"].removeprefix("Bearer ")
        body = self.bodies.get((token, request.url.path))
        if body is None:
            return httpx.Response(404, json={"message": "Not Found"})
        if isinstance(body, bytes):
            answer = httpx.Response(200, content=body, headers=self.headers)
        else:
            answer = httpx.Response(200, json=body, headers=self.headers)
        answer = conditional(request, answer)
        if answer.status_code == 304:
            answer.headers.update(self.not_modified_headers)
        return answer

    def sent_etag(self, index: int = -1) -> str | None:
        sent: str | None = self.requests[index].headers.get("if-none-match")
        return sent


def _http(server: Server, cache: ETagCache | None = None) -> GitHubHttp:
    return GitHubHttp(transport=httpx.MockTransport(server.handle), sleep=lambda s: None, etags=cache)


def _get(http: GitHubHttp, token: str, path: str = PULL, **params: Any) -> Any:
    return http.request("GET", path, token=token, throttle_key="k", params=params or None).json()


def test_a_repeated_get_is_conditional_and_a_304_answers_with_the_cached_body() -> None:
    server = Server({("t1", PULL): {"number": 7, "state": "open"}})
    http = _http(server)
    first = _get(http, "t1")
    assert server.sent_etag() is None  # nothing cached yet: an ordinary GET
    again = _get(http, "t1")
    assert server.sent_etag() is not None  # conditional
    assert again == first == {"number": 7, "state": "open"}
    assert http.stats.drain() == GitHubTraffic(calls=2, not_modified=1)
    assert http.etags.hits == 1


def test_a_changed_resource_is_read_again_and_replaces_the_cached_answer() -> None:
    server = Server({("t1", PULL): {"number": 7, "state": "open"}})
    http = _http(server)
    _get(http, "t1")
    server.bodies[("t1", PULL)] = {"number": 7, "state": "closed"}
    assert _get(http, "t1") == {"number": 7, "state": "closed"}  # GitHub's new ETag: a 200
    assert _get(http, "t1") == {"number": 7, "state": "closed"}  # and now that one is cached
    assert http.stats.drain().not_modified == 1


def test_the_query_is_part_of_the_key() -> None:
    server = Server({("t1", "/repos/octo/app/contents/a"): {"sha": "1"}})
    http = _http(server)
    _get(http, "t1", "/repos/octo/app/contents/a", ref="main")
    _get(http, "t1", "/repos/octo/app/contents/a", ref="dev")
    assert server.sent_etag() is None  # another ref is another resource


def test_a_304_reports_its_own_rate_limit_headroom() -> None:
    server = Server({("t1", PULL): {"n": 1}}, headers={"x-ratelimit-remaining": "4000"})
    http = _http(server)
    _get(http, "t1")
    http.stats.drain()
    server.not_modified_headers = {"x-ratelimit-remaining": "3998"}
    response = http.request("GET", PULL, token="t1", throttle_key="k")
    assert response.status_code == 200 and response.headers["x-ratelimit-remaining"] == "3998"
    assert http.stats.drain() == GitHubTraffic(calls=1, lowest_remaining=3998, not_modified=1)


def test_mutations_are_never_conditional_nor_cached() -> None:
    fake = FakeGitHub()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    for _ in range(2):
        http.request("PATCH", "/repos/octo/app/issues/3", token="t1", throttle_key="k", json={"title": "x"})
    assert all("if-none-match" not in request.headers for request in fake.requests)
    assert len(http.etags) == 0


def test_a_304_stands_for_the_answer_that_was_revalidated_even_if_evicted_meanwhile() -> None:
    """Another thread may evict or replace the entry while the conditional GET is in flight: the
    304 still answers with the very body whose ETag was sent, never an error, never another."""
    cache = ETagCache(max_entries=1)
    server = Server({("t1", PULL): {"n": 1}, ("t1", "/repos/octo/app/issues/1"): {"other": True}})
    http = _http(server, cache)
    _get(http, "t1")

    def evict() -> None:  # another request through the same cache fills its only slot
        server.meanwhile = None
        _get(http, "t1", "/repos/octo/app/issues/1")

    server.meanwhile = evict
    assert _get(http, "t1") == {"n": 1}
    assert server.sent_etag(-2) is not None  # the pull request's conditional GET, answered 304


# --- the attacker's view: whose answer can stand for whose ------------------------------------


def _client(http: GitHubHttp, token: str, installation: int) -> GitHubClient:
    return GitHubClient(
        http=http,
        token=lambda: token,
        installation_id=installation,
        repo="octo/app",
        caller=Caller.framework(),
    )


CREDENTIALS: list[tuple[str, str, str]] = [
    ("another installation", "ghs_installation_1", "ghs_installation_2"),
    ("a narrowed token of the same installation", "ghs_full", "ghs_narrowed"),
    ("the App JWT after an installation token", "ghs_installation_1", "eyJ.app.jwt"),
    ("an installation token after the App JWT", "eyJ.app.jwt", "ghs_installation_1"),
]


@pytest.mark.parametrize(("first", "second"), [c[1:] for c in CREDENTIALS], ids=[c[0] for c in CREDENTIALS])
def test_one_credentials_cached_answer_never_answers_anothers_request(first: str, second: str) -> None:
    server = Server({(first, PULL): {"secret": "first's view"}, (second, PULL): {"secret": "second's view"}})
    http = _http(server)
    assert _get(http, first) == {"secret": "first's view"}
    assert _get(http, second) == {"secret": "second's view"}
    assert server.sent_etag() is None  # the second credential's request was not conditional
    server.hostile = True  # GitHub (or whatever answers) now claims "not modified" to everyone
    with pytest.raises(NotModifiedWithoutCacheError):
        _get(http, "a_third_token")  # no entry of its own: never another's body
    assert _get(http, second) == {"secret": "second's view"}  # its own entry, not the first's
    assert _get(http, first) == {"secret": "first's view"}


def test_two_installations_reading_the_same_pull_request_each_keep_their_own_entry() -> None:
    server = Server({("ghs_1", PULL): {"number": 7, "by": 1}, ("ghs_2", PULL): {"number": 7, "by": 2}})
    http = _http(server)
    one, two = _client(http, "ghs_1", 1), _client(http, "ghs_2", 2)
    assert [one.get_pull(7), two.get_pull(7), one.get_pull(7), two.get_pull(7)] == [
        {"number": 7, "by": 1},
        {"number": 7, "by": 2},
        {"number": 7, "by": 1},
        {"number": 7, "by": 2},
    ]
    assert len(http.etags) == 2
    assert http.stats.drain().not_modified == 2


def test_the_cache_never_holds_a_token() -> None:
    server = Server({("ghs_secret_token", PULL): {"n": 1}})
    http = _http(server)
    _get(http, "ghs_secret_token")
    kept = list(http.etags._entries.items())
    assert [url for (_, url), _ in kept] == [URL]
    assert "ghs_secret_token" not in repr(kept)


HOSTILE_304 = [
    # (case, what is asked)
    ("a GET nothing was cached for", lambda http: _get(http, "t1")),
    (
        "a mutation (never conditional)",
        lambda http: http.request("POST", PULL, token="t1", throttle_key="k", json={}),
    ),
    (
        "an App client's paginated list",
        lambda http: GitHubAppClient(
            http=http, jwt=lambda: "eyJ.a.b", app_id=1, caller=Caller.framework()
        ).list_deliveries(),
    ),
]


@pytest.mark.parametrize("ask", [c[1] for c in HOSTILE_304], ids=[c[0] for c in HOSTILE_304])
def test_a_304_to_a_request_that_had_no_cached_copy_is_a_named_error(
    ask: Callable[[GitHubHttp], Any],
) -> None:
    server = Server(hostile=True)
    http = _http(server)
    with pytest.raises(
        NotModifiedWithoutCacheError, match=r"GitHub answered 304.*no cached answer"
    ) as raised:
        ask(http)
    assert isinstance(raised.value, GitHubError) and raised.value.status == 304
    assert server.sent_etag() is None
    assert len(http.etags) == 0


# --- bounds ----------------------------------------------------------------------------------


def test_a_hostile_huge_body_is_answered_but_not_cached_and_evicts_nothing() -> None:
    cache = ETagCache(max_entries=10, max_bytes=20_000, max_body=10_000)
    huge = json.dumps({"body": "x" * 5_000_000}).encode()
    server = Server({("t1", PULL): {"n": 1}, ("t1", "/repos/octo/app/issues/1"): huge})
    http = _http(server, cache)
    _get(http, "t1")
    kept = cache.size_bytes
    assert len(_get(http, "t1", "/repos/octo/app/issues/1")["body"]) == 5_000_000  # the caller has it
    assert cache.size_bytes == kept <= 20_000 and len(cache) == 1  # the cache does not
    _get(http, "t1", "/repos/octo/app/issues/1")
    assert server.sent_etag() is None  # so it is read again in full, never half-kept
    _get(http, "t1")
    assert server.sent_etag() is not None  # the small entry survived


@pytest.mark.parametrize(
    ("max_entries", "max_bytes", "body_bytes"),
    [(3, 1_000_000, 100), (1000, 4_000, 900), (2, 3_000, 900)],
    ids=["entry bound", "byte bound", "both"],
)
def test_the_cache_stays_within_its_bounds_and_the_least_recently_used_goes(
    max_entries: int, max_bytes: int, body_bytes: int
) -> None:
    cache = ETagCache(max_entries=max_entries, max_bytes=max_bytes, max_body=max_bytes)
    paths = [f"/repos/octo/app/issues/{n}" for n in range(20)]
    server = Server({("t1", path): {"pad": "x" * body_bytes, "path": path} for path in paths})
    http = _http(server, cache)
    _get(http, "t1", paths[0])
    for path in paths[1:]:
        _get(http, "t1", paths[0])  # paths[0] stays the most recently used
        _get(http, "t1", path)
        assert len(cache) <= max_entries and cache.size_bytes <= max_bytes
    _get(http, "t1", paths[0])
    assert server.sent_etag() is not None  # used throughout: kept
    _get(http, "t1", paths[1])
    assert server.sent_etag() is None  # least recently used: gone


def test_an_entry_is_counted_with_its_url_and_headers_not_its_body_alone() -> None:
    cache = ETagCache()
    response = httpx.Response(200, content=b"{}", headers={"ETag": 'W/"1"', "Link": "<x>; rel=next"})
    assert cache.store(ETagCache.key("t", httpx.URL(URL)), response)
    assert cache.size_bytes > len(URL) + len(b"{}") + len('W/"1"') + len("<x>; rel=next")


@pytest.mark.parametrize(
    ("etag", "kept"),
    [('W/"abc"', True), ("", False), ('W/"' + "a" * MAX_ETAG_LENGTH + '"', False)],
    ids=["GitHub's weak ETag", "no ETag", "an ETag no GitHub sends"],
)
def test_only_an_answer_with_a_usable_etag_is_kept(etag: str, kept: bool) -> None:
    cache = ETagCache()
    response = httpx.Response(200, json={"n": 1}, headers={"ETag": etag} if etag else {})
    key = ETagCache.key("t", httpx.URL(URL))
    assert cache.store(key, response) is kept
    assert (cache.lookup(key) is not None) is kept


STALE = [
    # (case, the second answer to the same GET)
    ("no ETag", httpx.Response(200, json={"v": 2})),
    ("too big to keep", httpx.Response(200, content=b"x" * 2_000, headers={"ETag": 'W/"2"'})),
]


@pytest.mark.parametrize("second", [c[1] for c in STALE], ids=[c[0] for c in STALE])
def test_an_answer_that_is_not_kept_drops_the_stale_entry(second: httpx.Response) -> None:
    cache = ETagCache(max_body=1_000)
    key = ETagCache.key("t", httpx.URL(URL))
    cache.store(key, httpx.Response(200, json={"v": 1}, headers={"ETag": 'W/"1"'}))
    assert not cache.store(key, second)
    assert cache.lookup(key) is None and cache.size_bytes == 0 and len(cache) == 0


@pytest.mark.parametrize(
    ("max_entries", "max_bytes", "max_body"),
    [(0, 10, 10), (10, 0, 10), (10, 10, 0)],
    ids=["no entries", "no bytes", "no body"],
)
def test_a_cache_without_room_is_refused(max_entries: int, max_bytes: int, max_body: int) -> None:
    with pytest.raises(ValueError, match="needs room"):
        ETagCache(max_entries=max_entries, max_bytes=max_bytes, max_body=max_body)


def test_threads_sharing_the_cache_keep_its_accounting_exact() -> None:
    cache = ETagCache(max_entries=50, max_bytes=40_000, max_body=40_000)
    start = threading.Barrier(8)

    def work(worker: int) -> None:
        start.wait()
        for n in range(300):
            url = httpx.URL(f"https://api.github.com/x/{(worker * 7 + n) % 120}")
            body = {"pad": "y" * ((worker * 31 + n) % 900)}
            response = httpx.Response(200, json=body, headers={"ETag": f'W/"{n}"'})
            cache.store(ETagCache.key(f"token-{worker % 3}", url), response)
            cache.lookup(ETagCache.key(f"token-{(worker + 1) % 3}", url))

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = list(cache._entries.values())
    assert len(entries) <= 50 and cache.size_bytes <= 40_000
    assert cache.size_bytes == sum(entry.size for entry in entries)


# --- pagination --------------------------------------------------------------------------------


def test_a_paginated_list_is_cached_page_by_page_and_follows_the_cached_link() -> None:
    page_two = "https://api.github.com/repos/octo/app/pulls/7/reviews?per_page=100&page=2"
    pages = {
        "1": ([{"id": 1}], {"link": f'<{page_two}>; rel="next"'}),
        "2": ([{"id": 2}], {}),
    }
    requests: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        body, headers = pages[request.url.params.get("page", "1")]
        return conditional(request, httpx.Response(200, json=body, headers=headers))

    http = GitHubHttp(transport=httpx.MockTransport(handle), sleep=lambda s: None)
    client = _client(http, "t1", 1)
    assert client.list_reviews(7) == [{"id": 1}, {"id": 2}]
    assert client.list_reviews(7) == [{"id": 1}, {"id": 2}]  # both pages answered 304
    assert [r.headers.get("if-none-match") is not None for r in requests] == [False, False, True, True]
    assert http.stats.drain().not_modified == 2


# --- the tests' fake api.github.com answers conditional GETs as GitHub does -------------------

FAKE_ANSWERS = [
    # (case, If-None-Match sent, the status the fake answers)
    ("no ETag sent: a full answer", None, 200),
    ("the body's own ETag: not modified", "current", 304),
    ("one of several ETags: not modified", 'W/"other", current', 304),
    ("an old ETag: a full answer", 'W/"old"', 200),
]


@pytest.mark.parametrize(("sent", "status"), [c[1:] for c in FAKE_ANSWERS], ids=[c[0] for c in FAKE_ANSWERS])
def test_the_fake_answers_a_conditional_get_as_github_does(sent: str | None, status: int) -> None:
    fake = FakeGitHub()
    url = "https://api.github.com/repos/octo/app/pulls/101"
    full = fake.handle(httpx.Request("GET", url))
    etag = full.headers["etag"]
    assert full.status_code == 200 and etag.startswith('W/"')
    headers = {} if sent is None else {"If-None-Match": sent.replace("current", etag)}
    answer = fake.handle(httpx.Request("GET", url, headers=headers))
    assert answer.status_code == status and answer.headers["etag"] == etag
    assert answer.content == (b"" if status == 304 else full.content)


def test_the_fake_never_answers_a_mutation_304() -> None:
    fake = FakeGitHub()
    url = "https://api.github.com/repos/octo/app/issues/3"
    etag = fake.handle(httpx.Request("GET", url)).headers["etag"]
    answer = fake.handle(httpx.Request("PATCH", url, json={"title": "x"}, headers={"If-None-Match": etag}))
    assert answer.status_code == 200 and "etag" not in answer.headers
