"""Job callbacks reach only what they should, and a slow receiver holds back nobody else.

Units: the address rules of app/jobs/egress.py (a resolver stub stands in for DNS, which cannot be
made to answer on cue here), and one delivery attempt against a real tarpit socket on loopback.
End to end: gunicorn (gevent) + ``python -m app.worker`` + Valkey + the fake-model TorchServe on
loopback; the receivers are real HTTP servers on loopback, let through by DOODLEPOD_WEBHOOK_ALLOW.
"""
from __future__ import annotations

import time

import pytest
import requests

from app.jobs.egress import Allowance, CallbackRefused, check_callback
from app.jobs.webhooks import deliver
from tests.support import stack, wait
from tests.support.jobstack import app_and_worker
from tests.support.rawhttp import Tarpit
from tests.support.receiver import CallbackReceiver

SECRET = "callback-test-secret"
PUBLIC = "93.184.216.34"


def public_dns(host: str, port: int) -> list[str]:
    return [PUBLIC]


REFUSED = [
    ("http://127.0.0.1:6379/", "loopback"), ("http://localhost/", "internal_name"), ("http://[::1]/", "loopback"),
    ("http://2130706433/", "address_form"), ("http://0x7f.1/", "address_form"), ("http://127.1/", "address_form"),
    ("http://0177.0.0.1/", "address_form"), ("http://169.254.169.254/latest/meta-data/", "link_local"),
    ("http://[fd00:ec2::254]/", "unique_local"), ("http://10.0.0.1/", "private"), ("http://192.168.1.10/", "private"),
    ("http://172.16.0.1/", "private"), ("http://100.64.0.1/", "private"), ("http://224.0.0.1/", "multicast"),
    ("http://0.0.0.0/", "unspecified"), ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://metadata.google.internal/", "internal_name"), ("http://kubernetes.default.svc/", "internal_name"),
    ("http://doodlepod-redis.default.svc.cluster.local:6379/", "internal_name"),
    ("http://doodlepod-redis:6379/", "internal_name"), ("https://user:pw@example.com/hook", "credentials"),
    ("http://:pw@example.com/hook", "credentials"),
]


@pytest.mark.parametrize(("url", "rule"), REFUSED)
def test_internal_and_odd_destinations_are_refused_naming_the_rule(url, rule):
    with pytest.raises(CallbackRefused) as caught:
        check_callback(url, Allowance(), public_dns)
    assert caught.value.rule == rule and caught.value.status == 422 and rule in caught.value.message


def test_a_name_is_refused_when_any_of_its_addresses_is_internal():
    with pytest.raises(CallbackRefused) as caught:
        check_callback("https://hooks.example.com/x", Allowance(), lambda h, p: [PUBLIC, "10.1.2.3"])
    assert caught.value.rule == "private" and "hooks.example.com" in caught.value.message
    with pytest.raises(CallbackRefused) as caught:
        check_callback("https://nowhere.example.com/x", Allowance(), lambda h, p: [])
    assert caught.value.rule == "unresolvable"


def test_public_destinations_pass_and_keep_the_checked_address():
    target = check_callback("https://hooks.example.com:8443/in?x=1", Allowance(), public_dns)
    assert (target.scheme, target.host, target.port, target.path, target.address) == \
        ("https", "hooks.example.com", 8443, "/in?x=1", PUBLIC)


def test_the_allow_list_lets_named_networks_and_hosts_through():
    allow = Allowance.parse(["127.0.0.1/32", "hooks.team.svc", ".corp.internal"])
    assert check_callback("http://127.0.0.1:9/x", allow).address == "127.0.0.1"
    assert check_callback("http://hooks.team.svc/x", allow, lambda h, p: ["10.3.0.7"]).address == "10.3.0.7"
    assert check_callback("http://a.corp.internal/x", allow, lambda h, p: ["10.3.0.8"]).address == "10.3.0.8"
    for url in ("http://127.0.0.2/x", "http://other.team.svc/x"):
        with pytest.raises(CallbackRefused):
            check_callback(url, allow, lambda h, p: ["10.3.0.9"])


def test_delivery_checks_again_and_refuses_a_name_that_now_resolves_inside():
    answers = iter([[PUBLIC], ["127.0.0.1"]])
    check_callback("http://rebind.example.com/x", Allowance(), lambda h, p: next(answers))  # at submit: fine
    outcome = deliver("http://rebind.example.com/x", {"id": "j1", "status": "succeeded"}, SECRET, attempts=3,
                      timeout_s=1, now=lambda: "t", resolve=lambda h, p: next(answers))
    assert not outcome.delivered and outcome.attempts == 1 and outcome.detail.startswith("refused: loopback: ")


def test_one_attempt_ends_at_its_deadline_however_slowly_the_receiver_trickles():
    tarpit = Tarpit(every=0.3)   # each byte well within a per-read timeout: only a total deadline ends it
    try:
        t0 = time.monotonic()
        outcome = deliver(tarpit.url, {"id": "j1", "status": "succeeded"}, SECRET, attempts=1, timeout_s=1.5,
                          now=lambda: "t", allow=Allowance.parse(["127.0.0.1/32"]))
        took = time.monotonic() - t0
    finally:
        tarpit.close()
    assert not outcome.delivered and outcome.detail == "timeout", outcome
    assert 1.4 <= took < 2.5, took


class _RawReceiver:
    """A loopback server that keeps the first request it gets and answers ``answer`` (bytes as they are)."""

    def __init__(self, answer: bytes) -> None:
        import socket
        import threading

        self.request = b""
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]

        def serve() -> None:
            conn, _ = self._server.accept()
            with conn:
                conn.settimeout(5)
                while b"\r\n\r\n" not in self.request:
                    self.request += conn.recv(65536)
                head, _, body = self.request.partition(b"\r\n\r\n")
                length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n")
                                  if ln.lower().startswith(b"content-length:")))
                while len(body) < length:
                    body += conn.recv(65536)
                self.request = head + b"\r\n\r\n" + body
                conn.sendall(answer)

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._thread.join(5)
        self._server.close()


def test_delivery_connects_to_the_checked_address_and_names_the_urls_host():
    """The name is looked up by the egress check only; the connection goes to that address, and the
    request says the URL's own host (a receiver behind a name-based virtual host gets it)."""
    receiver = _RawReceiver(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    looked_up: list[str] = []
    try:
        outcome = deliver(f"http://hooks.example.com:{receiver.port}/h?x=1", {"id": "j1", "status": "succeeded"},
                          SECRET, attempts=1, timeout_s=5, now=lambda: "t",
                          allow=Allowance.parse(["127.0.0.1/32"]),
                          resolve=lambda h, p: looked_up.append(h) or ["127.0.0.1"])
    finally:
        receiver.close()
    assert outcome.delivered and outcome.detail == "HTTP 204", outcome
    assert looked_up == ["hooks.example.com"]
    head = receiver.request.split(b"\r\n\r\n")[0].decode().split("\r\n")
    assert head[0] == "POST /h?x=1 HTTP/1.1"
    assert f"Host: hooks.example.com:{receiver.port}" in head
    assert any(line.startswith("X-Doodlepod-Signature: ") for line in head), head


@pytest.mark.parametrize(("answer", "delivered", "detail"), [
    # a head past MAX_ANSWER_HEAD is read no further: its status line still counts
    (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 200) for i in range(90)) + b"\r\n",
     True, "HTTP 200"),
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", False, "ValueError"),      # not an HTTP answer
    (b"", False, "ValueError"),                                      # closed without an answer
])
def test_an_answers_head_is_bounded_and_must_be_http(answer, delivered, detail):
    receiver = _RawReceiver(answer)
    try:
        outcome = deliver(f"http://127.0.0.1:{receiver.port}/h", {"id": "j1", "status": "succeeded"}, SECRET,
                          attempts=1, timeout_s=5, now=lambda: "t", allow=Allowance.parse(["127.0.0.1/32"]))
    finally:
        receiver.close()
    assert (outcome.delivered, outcome.detail) == (delivered, detail), outcome


# --- end to end ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def page():
    return stack.page_with_character("char1", (800, 600), (200, 60))


@pytest.fixture(scope="module")
def pod(redis_server, torchserve, page):
    image, joints = page
    torchserve.set_control(detector={"mode": "nonwhite"},
                           pose={"mode": "fractions", "fractions": stack.pose_fractions(image, joints)})
    workdir = stack.make_workdir("dp-callbacks-")
    env = {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
           "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url, "DOODLEPOD_RENDER_SIZE": "96",
           "DOODLEPOD_RENDER_MAX_FRAMES": "6", "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_MAX_INFLIGHT": "4",
           "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RUNTIME_DIR": str(workdir / "pod"),
           "DOODLEPOD_WEBHOOK_SECRET": SECRET, "DOODLEPOD_WEBHOOK_ALLOW": "127.0.0.1/32",
           "DOODLEPOD_WEBHOOK_TIMEOUT_S": "4", "DOODLEPOD_WEBHOOK_ATTEMPTS": "3",
           "DOODLEPOD_RATE_LIMIT_PER_MIN": "6000", "DOODLEPOD_RATE_LIMIT_BURST": "1000",
           "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32"}   # clients told apart by X-Forwarded-For
    try:
        with app_and_worker(workdir, env) as app:
            yield app
    finally:
        stack.remove(workdir)


def _submit(pod, page, callback_url: str, client: str = "203.0.113.20") -> requests.Response:
    data = stack.encode(page[0], "PNG")
    return requests.post(f"{pod.url}/animate", files={"image": ("d.png", data, "image/png")},
                         data={"motions": "dab", "callback_url": callback_url},
                         headers={"Prefer": "respond-async", "X-Forwarded-For": client}, timeout=60)


@pytest.mark.redis
@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_internal_callbacks_are_refused_over_http_with_422(pod, page):
    for url, rule in [("http://127.0.0.2:6379/", "loopback"), ("http://2130706433/", "address_form"),
                      ("http://169.254.169.254/", "link_local"), ("http://doodlepod-redis:6379/", "internal_name"),
                      ("http://kubernetes.default.svc/", "internal_name"), ("http://u:p@127.0.0.1/", "credentials")]:
        resp = _submit(pod, page, url)
        assert resp.status_code == 422, (url, resp.status_code, resp.text[:300])
        body = resp.json()
        assert body["error"] == "callback_url_refused" and f"rule {rule}" in body["message"], body
        assert "p@" not in body["message"]


@pytest.mark.redis
@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_tarpit_receiver_does_not_delay_another_clients_callback(pod, page):
    tarpit, normal = Tarpit(every=2.0), CallbackReceiver()
    try:
        for _ in range(4):   # more slow callbacks than the old worker had delivery threads
            assert _submit(pod, page, tarpit.url).status_code == 202
        wait.until(lambda: tarpit.connections >= 2, 60, "the tarpit's callbacks started", every=0.1)
        resp = _submit(pod, page, normal.url, client="198.51.100.20")    # another client
        assert resp.status_code == 202, resp.text
        location = resp.headers["Location"]
        def job_ended() -> dict | None:
            job = requests.get(pod.url + location, timeout=10).json()
            return job if job["status"] in ("succeeded", "failed") else None

        job = wait.until(job_ended, 90, f"{location} ended", every=0.1)
        ended = time.monotonic()
        assert job["status"] == "succeeded", job
        wait.until(lambda: normal.arrived, 20, "the normal receiver's callback", every=0.1)
        assert normal.arrived[0][0] - ended < 5, normal.arrived[0][0] - ended
    finally:
        tarpit.close()
        normal.close()
