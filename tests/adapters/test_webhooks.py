"""A pipeline's webhook call (squadron.adapters.webhooks), played by an attacker who controls the
pipeline's configuration, the name service's answer or the server: what each one got."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import pytest

from squadron.adapters.webhooks import MAX_BODY, Webhooks


@dataclass
class Net:
    names: dict[str, list[str]] = field(default_factory=lambda: {"hooks.example.com": ["93.184.216.34"]})
    sent: list[httpx.Request] = field(default_factory=list)
    answer: httpx.Response | Exception = field(default_factory=lambda: httpx.Response(200, text="ok"))

    def resolve(self, host: str, port: int) -> list[str]:
        return self.names.get(host, [])

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def webhooks(self) -> Webhooks:
        return Webhooks(resolve=self.resolve, transport=httpx.MockTransport(self.handle))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/x", "https://"),
        ("https://user:pw@hooks.example.com/x", "no credentials"),
        ("https://169.254.169.254/latest/meta-data/", "private, loopback, link-local or metadata"),
        ("https://[::1]/x", "private, loopback"),
        ("https://nowhere.example/x", "resolves to no address"),
    ],
)
def test_a_call_the_rules_refuse_sends_nothing(url: str, reason: str) -> None:
    net = Net()
    result = net.webhooks().call("POST", url, {}, None)
    assert result.status is None and reason in (result.reason or "")
    assert net.sent == []


def test_the_pipeline_cannot_redirect_the_connection_with_its_headers() -> None:
    net = Net()
    result = net.webhooks().call(
        "POST",
        "https://hooks.example.com/x",
        {"Host": "169.254.169.254", "Content-Length": "0", "Transfer-Encoding": "chunked", "X-Ok": "1"},
        {"a": 1},
    )
    (request,) = net.sent
    assert result.status == 200 and result.address == "93.184.216.34"
    assert request.url.host == "93.184.216.34" and request.headers["host"] == "hooks.example.com"
    assert request.headers["x-ok"] == "1" and "transfer-encoding" not in request.headers
    assert request.content == b'{"a":1}'


def test_a_redirect_is_the_answer_never_followed() -> None:
    net = Net(answer=httpx.Response(302, headers={"Location": "https://169.254.169.254/latest/meta-data/"}))
    result = net.webhooks().call("GET", "https://hooks.example.com/x", {}, None)
    assert result.status == 302
    assert len(net.sent) == 1


def test_a_huge_answer_is_read_only_up_to_the_bound() -> None:
    net = Net(answer=httpx.Response(200, content=b"x" * (MAX_BODY * 16)))
    result = net.webhooks().call("GET", "https://hooks.example.com/x", {}, None)
    assert result.status == 200 and len(result.body) == MAX_BODY


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (httpx.ReadTimeout("slow"), "no answer within 10 s"),
        (httpx.ConnectError("refused"), "could not be called: ConnectError"),
    ],
)
def test_a_server_that_does_not_answer_is_a_reason_not_a_crash(error: Exception, reason: str) -> None:
    net = Net(answer=error)
    result = net.webhooks().call("GET", "https://hooks.example.com/x", {}, None)
    assert result.status is None and reason in (result.reason or "")
