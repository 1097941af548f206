"""Issue 8 findings checked on the app's pieces in process (no server needed)."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
from PIL import Image

from app import jobs
from app.config import load_settings
from tests.conftest import REPO

CHAR1 = REPO / "tests" / "fixtures" / "animated_drawings" / "examples" / "characters" / "char1" / "texture.png"


def test_a_16_bit_greyscale_png_keeps_its_drawing() -> None:
    # finding 13: Pillow clips 16-bit samples (0..65535) to 255 in convert("RGB"): all white paper
    grey8 = np.asarray(Image.open(CHAR1).convert("L"))
    grey16 = grey8.astype(np.uint16) * 257
    buf = io.BytesIO()
    Image.fromarray(grey16).save(buf, format="PNG")
    assert Image.open(io.BytesIO(buf.getvalue())).mode.startswith("I")
    img = jobs.prepare_image(buf.getvalue(), 10**8, 4000)
    got = img.rgb[..., 0].astype(int)
    assert np.abs(got - grey8).max() <= 1
    assert (got < 128).mean() > 0.01  # the ink is still there


def test_forwarded_headers_are_trusted_only_from_loopback_by_default() -> None:
    # finding 15: forwarded_allow_ips was "*": any client could set X-Forwarded-Proto or SCRIPT_NAME
    assert load_settings({}).forwarded_allow_ips == ("127.0.0.1", "::1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOODLEPOD_") and k != "FORWARDED_ALLOW_IPS"}
    code = ("import runpy; ns = runpy.run_path('app/gunicorn_conf.py'); print(ns['forwarded_allow_ips']); "
            "ns['on_exit'](None)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "127.0.0.1,::1"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**env, "DOODLEPOD_FORWARDED_ALLOW_IPS": "10.0.0.0/8, 192.168.1.2"})
    assert out.stdout.strip() == "10.0.0.0/8,192.168.1.2"
