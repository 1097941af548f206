"""Which addresses a job callback may reach: public ones, plus what the operator allows.

A ``callback_url`` is checked when the request is made (422 ``callback_url_refused`` naming the rule
it broke) and again by the worker right before each delivery, which then connects to the very
address it checked (DNS may answer differently a second time; the name is never resolved again
between the check and the connection).

Refused, unless DOODLEPOD_WEBHOOK_ALLOW lets it through:

- ``credentials``: a user or password in the URL (they would be shown in GET /jobs and logged);
- ``address_form``: a host that is a number but not a dotted quad (``2130706433``, ``0x7f.1``,
  ``0177.0.0.1``, ``127.1``): resolvers read those as IPv4 addresses, people do not;
- ``internal_name``: ``localhost``, a single-label name (``doodlepod-redis``) or a name under
  ``.svc``, ``.cluster.local``, ``.internal``, ``.local``, ``.localhost`` or ``.home.arpa``: names of
  the cluster or the host;
- an address that is ``loopback``, ``link_local`` (169.254.0.0/16, fe80::/10: cloud metadata
  services), ``private`` (RFC 1918, 100.64.0.0/10), ``unique_local`` (fc00::/7), ``multicast``,
  ``unspecified`` or otherwise ``not_global`` (reserved, documentation, benchmarking ranges), also
  when written in IPv6 clothing (IPv4-mapped, SIIT, IPv4-compatible, NAT64 64:ff9b::/96 and
  64:ff9b:1::/48, 6to4, Teredo: the embedded IPv4 address decides, :func:`embedded_ipv4`), and
  ``site_local`` (fec0::/10); every address a name resolves to must pass;
- ``unresolvable``: the name has no address.

DOODLEPOD_WEBHOOK_ALLOW is a comma-separated list of networks (``10.20.0.0/16``, ``127.0.0.1/32``)
whose addresses are allowed, and host names (``hooks.ns.svc``, or ``.example.internal`` for every
name under it) that are allowed whatever they resolve to.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..clients.lookups import Resolver, ResolverBusy, ResolveTimeout, system_resolver
from ..errors import ClientError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

INTERNAL_SUFFIXES = (".svc", ".cluster.local", ".internal", ".local", ".localhost", ".home.arpa")
#: A host made only of numbers (decimal, octal or 0x-hex parts): an IPv4 address in some spelling.
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$", re.IGNORECASE)


class CallbackRefused(ClientError):
    """The `callback_url` names an address the server does not call (internal, odd spelling,
    credentials) or a name that does not resolve in time; the message names the rule (see the module)."""
    status, code = 422, "callback_url_refused"

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"callback_url refused (rule {rule}): {message}")
        self.rule = rule


@dataclass(frozen=True)
class Target:
    """A checked callback URL: where to connect (``address``, ``port``) and what to say (``host``, ``path``)."""

    scheme: str
    host: str          # the name as written (Host header, TLS server name)
    port: int
    path: str          # path and query
    address: str       # the checked address the connection goes to


@dataclass(frozen=True)
class Allowance:
    """The operator's DOODLEPOD_WEBHOOK_ALLOW, parsed."""

    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    hosts: tuple[str, ...] = ()      # exact names, or ".suffix" for names under it

    @classmethod
    def parse(cls, entries: Sequence[str]) -> Allowance:
        networks, hosts = [], []
        for entry in entries:
            text = entry.strip().lower()
            if not text:
                continue
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                hosts.append(text.rstrip("."))
        return cls(tuple(networks), tuple(hosts))

    def allows_host(self, host: str) -> bool:
        return any(host == h or (h.startswith(".") and host.endswith(h)) for h in self.hosts)

    def allows_address(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which a translator or tunnel on the path would reach:
    IPv4-mapped ``::ffff:a.b.c.d``, SIIT ``::ffff:0:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64
    ``64:ff9b::a.b.c.d`` (RFC 6052) and the local-use ``64:ff9b:1::/48`` (RFC 8215, read as a /48
    and as a /96 prefix), 6to4 ``2002:AABB:CCDD::/48`` and Teredo (server and client address)."""
    raw = ip.packed
    as4 = ipaddress.IPv4Address
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip in _SIIT or ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):
        return [as4(raw[12:16])]
    if ip in _NAT64_LOCAL:
        # read with a /96 and with a /48 prefix; the reading of the other length is all zeros
        readings = [a for a in (as4(raw[12:16]), as4(raw[6:8] + raw[9:11])) if int(a)]
        return readings or [as4(0)]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    return []


def address_rule(ip: IPAddress) -> str | None:
    """The rule a destination address breaks, or None for a public address. An IPv6 address that
    carries an IPv4 address (:func:`embedded_ipv4`) is judged by what it carries: its IPv4 address's
    rule, whatever the library's flags say of the IPv6 form; the local-use NAT64 prefix and the
    deprecated site-local fec0::/10 are never public."""
    if isinstance(ip, ipaddress.IPv6Address):
        carried = embedded_ipv4(ip)
        for v4 in carried:
            rule = address_rule(v4)
            if rule is not None:
                return rule
        if ip in _NAT64_LOCAL:
            return "not_global"
        if ip in _SITE_LOCAL:
            return "site_local"
        if carried:  # a translator's or tunnel's form of public IPv4 addresses
            return None
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link_local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv6Address) and ip in _UNIQUE_LOCAL:
        return "unique_local"
    if ip.is_private or ip in _SHARED:
        return "private"
    if not ip.is_global:
        return "not_global"
    return None


_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
_SIIT = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SHARED = ipaddress.ip_network("100.64.0.0/10")


def check_callback(url: str, allow: Allowance, resolve: Resolver = system_resolver) -> Target:
    """``url`` checked against the rules and resolved; raises :class:`CallbackRefused` naming the rule."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise CallbackRefused("credentials", "a callback URL may not carry a user name or password; the "
                              "X-Doodlepod-Signature header authenticates callbacks")
    host = (parts.hostname or "").rstrip(".").lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise CallbackRefused("address_form", "the port is not a number from 1 to 65535") from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    literal = _literal(host)
    if literal is None and _NUMERIC_HOST.match(host):
        raise CallbackRefused("address_form", f"{host!r} is an IPv4 address in an unusual spelling; write "
                              "a name or a dotted quad")
    host_allowed = allow.allows_host(host)
    if literal is None and not host_allowed:
        if host == "localhost" or "." not in host or host.endswith(INTERNAL_SUFFIXES):
            raise CallbackRefused("internal_name", f"{host!r} is a cluster-internal or local name")
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = list(resolve(host, port))
        except (ResolveTimeout, ResolverBusy):
            raise  # not a refusal: the caller decides (a request answers 422 dns_timeout, delivery retries)
        except (OSError, UnicodeError):
            addresses = []
        if not addresses:
            raise CallbackRefused("unresolvable", f"{host!r} has no address")
    for text in addresses:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
        rule = address_rule(ip)
        if rule is not None and not host_allowed and not allow.allows_address(ip):
            shown = host if literal is not None else f"{host!r} resolves to {ip}, which"
            kind = rule.replace("_", "-")
            raise CallbackRefused(rule, f"{shown} is {'an' if kind[0] in 'aeiu' else 'a'} {kind} address; "
                                  "callbacks go only to public addresses (DOODLEPOD_WEBHOOK_ALLOW lists exceptions)")
    return Target(parts.scheme, host, port, path, addresses[0].split("%", 1)[0])


def _literal(host: str) -> IPAddress | None:
    """The address if ``host`` is a dotted-quad IPv4 or an IPv6 literal, else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
