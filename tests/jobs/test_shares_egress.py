"""Callback destinations in IPv6 clothing (app/jobs/egress.py): the embedded IPv4 address decides."""
from __future__ import annotations

import pytest

from app.jobs.egress import Allowance, CallbackRefused, check_callback


@pytest.mark.parametrize("host, rule", [
    ("[64:ff9b::a00:1]", "private"),            # NAT64 of 10.0.0.1
    ("[64:ff9b::a9fe:a9fe]", "link_local"),     # NAT64 of 169.254.169.254 (cloud metadata)
    ("[64:ff9b::7f00:1]", "loopback"),
    ("[::127.0.0.1]", "loopback"),              # IPv4-compatible
    ("[::a00:1]", "private"),
    ("[::ffff:0:7f00:1]", "loopback"),          # SIIT
    ("[::ffff:0:a9fe:a9fe]", "link_local"),
    ("[2002:7f00:1::]", "loopback"),            # 6to4 of 127.0.0.1
    ("[2002:a00:1::1]", "private"),
    ("[64:ff9b:1::a00:1]", "private"),          # local-use NAT64, /96 reading
    ("[64:ff9b:1:a00:1:100::]", "private"),     # local-use NAT64, /48 reading of 10.0.1.1
    ("[64:ff9b:1::808:808]", "not_global"),     # local-use: never public, whatever it carries
    ("[fec0::1]", "site_local"),
    ("[2001:0:4136:e378:8000:63bf:f5ff:fffe]", "private"),   # Teredo, client 10.0.0.1
])
def test_internal_ipv4_in_ipv6_clothing_is_refused(host, rule):
    with pytest.raises(CallbackRefused) as refused:
        check_callback(f"http://{host}/hook", Allowance())
    assert refused.value.rule == rule


def test_a_name_resolving_to_a_nat64_internal_address_is_refused():
    with pytest.raises(CallbackRefused) as refused:
        check_callback("http://hooks.example.com/h", Allowance(), resolve=lambda h, p: ["64:ff9b::a9fe:a9fe"])
    assert refused.value.rule == "link_local"


@pytest.mark.parametrize("host", ["[64:ff9b::808:808]", "[2002:808:808::1]", "[2606:4700::1111]", "8.8.8.8"])
def test_public_addresses_in_any_clothing_pass(host):
    assert check_callback(f"http://{host}/hook", Allowance()).port == 80


def test_the_allow_list_still_lets_an_operator_through():
    allow = Allowance.parse(["64:ff9b::/96"])
    assert check_callback("http://[64:ff9b::a00:1]/h", allow).address == "64:ff9b::a00:1"
