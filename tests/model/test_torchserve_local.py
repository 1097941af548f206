"""handlers.torchserve_local: the config a local TorchServe gets (no server started here)."""
from __future__ import annotations

from pathlib import Path

from handlers.torchserve_local import CONFIG_TEMPLATE, Ports, java_tmpdir, write_config


def _props(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_private_java_tmpdir_is_appended_to_the_templates_vmargs(tmp_path: Path) -> None:
    template_vmargs = _props(CONFIG_TEMPLATE)["vmargs"]
    sock_dir = java_tmpdir(tmp_path / "tmp")
    cfg = _props(write_config(tmp_path / "config.properties", Ports(1, 2, 3, 4, 5), tmpdir=sock_dir))
    assert cfg["vmargs"] == f"{template_vmargs} -Djava.io.tmpdir={sock_dir}"
    assert cfg["inference_address"] == "http://127.0.0.1:1" and cfg["grpc_management_port"] == "5"
    # without tmpdir the template's JVM arguments are left alone
    plain = _props(write_config(tmp_path / "plain.properties", Ports(1, 2, 3, 4, 5)))
    assert plain["vmargs"] == template_vmargs


def test_java_tmpdir_falls_back_to_a_short_path_for_unix_sockets(tmp_path: Path) -> None:
    short = java_tmpdir(tmp_path / "t")
    assert short == tmp_path / "t" and short.is_dir()
    deep = tmp_path / ("x" * 120)
    chosen = java_tmpdir(deep)
    assert chosen != deep and chosen.is_dir() and len(str(chosen)) + len("/.ts.sock.65535") < 100
    chosen.rmdir()
