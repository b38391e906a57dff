"""Where a webhook stage may connect — pure (docs/pipelines.md, "Extensions and deviations").

The configuration's check (:data:`~.types.WebhookUrl`) refuses an address written as a private
one; a name can still resolve to one (an attacker's DNS answers 169.254.169.254, or 127.0.0.1).
:func:`address_problem` is the check of each address a name resolves to, made when the call is:
the caller connects only to an address it passed, and refuses the call when any one of the
addresses fails (a hostile DNS answer may mix a public address with a private one).
"""

from __future__ import annotations

import ipaddress

#: NAT64's well-known prefix: an IPv6 address that reaches the IPv4 address in its last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches (mapped, 6to4, Teredo's server side, NAT64), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_problem(text: str) -> str | None:
    """None when a webhook may connect to the IP address ``text``; else why not."""
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return f"{text!r} is not an IP address"
    for each in (address, _embedded(address)):
        if each is None:
            continue
        if not each.is_global or each.is_multicast or each.is_reserved or each.is_unspecified:
            return (
                f"{text} is a private, loopback, link-local or metadata address "
                "(a webhook calls only public addresses)"
            )
    return None
