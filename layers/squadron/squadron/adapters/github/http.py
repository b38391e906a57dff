"""The REST transport: retries, GitHub's rate limits, a per-installation throttle, pagination.

Rate limits as GitHub documents them: on 403/429 honour ``retry-after``; else,
when ``x-ratelimit-remaining`` is 0, wait until ``x-ratelimit-reset``; else
(a secondary limit) back off exponentially from one minute. Reads (and writes
GitHub makes idempotent, which the caller names) are retried a bounded number of
times after a 5xx or a network failure. A write is re-sent only when it never left:
a connection that could not be made (:data:`NOT_SENT`). After a 5xx, a read timeout
or a dropped connection GitHub may have applied it (its front end times out while
the write commits), so the transport waits its back-off and raises
:class:`MaybeAppliedError` instead: the caller, who holds the write's key, looks
up what GitHub did before it sends again. Every wait goes through the injected
``sleep`` and ``clock``, so tests never really wait.

The throttle keeps GitHub's secondary limits per installation: mutating
requests at least ``mutation_spacing`` apart, and at most
``content_per_minute`` content-creating requests (POST) in any minute.

Every GET is conditional once an earlier answer to it is cached (:class:`ETagCache`): it
carries ``If-None-Match`` with that answer's ETag, and GitHub's ``304 Not Modified`` (which
does not count against the primary rate limit) is answered with the cached body, as if GitHub
had sent it again, and counted (``GitHubNotModified``). A 304 to a request that carried no
ETag is a :class:`NotModifiedWithoutCacheError`. Paginated lists are cached page by page (each
page is its own URL).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from squadron.adapters.github.errors import (
    BY_STATUS,
    GitHubError,
    GitHubUnavailableError,
    MaybeAppliedError,
    NotModifiedWithoutCacheError,
    RateLimitedError,
)
from squadron.domain.metrics import GitHubTraffic

API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
USER_AGENT = "squadron-github-app"
MUTATIONS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
#: Network failures that happen before a request leaves: no connection was made (or none was
#: free in the pool), so GitHub never saw it and a write is safe to send again. Any other
#: failure (a read timeout, a connection dropped mid-exchange, a protocol error) may come after
#: GitHub took the request.
NOT_SENT: tuple[type[httpx.TransportError], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
)
SECONDARY_BACKOFF_SECONDS = 60.0
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')
#: Headers of a 200 kept with its cached body (what callers read besides the body).
_KEPT_HEADERS = ("content-type", "link", "etag")
#: Rough bookkeeping cost of one cache entry beyond its body, key and headers.
_ENTRY_OVERHEAD = 256
#: A longer ETag is no GitHub ETag (a quoted hash): such an answer is not cached.
MAX_ETAG_LENGTH = 200


def rest_client(base_url: str, *, transport: httpx.BaseTransport | None, timeout: float) -> httpx.Client:
    """An httpx client for GitHub's REST API: its media type, API version and our user agent."""
    return httpx.Client(
        base_url=base_url,
        transport=transport,
        timeout=timeout,
        headers={
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        },
    )


class Throttle:
    """Spaces mutations and caps content creation, per installation (thread-safe)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        mutation_spacing: float = 1.0,
        content_per_minute: int = 80,
    ) -> None:
        self.clock = clock
        self.sleep = sleep
        self.mutation_spacing = mutation_spacing
        self.content_per_minute = content_per_minute
        self._last_mutation: dict[str, float] = {}
        self._created: dict[str, deque[float]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def before(self, key: str, method: str) -> None:
        """Wait, if needed, until ``method`` may be sent for installation ``key``."""
        if method not in MUTATIONS:
            return
        with self._locks_lock:
            lock = self._locks.setdefault(key, threading.Lock())
        # One lock per installation: its requests queue up while another installation's go on.
        with lock:
            now = self.clock()
            ready = self._last_mutation.get(key, -1e18) + self.mutation_spacing
            if method == "POST":
                window = self._created.setdefault(key, deque())
                while window and window[0] <= now - 60.0:
                    window.popleft()
                if len(window) >= self.content_per_minute:
                    ready = max(ready, window[0] + 60.0)
            wait = ready - now
            if wait > 0:
                self.sleep(wait)
                now = self.clock()
            self._last_mutation[key] = now
            if method == "POST":
                self._created.setdefault(key, deque()).append(now)


class GitHubCallStats:
    """What a transport sent since the last :meth:`drain` (for the metrics; thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.calls = 0
        self.retries = 0
        self.rate_limit_waits = 0
        self.lowest_remaining: int | None = None
        self.not_modified = 0

    def sent(self, response: httpx.Response | None) -> None:
        with self._lock:
            self.calls += 1
            remaining = response.headers.get("x-ratelimit-remaining", "") if response is not None else ""
            if remaining.isdigit():
                value = int(remaining)
                if self.lowest_remaining is None or value < self.lowest_remaining:
                    self.lowest_remaining = value

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def waited(self) -> None:
        with self._lock:
            self.rate_limit_waits += 1

    def revalidated(self) -> None:
        """A conditional GET was answered 304 Not Modified (free of the primary rate limit)."""
        with self._lock:
            self.not_modified += 1

    def drain(self) -> GitHubTraffic:
        """The counts so far, then start again from zero."""
        with self._lock:
            traffic = GitHubTraffic(
                self.calls, self.retries, self.rate_limit_waits, self.lowest_remaining, self.not_modified
            )
            self._reset()
            return traffic


@dataclass(frozen=True)
class CachedAnswer:
    """A 200 answer to a GET kept for revalidation: its ETag, body, the headers callers read, and
    what it costs the cache (body, URL, headers and bookkeeping)."""

    etag: str
    content: bytes
    headers: tuple[tuple[str, str], ...]
    size: int


class ETagCache:
    """GitHub's answers to GETs by credential and URL, for conditional requests.

    GitHub answers a GET that carries ``If-None-Match`` with the ETag it sent before with a 304
    and no body when nothing changed, and does not count it against the rate limit. Entries are
    keyed by a hash of the token and the URL with its query, so an answer is only ever reused for
    the same credential (another installation, a narrower token, the App's JWT each have their
    own); the token itself is never kept. Bounded by entries and by bytes (each entry counted
    with its URL, headers and bookkeeping, not its body alone), the least recently used first
    out; an answer over ``max_body`` (or over ``max_bytes``) is not kept at all, so one huge body
    can neither pass the bound nor flush everything else out. Thread-safe.
    """

    def __init__(
        self, *, max_entries: int = 512, max_bytes: int = 8 * 1024 * 1024, max_body: int = 512 * 1024
    ):
        if min(max_entries, max_bytes, max_body) < 1:
            raise ValueError(
                f"an ETag cache needs room: max_entries={max_entries}, max_bytes={max_bytes}, "
                f"max_body={max_body}"
            )
        self.max_entries, self.max_bytes, self.max_body = max_entries, max_bytes, max_body
        self._entries: OrderedDict[tuple[str, str], CachedAnswer] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: GETs answered 304 (from the cache) since the cache was made.
        self.hits = 0

    @staticmethod
    def key(token: str, url: httpx.URL) -> tuple[str, str]:
        return hashlib.sha256(token.encode()).hexdigest()[:32], str(url)

    def lookup(self, key: tuple[str, str]) -> CachedAnswer | None:
        """The answer kept for ``key`` (now the most recently used), if any.

        The caller holds on to it until GitHub answers: a 304 then stands for this very answer,
        even if another thread evicted or replaced the entry meanwhile."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def store(self, key: tuple[str, str], response: httpx.Response) -> bool:
        """Keep a 200 answer to a GET if it has a usable ETag and fits; whether it was kept.

        An answer that is not kept still drops what was kept for ``key``: it is stale."""
        etag = response.headers.get("etag", "")
        body = response.content
        headers = tuple((name, response.headers[name]) for name in _KEPT_HEADERS if name in response.headers)
        size = len(body) + sum(map(len, key)) + sum(len(n) + len(v) for n, v in headers) + _ENTRY_OVERHEAD
        with self._lock:
            self._discard(key)
            if not etag or len(etag) > MAX_ETAG_LENGTH or len(body) > self.max_body or size > self.max_bytes:
                return False
            self._entries[key] = CachedAnswer(etag, body, headers, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.size
            return True

    def _discard(self, key: tuple[str, str]) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size

    def answer(self, cached: CachedAnswer, not_modified: httpx.Response) -> httpx.Response:
        """The cached 200 standing for GitHub's 304, with the 304's fresh rate-limit headers."""
        with self._lock:
            self.hits += 1
        headers = dict(cached.headers)
        headers.update(
            (name, value) for name, value in not_modified.headers.items() if name.startswith("x-ratelimit-")
        )
        return httpx.Response(200, content=cached.content, headers=headers, request=not_modified.request)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._bytes


class GitHubHttp:
    def __init__(
        self,
        *,
        base_url: str = API_URL,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], float] = time.time,
        throttle: Throttle | None = None,
        max_retries: int = 3,
        max_rate_limit_waits: int = 3,
        max_wait_seconds: float = 3600.0,
        timeout: float = 30.0,
        stats: GitHubCallStats | None = None,
        etags: ETagCache | None = None,
    ) -> None:
        self.stats = stats or GitHubCallStats()
        #: Conditional GETs (a 304 does not count against GitHub's rate limit).
        self.etags = etags if etags is not None else ETagCache()
        self.sleep = sleep
        self.wall_clock = wall_clock
        self.throttle = throttle or Throttle(sleep=sleep)
        self.max_retries = max_retries
        self.max_rate_limit_waits = max_rate_limit_waits
        #: A rate-limit wait longer than this fails at once (a Lambda hands its record back to
        #: the queue rather than sleep into its timeout).
        self.max_wait_seconds = max_wait_seconds
        self._client = rest_client(base_url, transport=transport, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str,
        throttle_key: str,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> httpx.Response:
        """Send one request (retrying as documented); raise a named GitHubError on failure.

        ``idempotent``: the caller knows that GitHub applying this write twice leaves the same
        state as once (setting a state, adding labels, deleting), so it may be re-sent blindly
        like a read. Otherwise a write GitHub may have applied raises :class:`MaybeAppliedError`.
        """
        server_failures = 0
        replayable = method not in MUTATIONS or idempotent
        rate_waits = 0
        while True:
            self.throttle.before(throttle_key, method)
            outgoing = self._client.build_request(
                method, path, params=params, json=json, headers={"Authorization": f"Bearer {token}"}
            )
            cache_key = self.etags.key(token, outgoing.url) if method == "GET" else None
            cached = self.etags.lookup(cache_key) if cache_key is not None else None
            if cached is not None:
                outgoing.headers["If-None-Match"] = cached.etag
            try:
                response = self._client.send(outgoing)
            except httpx.TransportError as exc:
                self.stats.sent(None)
                server_failures += 1
                sent = not replayable and not isinstance(exc, NOT_SENT)
                kind = MaybeAppliedError if sent else GitHubUnavailableError
                said = f"no answer ({type(exc).__name__}: {exc}); GitHub may have applied it"
                error = kind(0, said if sent else f"network failure: {exc}", method=method, path=path)
                self._failed(error, server_failures, maybe_applied=sent, cause=exc)
                continue
            self.stats.sent(response)
            if response.status_code == 304:
                if cached is None:
                    raise NotModifiedWithoutCacheError(
                        304,
                        "Not Modified, to a request that sent no If-None-Match: no cached answer to use",
                        method=method,
                        path=path,
                    )
                self.stats.revalidated()
                return self.etags.answer(cached, response)
            if response.status_code < 400:
                if cache_key is not None and response.status_code == 200:
                    self.etags.store(cache_key, response)
                return response
            if response.status_code in (403, 429) and _is_rate_limited(response):
                rate_waits += 1
                if rate_waits > self.max_rate_limit_waits:
                    raise _error(response, method, path, RateLimitedError)
                wait = self._rate_limit_wait(response, rate_waits)
                if wait > self.max_wait_seconds:
                    base = _error(response, method, path, RateLimitedError)
                    raise RateLimitedError(
                        base.status,
                        f"{base.message} (GitHub asks to wait {wait:g} s, over {self.max_wait_seconds:g} s)",
                        method=method,
                        path=path,
                        documentation_url=base.documentation_url,
                        errors=base.errors,
                    )
                self.stats.waited()
                self.sleep(wait)
                continue
            if response.status_code >= 500:
                server_failures += 1
                kind = GitHubUnavailableError if replayable else MaybeAppliedError
                self._failed(
                    _error(response, method, path, kind), server_failures, maybe_applied=not replayable
                )
                continue
            raise _error(response, method, path, BY_STATUS.get(response.status_code, GitHubError))

    def _failed(
        self,
        error: GitHubError,
        failures: int,
        *,
        maybe_applied: bool,
        cause: BaseException | None = None,
    ) -> None:
        """After a 5xx or a network failure: back off, then send again (return) or raise ``error``.

        ``maybe_applied``: a write GitHub may have taken is never sent again here; the back-off
        gives a write still committing the time to show up in the caller's lookup that follows.
        """
        if maybe_applied or failures > self.max_retries:
            if maybe_applied:
                self.sleep(2.0**failures)
            raise error from cause
        self.stats.retried()
        self.sleep(2.0**failures)

    def _rate_limit_wait(self, response: httpx.Response, attempt: int) -> float:
        retry_after = response.headers.get("retry-after")
        if retry_after is not None and retry_after.strip().isdigit():
            return float(retry_after)
        if response.headers.get("x-ratelimit-remaining") == "0":
            reset = response.headers.get("x-ratelimit-reset", "")
            if reset.isdigit():
                return max(float(reset) - self.wall_clock(), 0.0) + 1.0
        return SECONDARY_BACKOFF_SECONDS * 2.0 ** (attempt - 1)

    @property
    def graphql_path(self) -> str:
        """Where GitHub's GraphQL API is: ``/graphql`` beside the REST API (api.github.com and the
        sandbox), ``/api/graphql`` on GitHub Enterprise Server (whose REST API is ``/api/v3``)."""
        base = self._client.base_url
        if base.path.rstrip("/").endswith("/api/v3"):
            return str(base.copy_with(path=base.path.rstrip("/").removesuffix("/v3") + "/graphql"))
        return "/graphql"

    def paginate(
        self,
        path: str,
        *,
        token: str,
        throttle_key: str,
        params: Mapping[str, Any] | None = None,
        items_key: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Any]:
        """Every item of a list, following ``Link: rel="next"`` (100 per page), up to ``limit``.

        With ``limit``, no page past the one that reaches it is asked for: a list a stranger can
        grow (comments, reviews) costs a bounded number of calls.
        """
        url: str | None = path
        query: Mapping[str, Any] | None = {"per_page": 100, **(params or {})}
        given = 0
        while url is not None:
            response = self.request("GET", url, token=token, throttle_key=throttle_key, params=query)
            body = response.json()
            for item in body[items_key] if items_key else body:
                if limit is not None and given >= limit:
                    return
                given += 1
                yield item
            if limit is not None and given >= limit:
                return
            match = _NEXT_LINK.search(response.headers.get("link", ""))
            url, query = (match.group(1), None) if match else (None, None)

    def close(self) -> None:
        self._client.close()


def _is_rate_limited(response: httpx.Response) -> bool:
    if response.status_code == 429 or "retry-after" in response.headers:
        return True
    if response.headers.get("x-ratelimit-remaining") == "0":
        return True
    return "rate limit" in _message(response).lower()


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        return str(body.get("message") or response.reason_phrase)
    return response.reason_phrase


def _error(response: httpx.Response, method: str, path: str, kind: type[GitHubError]) -> GitHubError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    return kind(
        response.status_code,
        _message(response),
        method=method,
        path=path,
        documentation_url=body.get("documentation_url"),
        errors=body.get("errors") if isinstance(body.get("errors"), list) else None,
    )
