"""POST /motions' video window (issue 33 item 10): `start` and `end` are checked before the job is queued.

In-process app (no Redis: a valid request would then answer 503 from the job queue, which is what
a well-formed window reaches); the video is a real MP4 made with ffmpeg.
"""
from __future__ import annotations

import io

import numpy as np
import pytest


@pytest.fixture(scope="module")
def mp4(tmp_path_factory) -> bytes:
    import imageio_ffmpeg

    path = tmp_path_factory.mktemp("video") / "clip.mp4"
    gen = imageio_ffmpeg.write_frames(str(path), (64, 48), fps=10, codec="libx264", macro_block_size=16,
                                      ffmpeg_log_level="error")
    gen.send(None)
    for k in range(10):
        gen.send(np.full((48, 64, 3), k * 20, np.uint8))
    gen.close()
    return path.read_bytes()


@pytest.mark.parametrize("fields, says", [
    ({"start": "abc"}, "'start' must be a number"),
    ({"start": "-1"}, "0 or more"),
    ({"end": "nan"}, "'end' must be a number"),  # digits only (issue 41 S15): nan is no number
    ({"start": "5", "end": "5"}, "must come after"),
    ({"start": "1", "end": "30"}, "at most 20 s"),
])
def test_a_bad_window_is_refused_before_the_job(client, mp4, fields, says):
    r = client.post("/motions", data={"video": (io.BytesIO(mp4), "clip.mp4"), **fields},
                    content_type="multipart/form-data")
    assert r.status_code == 400 and r.json["error"] == "bad_request", r.json
    assert says in r.json["message"]


def test_a_good_window_reaches_the_job_queue(client, mp4):
    r = client.post("/motions", data={"video": (io.BytesIO(mp4), "clip.mp4"), "start": "0.5", "end": "20.5"},
                    content_type="multipart/form-data")
    assert r.status_code == 503, r.json  # no Redis in this app: the window itself was accepted
