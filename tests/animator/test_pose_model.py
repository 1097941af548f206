"""The pose model on real pixels (animator.video.pose_model, animator.video.decode, animator.video.motion).

No video of a person is available offline: the videos here are made from a NASA portrait
(tests/fixtures/people), shifted and scaled frame by frame, and written by ffmpeg as H.264 MP4.
Where the person is comes from a silhouette drawn by hand on the photo, not from any model.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image, ImageDraw

from animator.auto_retarget import find_body
from animator.bvh import parse_bvh
from animator.errors import NoPersonError, VideoError
from animator.video.decode import VideoLimits, read_frames
from animator.video.landmarks import INDEX
from animator.video.motion import motion_from_video
from animator.video.pose_model import MODEL_PATH, track_frames
from tests.conftest import REPO
from tests.support.person_video import CANVAS, PHOTO, frame, placements, write_video

#: Her outline in the 512 x 512 photo (hair, face, suit, the helmet held in front of her), x right, y down.
SILHOUETTE = [(225, 12), (275, 22), (298, 60), (300, 110), (292, 150), (300, 175), (310, 220), (335, 262),
              (352, 300), (360, 340), (420, 342), (480, 375), (511, 430), (511, 511), (25, 511), (18, 420),
              (28, 330), (45, 275), (95, 235), (118, 210), (120, 180), (150, 160), (155, 110), (152, 60), (180, 25)]
#: Her face (a box round it), for the nose.
FACE = (170, 60, 280, 170)
CHECKED = ("nose", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow")


def _silhouette() -> np.ndarray:
    mask = Image.new("L", (512, 512), 0)
    ImageDraw.Draw(mask).polygon(SILHOUETTE, fill=1)
    return np.asarray(mask, dtype=bool)


@pytest.fixture(scope="module")
def person_video(tmp_path_factory) -> tuple[Path, list[tuple[float, float, float]]]:
    photo = Image.open(PHOTO).convert("RGB")
    places = placements(24)
    frames = [frame(photo, *p) for p in places]
    return write_video(tmp_path_factory.mktemp("video") / "astronaut.mp4", frames), places


def _inside(mask: np.ndarray, x: float, y: float) -> bool:
    xi, yi = int(round(x)), int(round(y))
    return 0 <= xi < mask.shape[1] and 0 <= yi < mask.shape[0] and bool(mask[yi, xi])


def test_the_model_file_is_the_recorded_one():
    assert hashlib.sha256(MODEL_PATH.read_bytes()).hexdigest() == (
        "f824f5ab3286a3497fa1b7838a13adcb1e5f88cd82ecba9c4d597844499c7ef6")


def test_landmarks_on_the_photo_are_where_she_is():
    photo = np.asarray(Image.open(PHOTO).convert("RGB"))
    track, image = track_frames([photo], fps=30.0)
    assert track.present.tolist() == [True]
    mask = _silhouette()
    for name in CHECKED:
        x, y = image[0, INDEX[name]]
        assert _inside(mask, x, y), (name, x, y)
    nx, ny = image[0, INDEX["nose"]]
    assert FACE[0] <= nx <= FACE[2] and FACE[1] <= ny <= FACE[3]
    # her left shoulder (the person's left) is on the picture's right
    assert image[0, INDEX["left_shoulder"], 0] > image[0, INDEX["right_shoulder"], 0]


def test_landmarks_follow_her_through_a_video(person_video):
    path, places = person_video
    info, fps, frames = read_frames(path)
    assert info.size == CANVAS and fps == pytest.approx(15.0)
    seen = []
    track, image = track_frames(frames, fps, expected=len(places), progress=lambda d, t: seen.append((d, t)))
    assert track.n_frames == len(places) and track.present.all()
    assert seen[-1] == (len(places), len(places)) and [d for d, _ in seen] == list(range(1, len(places) + 1))
    mask = _silhouette()
    for k, (s, dx, dy) in enumerate(places):
        for name in CHECKED:
            x, y = image[k, INDEX[name]]
            assert _inside(mask, (x - dx) / s, (y - dy) / s), (k, name, x, y)
    # root motion: the hips' centre moves right with her (metres, x right), about as far as she drifts
    hips = (track.points[:, INDEX["left_hip"]] + track.points[:, INDEX["right_hip"]]) / 2
    assert hips[-1, 0] - hips[0, 0] > 0.2


def test_a_video_of_her_makes_a_clip_a_drawing_can_play(person_video):
    clip = motion_from_video(person_video[0])
    bvh = parse_bvh(clip.text)
    assert bvh.n_frames == clip.n_frames == 24 and clip.first_frame == 0
    assert bvh.frame_time == pytest.approx(1 / 15, rel=1e-4)
    assert find_body(bvh).hips == "Hips"


def test_a_blank_video_has_no_person(tmp_path):
    blank = write_video(tmp_path / "blank.mp4", [np.full((240, 320, 3), 128, np.uint8)] * 8)
    with pytest.raises(NoPersonError, match="no person"):
        motion_from_video(blank)


def test_video_bounds_come_before_decoding(tmp_path, person_video):
    with pytest.raises(VideoError, match="at most 1 s"):  # a window longer than the limit (a longer video is cut)
        read_frames(person_video[0], VideoLimits(max_seconds=1.0), start_s=0, end_s=1.5)
    with pytest.raises(VideoError, match="pixels per frame"):
        read_frames(person_video[0], VideoLimits(max_pixels=320 * 240))
    with pytest.raises(VideoError, match="bytes"):
        motion_from_video(person_video[0], max_bytes=1000)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00not a video" * 100)
    with pytest.raises(VideoError, match="not a video"):
        read_frames(junk)


def test_a_playlist_cannot_make_ffmpeg_open_another_file(tmp_path, person_video):
    """An HLS playlist naming a local MPEG-TS copy of the video (which plain ffmpeg follows) and a
    concat list are refused: only the MP4/MOV and Matroska/WebM demuxers, only the file itself."""
    segment = tmp_path / "segment.ts"
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-i", str(person_video[0]), "-c", "copy",
                    "-f", "mpegts", str(segment)], check=True, timeout=60)
    playlist = tmp_path / "list.m3u8"
    playlist.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2.0,\n{segment}\n#EXT-X-ENDLIST\n")
    with pytest.raises(VideoError):
        read_frames(playlist)
    concat = tmp_path / "list.txt"
    concat.write_text(f"ffconcat version 1.0\nfile '{person_video[0]}'\n")
    with pytest.raises(VideoError):
        read_frames(concat)
    with pytest.raises(VideoError):
        read_frames(segment)  # MPEG-TS itself is not a phone's format


def test_frames_are_scaled_down_to_the_model_size(tmp_path):
    big = write_video(tmp_path / "big.mp4", [np.full((720, 1280, 3), 90, np.uint8)] * 3, fps=60.0)
    info, fps, frames = read_frames(big, VideoLimits(max_side=320, max_fps=30.0))
    out = list(frames)
    assert info.size == (1280, 720) and fps == 30.0
    assert out[0].shape == (180, 320, 3)


def test_cli_writes_a_clip_and_names_a_blank_video(tmp_path, person_video):
    env_py = [sys.executable, "-m", "animator", "motion-from-video"]
    out = tmp_path / "clip.bvh"
    run = subprocess.run(env_py + [str(person_video[0]), "-o", str(out)], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert parse_bvh(out.read_text()).n_frames == 24
    blank = write_video(tmp_path / "blank.mp4", [np.zeros((240, 320, 3), np.uint8)] * 4)
    run = subprocess.run(env_py + [str(blank), "-o", str(tmp_path / "none.bvh")], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and "no person" in run.stderr
    assert not (tmp_path / "none.bvh").exists()


def test_import_animator_does_not_load_the_pose_model():
    code = "import sys, animator, animator.video.pose_bvh, animator.video.decode; print('mediapipe' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "False", run.stderr
