"""Who the client is: the one identity that rate limits, shares, idempotency keys and own motions use.

A client is its address as the app sees it (the TCP peer, or behind DOODLEPOD_TRUSTED_PROXIES the
address they forwarded: :func:`app.clients.addresses.forwarded_client`), folded to what one party
controls:

* an IPv4 address is itself, also when written as an IPv4-mapped IPv6 address (``::ffff:a.b.c.d``),
  so the two spellings of one host are one client;
* an IPv6 address stands for its /56 (DOODLEPOD_CLIENT_IPV6_PREFIX): one host is given a whole /64
  (SLAAC, privacy addresses), and one home or small site a /56 (RFC 6177; most ISPs), so a /64 per
  client would give each home 256 clients, each with its own shares.

When the server checks bearer tokens (DOODLEPOD_AUTH_TOKEN) the token, hashed, is part of the identity
too (tokens never reach Redis or the logs). :func:`digest` is the short form used in keys and paths.
"""
from __future__ import annotations

import hashlib
import ipaddress

#: Prefix length an IPv6 client is known by, unless DOODLEPOD_CLIENT_IPV6_PREFIX says otherwise.
IPV6_PREFIX = 56


def fold_address(address: str, ipv6_prefix: int = IPV6_PREFIX) -> str:
    """The part of ``address`` that names one client: IPv4 as is (mapped IPv6 folded to it), IPv6 as
    its network of ``ipv6_prefix`` bits (``2001:db8:1:200::/56``); anything that is not an address
    is returned unchanged."""
    text = (address or "").strip()
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> (128 - ipv6_prefix) << (128 - ipv6_prefix), ipv6_prefix)))
    return str(ip)


def client_id(bearer_token: str, address: str, ipv6_prefix: int = IPV6_PREFIX) -> str:
    """The client's identity: the folded address, with the hashed bearer token when one is given.

    An unchecked token would let a client pick a fresh identity per request; and one token is usually
    shared by every install of the mobile app, so a token alone would let one phone use up everyone's
    shares. So the token narrows the address, never replaces it."""
    where = fold_address(address, ipv6_prefix) or "unknown"
    if bearer_token:
        return "t-" + hashlib.sha256(bearer_token.encode()).hexdigest()[:24] + "-" + where
    return "a-" + where


def digest(client: str) -> str:
    """A short fixed-length form of ``client`` for Redis keys and storage paths."""
    return hashlib.sha256(client.encode()).hexdigest()[:24]


def current() -> str:
    """The client of the current Flask request, as :func:`app.http.api.request_client` set it when the
    request began (empty outside a request)."""
    from flask import g, has_request_context

    return g.get("client_identity", "") if has_request_context() else ""
