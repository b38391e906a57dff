"""A pipeline's webhook stage, called (docs/pipelines.md, "What the router carries out").

:meth:`Webhooks.call` makes one HTTPS request to the address a repository's pipeline names, under
the rules docs/pipelines.md states:

* ``https://`` only; no credentials in the address;
* the host is resolved now, and **every** address it resolves to must be public
  (:func:`~squadron.domain.pipelines.addresses.address_problem`): no private, loopback,
  link-local or metadata address, nor an IPv6 address that reaches one; the connection goes to
  the address checked (the name is not resolved a second time, so DNS cannot change its answer
  between the check and the connection), with the name as TLS server name and ``Host``;
* no redirect is followed (a 3xx is the answer); at most :data:`MAX_SECONDS` in all and
  :data:`MAX_BODY` bytes of the answer are read.

What comes back is a :class:`WebhookResult`: the status, or why there was none.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from squadron.domain.pipelines.addresses import address_problem

#: The longest a webhook call takes, connection and answer together (seconds).
MAX_SECONDS = 10.0
#: The most of an answer's body read (bytes).
MAX_BODY = 64 * 1024
#: Headers a pipeline may not set: the request's framing and its destination are the adapter's.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade", "te"})

Resolve = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to now (TCP)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in found})


@dataclass(frozen=True)
class WebhookResult:
    status: int | None
    #: Why the call was refused or failed (None: it was answered with ``status``).
    reason: str | None = None
    #: The address connected to.
    address: str | None = None
    body: bytes = b""
    #: The answer was longer than the most read (``body`` holds its first bytes only).
    cut: bool = False


class Webhooks:
    """Webhook calls; ``resolve`` and ``transport`` are the name service and the network (a test
    gives its own)."""

    def __init__(
        self,
        *,
        resolve: Resolve = resolve,
        transport: httpx.BaseTransport | None = None,
        max_seconds: float = MAX_SECONDS,
        max_body: int = MAX_BODY,
    ) -> None:
        self.resolve = resolve
        self.transport = transport
        self.max_seconds = max_seconds
        self.max_body = max_body

    def call(self, method: str, url: str, headers: dict[str, str], body: Any) -> WebhookResult:
        try:
            parts = urlsplit(url)
            port = parts.port or 443
        except ValueError as exc:
            return WebhookResult(None, f"not a URL: {exc}")
        host = parts.hostname or ""
        if parts.scheme != "https" or not host:
            return WebhookResult(None, "a webhook address is https:// with a host")
        if parts.username is not None or parts.password is not None:
            return WebhookResult(None, "a webhook address carries no credentials")
        try:
            addresses = [host] if _literal_ip(host) else self.resolve(host, port)
        except OSError as exc:
            return WebhookResult(None, f"{host} does not resolve: {exc}")
        if not addresses:
            return WebhookResult(None, f"{host} resolves to no address")
        for address in addresses:
            problem = address_problem(address)
            if problem is not None:
                return WebhookResult(None, f"refused: {host} resolves to {problem}")
        chosen = addresses[0]
        netloc = (f"[{chosen}]" if ":" in chosen else chosen) + (f":{parts.port}" if parts.port else "")
        pinned = urlunsplit(("https", netloc, parts.path or "/", parts.query, ""))
        sent = {k: v for k, v in headers.items() if k.lower() not in _OWN_HEADERS}
        sent["Host"] = parts.netloc.rsplit("@", 1)[-1]
        content: bytes | None = None
        if body is not None:
            if isinstance(body, str):
                content = body.encode("utf-8")
            else:
                content = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
                sent.setdefault("Content-Type", "application/json")
        return self._send(method, pinned, sent, content, host=host, address=chosen)

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes | None,
        *,
        host: str,
        address: str,
    ) -> WebhookResult:
        started = time.monotonic()
        timeout = httpx.Timeout(self.max_seconds)
        try:
            with httpx.Client(transport=self.transport, timeout=timeout, follow_redirects=False) as client:
                request = client.build_request(
                    method, url, headers=headers, content=content, extensions={"sni_hostname": host}
                )
                answer = client.send(request, stream=True)
                try:
                    got = bytearray()
                    for chunk in answer.iter_bytes():
                        got += chunk
                        if len(got) > self.max_body:
                            break
                        if time.monotonic() - started > self.max_seconds:
                            return WebhookResult(
                                None, f"no answer within {self.max_seconds:.0f} s", address=address
                            )
                    return WebhookResult(
                        answer.status_code,
                        None,
                        address,
                        bytes(got[: self.max_body]),
                        cut=len(got) > self.max_body,
                    )
                finally:
                    answer.close()
        except httpx.TimeoutException:
            return WebhookResult(None, f"no answer within {self.max_seconds:.0f} s", address=address)
        except httpx.HTTPError as exc:
            return WebhookResult(None, f"could not be called: {type(exc).__name__}: {exc}", address=address)


def _literal_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
