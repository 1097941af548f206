"""Where a request comes from: the TCP peer, or behind a trusted proxy the address it forwarded.

DOODLEPOD_TRUSTED_PROXIES names the proxies whose X-Forwarded-For is believed (the right-most address
that is not one of them: the left part of the header is whatever the client wrote);
DOODLEPOD_FORWARDED_ALLOW_IPS the peers whose scheme and host the answers' URLs are built from, as
gunicorn decides it. Pure functions of the addresses and the settings: :mod:`app.http.api` applies them
to the request.
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache


def forwarded_client(peer: str, forwarded: list[str], trusted: tuple[str, ...]) -> str:
    """The client behind ``peer`` given the X-Forwarded-For header lines and the trusted networks."""
    nets = _networks(tuple(t for t in trusted if t != "*"))
    if not nets or not _in(peer, nets):
        return peer
    hops = [h.strip() for line in forwarded for h in line.split(",") if h.strip()]
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            return peer  # a hop that is not an address: trust nothing further left
        if not _in(address, nets):
            return address
    return peer


def _address(text: str) -> str | None:
    """An address from an X-Forwarded-For entry (``1.2.3.4``, ``1.2.3.4:5678``, ``[::1]:80``, ``::1``)."""
    text = text.strip()
    if text.startswith("[") and "]" in text:
        text = text[1:text.index("]")]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def _in(address: str, nets: tuple) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in nets)


def trusted_peer(address: str | None, allowed: tuple[str, ...]) -> bool:
    """Whether ``address`` (the peer) is one of the trusted proxies, as gunicorn decides it."""
    if "*" in allowed or not address:  # no address: a UNIX socket, which gunicorn trusts too
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in _networks(allowed))


@lru_cache(maxsize=8)
def _networks(allowed: tuple[str, ...]) -> tuple:
    nets = []
    for entry in allowed:
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            pass
    return tuple(nets)
