"""Hostile or odd input checked on the app's pieces in process (no server needed)."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
from PIL import Image

from app.config import load_settings
from app.render import steps
from tests.conftest import REPO

CHAR1 = REPO / "tests" / "fixtures" / "animated_drawings" / "examples" / "characters" / "char1" / "texture.png"


def test_a_16_bit_greyscale_png_keeps_its_drawing() -> None:
    # Pillow clips 16-bit samples (0..65535) to 255 in convert("RGB"): all white paper
    grey8 = np.asarray(Image.open(CHAR1).convert("L"))
    grey16 = grey8.astype(np.uint16) * 257
    buf = io.BytesIO()
    Image.fromarray(grey16).save(buf, format="PNG")
    assert Image.open(io.BytesIO(buf.getvalue())).mode.startswith("I")
    img = steps.prepare_image(buf.getvalue(), 10**8, 4000)
    got = img.rgb[..., 0].astype(int)
    assert np.abs(got - grey8).max() <= 1
    assert (got < 128).mean() > 0.01  # the ink is still there


def test_forwarded_headers_are_trusted_only_from_loopback_by_default() -> None:
    # forwarded_allow_ips must not be "*": any client could then set X-Forwarded-Proto or SCRIPT_NAME
    assert load_settings({}).forwarded_allow_ips == ("127.0.0.1", "::1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOODLEPOD_") and k != "FORWARDED_ALLOW_IPS"}
    code = ("import runpy; ns = runpy.run_path('app/gunicorn_conf.py'); print(ns['forwarded_allow_ips']); "
            "ns['on_exit'](None)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "127.0.0.1,::1"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**env, "DOODLEPOD_FORWARDED_ALLOW_IPS": "10.0.0.0/8, 192.168.1.2"})
    assert out.stdout.strip() == "10.0.0.0/8,192.168.1.2"


def test_json_fields_are_bounded_in_depth_and_number_length() -> None:
    import pytest

    from app.errors import BadRequest, TooLarge
    from app.intake.body import MAX_JSON_DEPTH, json_depth, parse_json

    assert json_depth('{"a": [1, {"b": "[[[[ not nesting ]]]] \\" [["}]}') == 3  # brackets in strings skipped
    assert parse_json('{"root": [264, 397.5]}', "joints") == {"root": [264, 397.5]}
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    for text, match in ((deep, "nested deeper"), ("[" + "9" * 400 + "]", "too long"), ("[NaN]", "not a number"),
                        ("[1e400000000000000000000000000000000]", "too long"), ("{not json", "not valid JSON"),
                        ("[" * 100000 + "]" * 100000, "nested deeper")):
        with pytest.raises(BadRequest, match=match):
            parse_json(text, "joints")
    with pytest.raises(TooLarge):
        parse_json("[" + "1," * 1000 + "1]", "joints", max_bytes=1024)


def test_json_is_bounded_in_breadth_in_the_pass_that_checks_depth() -> None:
    """Issue 41 S1: shallow but wide JSON (millions of empty lists) is refused before decoding."""
    import time

    import pytest

    from app.errors import TooLarge
    from app.intake.body import MAX_JSON_TOKENS, json_shape, parse_json

    assert json_shape('{"a": [1, "x,y:[]"]}') == (2, 8)  # strings are one token, their commas none
    fits = "[" + ",".join(["[1, 2]"] * 1000) + "]"
    assert len(parse_json(fits, "body")) == 1000
    wide = "[" + "[[]]," * (4 * 2**20) + "[[]]]"  # 20 MiB
    t0 = time.perf_counter()
    with pytest.raises(TooLarge, match=f"more than {MAX_JSON_TOKENS} JSON tokens"):
        parse_json(wide, "body")
    assert time.perf_counter() - t0 < 0.5


def test_log_records_take_one_line_whatever_the_client_sent() -> None:
    import logging

    from app.logs import LOG_FORMAT, SafeFormatter

    record = logging.LogRecord("doodlepod.http", logging.WARNING, __file__, 1, "unknown motion %s",
                               ("dab\n2026-01-01 INFO forged\r\x1b[31m\u2028",), None)
    record.request_id = "-"
    line = SafeFormatter(LOG_FORMAT).format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert "dab\\n2026-01-01 INFO forged\\r\\x1b[31m\\u2028" in line
    try:
        raise ValueError("bad\nforged line")
    except ValueError:
        import sys
        record.exc_info = sys.exc_info()
    text = SafeFormatter(LOG_FORMAT).format(record)
    assert all(line.startswith(" ") for line in text.splitlines()[2:])  # the traceback is indented


def test_only_trusted_peers_choose_the_urls_host() -> None:
    from app.clients import trusted_peer

    loopback = ("127.0.0.1", "::1")
    assert trusted_peer("127.0.0.1", loopback) and trusted_peer("::1", loopback)
    assert not trusted_peer("203.0.113.9", loopback)
    assert trusted_peer("10.1.2.3", ("10.0.0.0/8",)) and not trusted_peer("11.1.2.3", ("10.0.0.0/8",))
    assert trusted_peer("203.0.113.9", ("*",)) and not trusted_peer("not an address", loopback)
