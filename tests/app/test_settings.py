"""The settings table (app/config.py): every setting documented and parsed, bad values refused, and no
other module reading the environment for one."""
from __future__ import annotations

import re

import pytest

from app import config
from app.config import SETTINGS, SettingsError, load_settings, unknown_variables
from tests.conftest import REPO


def test_every_setting_is_documented_and_parses_its_default() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for s in SETTINGS:
        assert re.fullmatch(r"DOODLEPOD_[A-Z0-9_]+", s.name)
        assert len(s.description) > 15, s.name
    settings = load_settings({})
    assert settings.port == 8000 and settings.storage == "local"
    assert settings.default_motions == ("dab", "jumping", "zombie")
    table = config.markdown_table()
    assert all(f"`{n}`" in table for n in names)


def test_settings_parse_and_reject_bad_values() -> None:
    s = load_settings({"DOODLEPOD_PORT": "9000", "DOODLEPOD_ACCESS_LOG": "off",
                       "DOODLEPOD_DEFAULT_MOTIONS": "dab, zombie", "DOODLEPOD_STORAGE": "S3"})
    assert (s.port, s.access_log, s.default_motions, s.storage) == (9000, False, ("dab", "zombie"), "s3")
    with pytest.raises(SettingsError, match="DOODLEPOD_PORT"):
        load_settings({"DOODLEPOD_PORT": "eighty"})
    with pytest.raises(SettingsError, match="DOODLEPOD_STORAGE"):
        load_settings({"DOODLEPOD_STORAGE": "ftp"})
    with pytest.raises(SettingsError, match="DOODLEPOD_RENDER_FPS"):
        load_settings({"DOODLEPOD_RENDER_FPS": "-3"})
    assert load_settings({"DOODLEPOD_RENDER_FPS": "Native"}).render_fps == "native"
    with pytest.raises(SettingsError, match="DOODLEPOD_REQUEST_DEADLINE_S"):
        load_settings({"DOODLEPOD_REQUEST_DEADLINE_S": "0"})
    assert unknown_variables({"DOODLEPOD_PROT": "1", "DOODLEPOD_PORT": "1", "DOODLEPOD_VENV": "x",
                              "DOODLEPOD_RUN_DIR": "x"}) == ["DOODLEPOD_PROT"]


def test_no_module_reads_the_environment_for_a_setting_except_config() -> None:
    for path in (REPO / "app").rglob("*.py"):
        if path.name in ("config.py",):
            continue
        text = path.read_text()
        for m in re.finditer(r"environ(?:\.get)?\(?\[?[\"'](DOODLEPOD_[A-Z_]+)", text):
            # gunicorn_conf and create_app *write* DOODLEPOD_RUNTIME_DIR for the workers; nothing reads around the table
            assert m.group(1) == "DOODLEPOD_RUNTIME_DIR", f"{path.name} reads {m.group(1)} outside app/config.py"
