"""Issue 41 S18: ffmpeg that does not describe a video in time is a busy machine, not a broken file.

imageio-ffmpeg waits a fixed 10 s for ffmpeg to describe the stream it decodes; past that it raises
"Could not load meta information", which read_window reported as ``invalid_video`` (the client's file,
final). Here ffmpeg is a real process that stalls: a wrapper that runs the real ffmpeg to read the header
and sleeps when asked to decode (as a stopped or starved ffmpeg would), so the test does not depend on
how fast this machine is."""
from __future__ import annotations

import subprocess

import imageio_ffmpeg
import pytest

from animator.errors import VideoError, VideoTimeout
from animator.video.decode import VideoLimits, read_window
from app.errors import InvalidVideo, VideoReadTimeout, from_animator

FFMPEG = imageio_ffmpeg.get_ffmpeg_exe()


@pytest.fixture
def stalling_ffmpeg(tmp_path, monkeypatch) -> None:
    wrapper = tmp_path / "ffmpeg"
    wrapper.write_text(f'#!/bin/sh\nfor last; do :; done\n[ "$last" = "-" ] && exec sleep 60\nexec {FFMPEG} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(wrapper))   # read by imageio-ffmpeg at every call


def test_a_stalled_decode_is_a_timeout_not_a_broken_file(tmp_path, stalling_ffmpeg):
    path = tmp_path / "red.mp4"
    subprocess.run([FFMPEG, "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "color=c=red:s=64x64:d=1:r=10", "-c:v", "libx264", str(path)], check=True, timeout=120,
                   capture_output=True)
    info, used, _, frames = read_window(path, VideoLimits(max_side=64))   # the header: read by the real ffmpeg
    assert info.size == (64, 64)
    with pytest.raises(VideoTimeout, match="did not describe the video within 10 s") as caught:
        next(frames)
    error = from_animator(caught.value)
    assert isinstance(error, VideoReadTimeout) and error.status == 503 and error.retryable
    assert error.code == "video_read_timeout"
    # a file ffmpeg cannot read is still the client's
    broken = from_animator(VideoError(path, "ffmpeg could not decode the video: moov atom not found"))
    assert isinstance(broken, InvalidVideo) and not broken.retryable
