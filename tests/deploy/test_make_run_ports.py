"""A second `make run` beside a first: the busy-port message names the setting that moves the port it
found taken (8080 is TorchServe's: DOODLEPOD_PORT would not help) and a full set of other ports, and
nothing is started. Real `make run`, real sockets on loopback."""
from __future__ import annotations

import re
import socket

import pytest

from tests.deploy.test_make_run import MakeRun

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def make_run(tmp_path):
    run = MakeRun(tmp_path)
    yield run
    run.kill_leftovers()


@pytest.mark.parametrize("taken, setting", [("ts", "DOODLEPOD_TORCHSERVE_URL"),
                                            ("mgmt", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL"),
                                            ("redis", "DOODLEPOD_RUN_REDIS_PORT")])
def test_a_busy_port_names_its_own_setting(make_run, taken, setting) -> None:
    port = getattr(make_run, taken)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        make_run.start()
        rc = make_run.proc.wait(timeout=120)
    log = make_run.output()
    assert rc != 0 and f"port {port} is already in use" in log, log[-2000:]
    line = next(line for line in log.splitlines() if f"port {port} is already in use" in line)
    assert setting in line, line
    # the suggestion moves every port, so that it works whichever one was taken
    suggestion = re.sub(r"\\\n\s*", " ", log.split("ports of its own", 1)[1])
    for name in ("DOODLEPOD_PORT=", "DOODLEPOD_TORCHSERVE_URL=", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL=",
                 "DOODLEPOD_RUN_TS_METRICS_PORT=", "DOODLEPOD_RUN_TS_GRPC_PORT=", "DOODLEPOD_RUN_REDIS_PORT=",
                 "DOODLEPOD_RUN_DIR=", "make run"):
        assert name in suggestion, suggestion
    assert "starting" not in log and "phase 1" not in log, "nothing may start before the ports are checked"
    assert not make_run.leftovers()
