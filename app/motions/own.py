"""Motions made from a client's video (POST /motions): BVH clips that client names in their renders
exactly like library motions, until they expire.

* Making one (the ``motion_from_video`` job, :func:`make_motion`): the video goes to the scratch
  folder, :func:`animator.video.motion.motion_from_video` finds the person frame by frame (the
  job's ``progress`` follows the frames), and the clip is stored.
* Where it lives: the clip in the storage at ``motions/own/<client digest>/<name>.bvh``; its record
  in Redis at ``<prefix>own-motion:<client digest>:<name>`` (frames, fps, seconds, expiry), with a
  TTL of DOODLEPOD_EXPIRY_HOURS, the storage's own expiry (its sweep, or the bucket's lifecycle
  rule, removes the clip like any animation). Once the record is gone the name no longer resolves.
* Rendering (:meth:`OwnMotions.resolve`): a name that is not in the library is looked up for the
  asking client only; its clip is copied to the scratch folder as an :class:`app.motions.library.UploadedMotion`
  (retarget config derived from the clip's skeleton, as for an uploaded BVH) and removed after the request.

Names are ``video-`` and 12 hex digits: they cannot be guessed, and a client only ever sees its own.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..orders import VideoOrder
from .library import UploadedMotion

log = logging.getLogger("doodlepod.motions")

PREFIX = "motions/own/"
NAME = re.compile(r"^video-[0-9a-f]{12}$")
#: Seconds between two progress updates written to the job's record.
PROGRESS_EVERY_S = 0.5


def _digest(client: str) -> str:
    return hashlib.sha256(client.encode()).hexdigest()[:24]


class OwnMotions:
    """Clients' own motions over the storage (clips) and Redis (records with a TTL)."""

    def __init__(self, redis: Any, key_prefix: str, storage: Any, ttl_s: int) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.storage = storage
        self.ttl_s = int(ttl_s)

    def _record_key(self, client: str, name: str) -> str:
        return f"{self.key_prefix}own-motion:{_digest(client)}:{name}"

    def save(self, client: str, name: str, text: str, info: dict[str, Any], deadline: Any) -> dict[str, Any]:
        """Store the clip and its record; the motion's public description."""
        key = f"{PREFIX}{_digest(client)}/{name}.bvh"
        self.storage.put(key, text.encode(), "text/plain", deadline)
        expires = datetime.fromtimestamp(time.time() + self.ttl_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = {"name": name, "key": key, "expires": expires, **info}
        self.redis.set(self._record_key(client, name), json.dumps(record), ex=self.ttl_s)
        return {k: v for k, v in record.items() if k != "key"}

    def resolve(self, client: str, name: str, folder: Path, deadline: Any):
        """The client's motion ``name`` as an UploadedMotion in ``folder`` (the caller removes it), or None."""
        if not NAME.match(name):
            return None
        raw = self.redis.get(self._record_key(client, name))
        if raw is None:
            return None
        record = json.loads(raw)
        data = self.storage.get(record["key"], deadline)
        if data is None:
            log.warning("own motion %s: record without its clip %s", name, record["key"])
            return None
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}-{os.getpid()}-{time.monotonic_ns()}.bvh"
        path.write_bytes(data)
        return UploadedMotion(name=name, motion_cfg=path, frames=int(record["frames"]), joints=int(record["joints"]),
                              frame_time_s=1.0 / float(record["fps"]), family="video",
                              sha256=hashlib.sha256(data).hexdigest())

    def find(self, client: str, names: list[str], folder: Path, deadline: Any) -> dict[str, UploadedMotion]:
        """The client's own motions among ``names``, copied to ``folder`` (name -> motion; the caller removes
        them); on an error, those copied so far are removed."""
        found: dict[str, UploadedMotion] = {}
        try:
            for name in dict.fromkeys(names):
                motion = self.resolve(client, name, folder, deadline)
                if motion is not None:
                    found[name] = motion
        except BaseException:
            for motion in found.values():
                motion.remove()
            raise
        return found


def make_motion(ctx: Any, order: VideoOrder, video: bytes, job_id: str, deadline: Any,
                report: Any = None) -> dict[str, Any]:
    """The ``motion_from_video`` job (``order``): the person's movement in ``video`` as the client's own motion.
    ``report(progress)``: where the frames read go (the worker's job progress; default: the job
    record directly)."""
    from animator.video.decode import VideoLimits
    from animator.video.motion import motion_from_video

    from ..errors import animator_boundary

    settings = ctx.settings
    folder = Path(ctx.pipeline.scratch_dir) / "videos"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{job_id}.video"
    path.write_bytes(video)
    last = [0.0]

    def progress(done: int, total: int) -> None:
        deadline.check("pose model")
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or done >= total:
            last[0] = now
            figures = {"stage": "pose", "frames_done": done, "frames_total": total}
            if report is not None:
                report(figures)
            else:
                ctx.jobs.progress(job_id, figures)

    t0 = time.perf_counter()
    try:
        with animator_boundary():  # NoPersonError: no_person, VideoError: invalid_video (422)
            clip = motion_from_video(path, VideoLimits(max_seconds=settings.video_max_seconds),
                                     max_bytes=int(settings.video_max_mb * 2**20), progress=progress,
                                     start_s=order.start_s, end_s=order.end_s)
    finally:
        path.unlink(missing_ok=True)
    from animator.video.pose_bvh import SKELETON

    name = f"video-{job_id[:12]}"
    info = {"frames": clip.n_frames, "fps": clip.fps, "seconds": round(clip.n_frames / clip.fps, 3),
            "first_frame": clip.first_frame, "bridged_frames": clip.bridged,
            "joints": sum(not b.end_site for b in SKELETON),
            # the part of the video used: a longer one's first seconds unless the client chose
            "window": {"start_s": clip.window.start_s, "end_s": clip.window.end_s, "video_s": clip.window.video_s,
                       "note": clip.window.describe()}}
    motion = ctx.own_motions.save(order.client, name, clip.text, info, deadline)
    log.info("own motion %s: %d frames at %g fps in %.0f ms", name, clip.n_frames, clip.fps,
             (time.perf_counter() - t0) * 1e3)
    return {"motion": motion}
