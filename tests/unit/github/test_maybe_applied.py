"""No blind re-sends: every write of the client against GitHub applying it, then failing to say so.

GitHub (a recording stand-in) applies each write it receives, and the first one then fails as
GitHub under load does: a 502 after the write committed, a read timeout, a connection dropped
before the answer; or, the one failure that is safe to retry, a connection never made. The
table counts how many times GitHub applied the write: a write that creates something is applied
once and its caller hears :class:`MaybeAppliedError` (it holds the key to look it up); a write
GitHub makes idempotent is sent again (applying it twice reads as once); a connection never made
is retried and the write applied once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubUnavailableError, MaybeAppliedError
from squadron.adapters.github.http import GitHubHttp, Throttle
from squadron.domain.permissions import Caller, MergeConsent
from tests.support.github_fake import FakeGitHub

Write = Callable[[GitHubClient], object]


@dataclass(frozen=True)
class Case:
    name: str
    call: Write
    #: GitHub applying it twice leaves what once does (the transport may send it again).
    idempotent: bool


CASES = [
    Case("comment", lambda c: c.comment(7, "hello"), False),
    Case("create_issue", lambda c: c.create_issue("t", "b", labels=["x"]), False),
    Case(
        "create_pull", lambda c: c.create_pull(title="t", head="feat/issue-7", base="main", body="b"), False
    ),
    Case("create_review", lambda c: c.create_review(7, "COMMENT", "b"), False),
    Case(
        "merge_pull",
        lambda c: c.merge_pull(7, consent=MergeConsent(7, True, "flow met"), sha="c" * 40),
        False,
    ),
    Case("create_check_run", lambda c: c.create_check_run(name="ci", head_sha="c" * 40), False),
    Case("update_pull_branch", lambda c: c.update_pull_branch(7, head="feat/issue-7"), False),
    Case("update_issue", lambda c: c.update_issue(7, body="b"), True),
    Case("close_issue", lambda c: c.close_issue(7), True),
    Case("reopen_issue", lambda c: c.reopen_issue(7), True),
    Case("add_labels", lambda c: c.add_labels(7, ["x"]), True),
    Case("remove_label", lambda c: c.remove_label(7, "x"), True),
    Case("add_assignees", lambda c: c.add_assignees(7, ["squadron[bot]"]), True),
    Case("remove_assignees", lambda c: c.remove_assignees(7, ["squadron[bot]"]), True),
    Case("create_status", lambda c: c.create_status("c" * 40, state="success", context="ci"), True),
    Case("update_check_run", lambda c: c.update_check_run(4, status="completed", conclusion="success"), True),
    Case("delete_branch", lambda c: c.delete_branch("feat/issue-7"), True),
    Case("protect_branch", lambda c: c.protect_branch("main", {"enforce_admins": True}), True),
]

#: How the first attempt fails: after GitHub applied it (True), or before it was sent (False).
FAULTS: dict[str, tuple[bool, Callable[[httpx.Request], httpx.Response]]] = {
    "502 after apply": (True, lambda r: httpx.Response(502, json={"message": "Server Error"})),
    "read timeout after apply": (True, lambda r: _raise(httpx.ReadTimeout("timed out", request=r))),
    "dropped after apply": (
        True,
        lambda r: _raise(
            httpx.RemoteProtocolError("Server disconnected without sending a response", request=r)
        ),
    ),
    "connect failure": (False, lambda r: _raise(httpx.ConnectError("connection refused", request=r))),
}


def _raise(exc: Exception) -> httpx.Response:
    raise exc


class ApplyingGitHub:
    """GitHub that applies each write it receives (counted); the first write then fails."""

    def __init__(self, fault: str) -> None:
        self.fake = FakeGitHub()
        self.applied = 0
        self.after, self.fail = FAULTS[fault]
        self.failed = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        first = not self.failed and request.method != "GET"
        if first and not self.after:
            self.failed = True
            return self.fail(request)  # never reached GitHub: nothing applied
        answer = self.fake.handle(request)
        if request.method != "GET":
            self.applied += 1
        if first:
            self.failed = True
            return self.fail(request)
        return answer


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_write_is_applied_once_or_its_caller_is_told_it_may_have_been(case: Case, fault: str) -> None:
    github = ApplyingGitHub(fault)
    sleeps: list[float] = []
    http = GitHubHttp(
        transport=httpx.MockTransport(github.handle),
        sleep=sleeps.append,
        throttle=Throttle(sleep=lambda s: None, mutation_spacing=0.0),
    )
    client = GitHubClient(
        http=http, token=lambda: "t", installation_id=1, repo="octo/app", caller=Caller.framework()
    )
    after_apply = github.after
    if after_apply and not case.idempotent:
        with pytest.raises(MaybeAppliedError) as told:
            case.call(client)
        assert isinstance(told.value, GitHubUnavailableError)  # callers without a key fail as before
        assert github.applied == 1  # never sent again
        assert sleeps == [2.0]  # the back-off GitHub gets to finish committing before a lookup
    else:
        case.call(client)
        # A write never sent is sent once; an idempotent one again (twice reads as once).
        assert github.applied == (2 if after_apply else 1)


def test_reads_are_still_retried_after_a_lost_answer() -> None:
    answers = iter([httpx.Response(502, json={"message": "x"}), httpx.Response(200, json={"number": 7})])
    calls: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return next(answers)

    http = GitHubHttp(transport=httpx.MockTransport(handle), sleep=lambda s: None)
    assert http.request("GET", "/repos/o/r/issues/7", token="t", throttle_key="i").json() == {"number": 7}
    assert len(calls) == 2
