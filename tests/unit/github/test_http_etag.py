"""Conditional GETs: GitHub's 304 answered from the cache, never across credentials, bounded."""

from __future__ import annotations

import json

import httpx
import pytest

from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.http import ETagCache, GitHubHttp
from tests.support.github_fake import FakeGitHub


class ConditionalGitHub:
    """Answers GETs with an ETag per (path, version) and 304 when If-None-Match still matches."""

    def __init__(self, body_size: int = 10) -> None:
        self.version = 1
        self.body_size = body_size
        self.seen: list[tuple[str, str | None, str]] = []  # (path, If-None-Match, token)
        self.force_304 = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        sent = request.headers.get("if-none-match")
        self.seen.append((request.url.path, sent, request.headers["authorization"]))
        etag = f'W/"{request.url.path}-{self.version}"'
        if self.force_304 or sent == etag:
            return httpx.Response(304, headers={"etag": etag})
        body = {"path": request.url.path, "version": self.version, "pad": "x" * self.body_size}
        return httpx.Response(200, content=json.dumps(body).encode(), headers={"etag": etag})


def http_for(github: ConditionalGitHub, cache: ETagCache | None = None) -> GitHubHttp:
    return GitHubHttp(transport=httpx.MockTransport(github.handle), sleep=lambda s: None, etags=cache)


def get(http: GitHubHttp, path: str, token: str = "ghs_one") -> dict[str, object]:  # noqa: S107 (a fake)
    answer: dict[str, object] = http.request("GET", path, token=token, throttle_key="installation-7").json()
    return answer


def test_an_unchanged_resource_is_a_304_answered_from_the_cache() -> None:
    github = ConditionalGitHub()
    http = http_for(github)
    first = get(http, "/repos/o/r/pulls/1")
    again = get(http, "/repos/o/r/pulls/1")
    assert again == first and http.etags.hits == 1
    assert [sent for _, sent, _ in github.seen] == [None, 'W/"/repos/o/r/pulls/1-1"']
    github.version = 2  # it changed: a full answer, cached in turn
    assert get(http, "/repos/o/r/pulls/1")["version"] == 2
    assert get(http, "/repos/o/r/pulls/1")["version"] == 2 and http.etags.hits == 2


def test_another_credential_never_gets_a_cached_answer() -> None:
    github = ConditionalGitHub()
    http = http_for(github)
    get(http, "/repos/o/r/issues/5", token="ghs_installation_seven")
    get(http, "/repos/o/r/issues/5", token="ghs_installation_eight")  # another installation's token
    assert [sent for _, sent, _ in github.seen] == [None, None]  # asked without the other's ETag
    assert http.etags.hits == 0


def test_a_304_the_cache_cannot_answer_is_an_error_not_a_crash() -> None:
    github = ConditionalGitHub()
    github.force_304 = True
    with pytest.raises(GitHubError, match="no answer for"):
        get(http_for(github), "/repos/o/r/issues/9")


def test_the_cache_stays_within_its_entries_and_bytes_and_skips_huge_bodies() -> None:
    cache = ETagCache(max_entries=3, max_bytes=2_000, max_body=1_000)
    github = ConditionalGitHub(body_size=300)
    http = http_for(github, cache)
    for n in range(10):
        get(http, f"/repos/o/r/issues/{n}")
    assert len(cache) <= 3 and cache.size_bytes <= 2_000
    huge = ConditionalGitHub(body_size=50_000)  # a hostile, huge answer is not kept
    big = ETagCache(max_body=1_000)
    get(http_for(huge, big), "/repos/o/r/issues/1")
    assert len(big) == 0


def test_only_gets_are_conditional() -> None:
    github = ConditionalGitHub()
    http = http_for(github)
    http.request("POST", "/repos/o/r/issues/1/comments", token="t", throttle_key="k", json={"body": "x"})
    http.request("POST", "/repos/o/r/issues/1/comments", token="t", throttle_key="k", json={"body": "x"})
    assert [sent for _, sent, _ in github.seen] == [None, None] and len(http.etags) == 0


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
