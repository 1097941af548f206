"""The video bounds hold for the stream ffmpeg decodes (animator/video.py): every video stream's frame
size is checked, only the first stream is decoded, a frame that grows mid-stream is refused by the
decoder, and a header duration of 100 hours or more is read as such. Files made here with the ffmpeg
that imageio-ffmpeg ships; frames checked by decoding them with it."""
from __future__ import annotations

import io
import subprocess

import imageio_ffmpeg
import pytest
from PIL import Image

from animator.errors import VideoError
from animator.video.decode import VideoLimits, _duration_s, check, probe, read_frames

FFMPEG = imageio_ffmpeg.get_ffmpeg_exe()


def _ffmpeg(*args: str, stdin: bytes | None = None) -> None:
    subprocess.run([FFMPEG, "-hide_banner", "-loglevel", "error", "-y", *args], input=stdin, check=True,
                   timeout=120, capture_output=True)


def test_a_large_second_stream_is_refused_before_decoding(tmp_path):
    path = tmp_path / "two.mkv"
    _ffmpeg("-f", "lavfi", "-i", "color=c=red:s=64x64:d=1:r=10", "-f", "lavfi", "-i",
            "color=c=blue:s=1600x1600:d=0.3:r=10", "-map", "0", "-map", "1", "-c:v:0", "libx264",
            "-c:v:1", "mjpeg", str(path))
    info = probe(path)
    assert info.size == (64, 64) and info.streams == ((64, 64), (1600, 1600))
    with pytest.raises(VideoError, match="1600x1600"):
        check(info, VideoLimits(max_pixels=1_000_000), path)
    check(info, VideoLimits(max_pixels=4_000_000), path)
    _, _, frames = read_frames(path, VideoLimits(max_pixels=4_000_000, max_side=64))
    first = next(frames)
    assert first.shape == (64, 64, 3) and first[..., 0].mean() > 200    # the first (red) stream is decoded
    frames.close()


def test_frames_of_a_motion_jpeg_stream_that_grow_past_the_bound_are_never_decoded(tmp_path):
    def jpeg(size: int) -> bytes:
        out = io.BytesIO()
        Image.new("RGB", (size, size), (200, 30, 30)).save(out, "JPEG")
        return out.getvalue()

    path = tmp_path / "grows.mkv"
    _ffmpeg("-f", "image2pipe", "-framerate", "10", "-c:v", "mjpeg", "-i", "-", "-c:v", "copy", str(path),
            stdin=b"".join([jpeg(64)] * 5 + [jpeg(1600)] * 2))
    info = probe(path)
    assert info.streams == ((64, 64),)                     # the header shows only the first frames' size
    _, _, frames = read_frames(path, VideoLimits(max_pixels=1_000_000, max_side=64))
    assert len(list(frames)) == 5                          # the decoder refused the two large frames
    _, _, frames = read_frames(path, VideoLimits(max_pixels=4_000_000, max_side=64))
    assert len(list(frames)) == 7                          # within the bound they are decoded


def test_a_duration_of_a_hundred_hours_is_not_read_as_zero():
    assert _duration_s("  Duration: 100:00:00.00, start: 0.000000") == 360000.0
    assert _duration_s("  Duration: 00:00:20.50, start") == 20.5
    assert _duration_s("Duration: N/A") is None


@pytest.mark.parametrize("frames", [2, 3, 5, 6])
def test_a_person_seen_in_a_few_frames_makes_a_short_clip_not_a_crash(frames):
    """A 3-6 frame track met a smoothing window longer than itself (500 internal_error before)."""
    import numpy as np

    from animator.video.landmarks import N_LANDMARKS, PoseTrack, smooth
    from animator.video.pose_bvh import track_to_bvh

    rng = np.random.default_rng(0)
    base = rng.normal(size=(N_LANDMARKS, 3)) * 0.3
    points = np.stack([base + rng.normal(size=base.shape) * 0.01 for _ in range(frames)])
    clip = track_to_bvh(PoseTrack(points=points, present=np.ones(frames, bool), fps=15.0))
    assert clip.n_frames == frames and "MOTION" in clip.text
    still = np.ones((frames, N_LANDMARKS, 3))
    assert np.array_equal(smooth(still, 1.5), still)      # a still pose stays exactly still


def test_the_probe_reads_sizes_from_the_header_without_decoding_a_frame(tmp_path):
    """Issue 41 S10: the probe decoded the first frame before the size check (a 1.9 MiB file took the
    worker to 2266 MiB, over its 2 GiB limit). Here a 12000x12000 Motion-JPEG frame (under 1 MiB
    of file) is refused under the worker's memory limit (a 2 GiB cgroup) using a few MiB: its size
    comes from the header, read with the decoder's own bound (-max_pixels)."""
    import sys

    from tests.support.cgroup import join, memory_cgroup, peak_mb

    path = tmp_path / "huge.mkv"
    _ffmpeg("-f", "lavfi", "-i", "color=c=white:s=12000x12000:d=0.2:r=5", "-c:v", "mjpeg", "-pix_fmt", "yuvj420p",
            "-q:v", "31", str(path))
    assert path.stat().st_size < 2**20
    code = ("import sys; from animator.video.decode import read_window, VideoLimits; "
            "from animator.errors import VideoError\n"
            "try:\n    read_window(sys.argv[1], VideoLimits())\n    print('accepted')\n"
            "except VideoError as e:\n    print('refused', e)")
    with memory_cgroup(2048) as procs:
        run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                             preexec_fn=lambda: join(procs))
        peak = peak_mb(procs)
    assert run.stdout.startswith("refused") and "8294400 pixels" in run.stdout, (run.stdout, run.stderr[-500:])
    assert peak < 300, f"reading the header took {peak:.0f} MiB"
