"""One request's journey: image -> character (box, mask, skeleton) -> animations -> stored URLs.

Stages (each timed, logged as ``stage=NAME ms=...`` and observed in the stage histogram):
``decode`` (decode, EXIF orientation, downsize; render process), ``detect`` (TorchServe),
``segment`` (crop the best box, mask the character; render process), ``pose`` (TorchServe on the
crop), ``find`` and ``fit`` (the ink finder in a render process, in place of ``detect`` and ``pose``
while the model server is not there: :mod:`app.render.finder_steps`), ``animate:<motion>`` (one pool
task per motion, all in parallel) and ``upload:<motion>`` (each file as soon as it is rendered).

Coordinates: the client sees *image pixels* (the uploaded image after EXIF orientation, x right,
y down); internally the pipeline works in the downsized *work pixels* (``work = image * scale``) and
the character lives in *crop pixels* (work pixels minus the crop's top-left corner).
"""
from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import coordinates, metrics
from ..deadline import Deadline
from ..errors import (
    InsufficientStorage,
    ModelServerError,
    ModelServerUnavailable,
    ModelsUnavailable,
    NoCharacter,
    NoSkeleton,
    animator_boundary,
)
from ..loop import off_loop
from ..motions.library import Motion
from ..orders import AnimateOrder
from ..storage.backends import LocalStorage, free_disk_mb
from . import finder_steps, steps

if TYPE_CHECKING:
    from animator.api import RenderOptions

log = logging.getLogger("doodlepod.pipeline")

#: ``warnings`` of an answer whose box or joints the ink finder found instead of trained models
#: (docs/finder.md): on the model server (its archives are the finder's: no released weights there) ...
FOUND_BY_INK_FINDER = {
    "code": "found_by_ink_finder",
    "message": "the drawing's box and joints were found by the ink finder on the model server (no trained "
               "weights there): check them, and fix the box or a joint if one is off"}
#: ... or in the app itself, while the model server is being prepared or is down.
FOUND_BY_INK_FINDER_IN_APP = {
    "code": "found_by_ink_finder_in_app",
    "message": "the model server is not ready, so the app's own ink finder found the drawing's box and "
               "joints: check them, and fix the box or a joint if one is off"}
FINDER_WARNINGS = {w["code"]: w for w in (FOUND_BY_INK_FINDER, FOUND_BY_INK_FINDER_IN_APP)}


def warnings_of(found: Sequence[str]) -> list[dict[str, str]]:
    """The ``warnings`` entries of the finder codes a request collected (each once, in order)."""
    return [FINDER_WARNINGS[code] for code in dict.fromkeys(found) if code in FINDER_WARNINGS]


@dataclass(frozen=True)
class Detection:
    box: tuple[int, int, int, int]  # work pixels, clipped to the image
    score: float


@dataclass
class Result:
    id: str
    animations: dict[str, str]
    character: dict[str, Any]
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[dict[str, str]] = field(default_factory=list)  # see :func:`warnings_of`


class Pipeline:
    """Holds the services a request needs (settings, TorchServe, storage, render pool)."""

    def __init__(self, settings, torchserve, storage, pool, scratch_dir: str | None = None) -> None:
        self.settings = settings
        self.scratch_dir = str(scratch_dir or tempfile.gettempdir())
        self.torchserve = torchserve
        self.storage = storage
        self.pool = pool

    # -- helpers -------------------------------------------------------------------------------
    @contextmanager
    def stage(self, timings: dict[str, float], name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - t0) * 1e3
            timings[name] = round(ms, 1)
            metrics.STAGE_SECONDS.labels(stage=name.split(":")[0]).observe(ms / 1e3)
            log.info("stage=%s ms=%.1f", name, ms)

    def disk_path(self) -> str:
        """The folder whose free space gates work: the local storage, else the scratch (spill) folder."""
        return str(self.storage.root) if isinstance(self.storage, LocalStorage) else self.scratch_dir

    def check_disk(self) -> None:
        """Refuse new work (503) when the disk is low or the stored files reached the storage budget."""
        free = free_disk_mb(self.disk_path())
        if free < self.settings.min_free_disk_mb:
            raise InsufficientStorage(f"only {free:.0f} MiB free on {self.disk_path()} (need "
                                      f"{self.settings.min_free_disk_mb:.0f} MiB); try again later")
        budget = getattr(self.storage, "budget", None)
        if budget is not None and budget.enabled:
            left = off_loop(budget.left_bytes, budget.reserved_bytes())  # Redis on the loop, the folder off it
            if left is not None and left <= 0:
                raise budget.refuse(self.settings.sweep_interval_s)

    # -- the steps -----------------------------------------------------------------------------
    # Each step is one stage of the data flow; /animate chains them all in memory (:meth:`run`),
    # the characters API (:mod:`app.characters.resource`) runs only those an edit needs and stores the rest.

    def decode(self, image: bytes, deadline: Deadline, timings: dict[str, float]) -> steps.PreparedImage:
        """Decode the upload, apply its EXIF orientation, downsize to work pixels (render process)."""
        s = self.settings
        self.check_disk()
        with self.stage(timings, "decode"):
            img: steps.PreparedImage = self.pool.run(steps.prepare_image, image, s.max_image_pixels,
                                                   s.detect_max_side, deadline=deadline, stage="decode")
        log.info("image %s %dx%d, work size %dx%d (scale %.3f)", img.format, *img.image_size,
                 img.rgb.shape[1], img.rgb.shape[0], img.scale)
        return img

    def detect(self, img: steps.PreparedImage, deadline: Deadline, timings: dict[str, float],
               found: list[str] | None = None) -> list[Detection]:
        """The detector's boxes (work pixels, clipped to the image) scoring at least the minimum,
        best first; raises :class:`NoCharacter` when none is left. While the model server is not
        there, the app's ink finder answers instead (:meth:`_in_app`). ``found`` collects the codes
        of the finders that answered (:func:`warnings_of`)."""
        height, width = img.rgb.shape[:2]
        try:
            with self.stage(timings, "detect"):
                answer = self.torchserve.predict(self.settings.detector_model, img.png, deadline, "detect")
        except (ModelsUnavailable, ModelServerUnavailable) as exc:
            answer = self._in_app(exc, "find", finder_steps.find_figures_in, img.rgb, deadline, timings,
                                  found)["detections"]
            by_finder = True
        else:
            by_finder = self._note_model_server(found)
        # DOODLEPOD_MIN_DETECTION_SCORE is a cut on the trained detector's scores; the finder's score
        # ranks its boxes on another scale, and it reports only what it takes for a figure
        return self._detections(answer, width, height, 0.0 if by_finder else None)

    def _in_app(self, exc: Exception, stage: str, fn: Callable[..., dict[str, Any]], arg: Any, deadline: Deadline,
                timings: dict[str, float], found: list[str] | None) -> dict[str, Any]:
        """The ink finder in a render process in place of a model that is not there (``exc``: re-raised
        when DOODLEPOD_FINDER_FALLBACK is off, or when the model server is there but busy or slow).
        The request already holds its render slot, and the step runs under its deadline, as every
        render-process step does."""
        if not self.settings.finder_fallback or not getattr(exc, "down", True):
            raise exc
        log.warning("stage=%s the model server is not there (%s: %s): the app's ink finder answers", stage,
                    getattr(exc, "code", type(exc).__name__), getattr(exc, "message", exc))
        with self.stage(timings, stage):
            out = self.pool.run(fn, arg, deadline=deadline, stage=stage)
        if found is not None:
            found.append(FOUND_BY_INK_FINDER_IN_APP["code"])
        return out

    def _note_model_server(self, found: list[str] | None) -> bool:
        """True, and the model server's finder noted in ``found``, when its answer named the finder's
        archives as its weights."""
        by_finder = getattr(self.torchserve, "weights", None) == "finder"
        if by_finder and found is not None:
            found.append(FOUND_BY_INK_FINDER["code"])
        return by_finder

    def segment(self, img: steps.PreparedImage, box: tuple[int, int, int, int], deadline: Deadline,
                timings: dict[str, float]) -> steps.SegmentedCrop:
        """Crop ``box`` (work pixels) and mask the character in it (render process)."""
        l, t, r, b = box
        with self.stage(timings, "segment"):
            return self.pool.run(steps.segment_crop, np.ascontiguousarray(img.rgb[t:b, l:r]), box,
                                 deadline=deadline, stage="segment")

    def segment_stored(self, work_png: bytes, box: tuple[int, int, int, int], deadline: Deadline,
                       timings: dict[str, float]) -> steps.SegmentedCrop:
        """:meth:`segment` for a stored work image (a character's ``image.png``)."""
        with self.stage(timings, "segment"):
            return self.pool.run(steps.segment_png, work_png, box, deadline=deadline, stage="segment")

    def pose(self, crop_png: bytes, deadline: Deadline, timings: dict[str, float],
             found: list[str] | None = None) -> list:
        """The skeleton the pose model finds in the crop (animator Joints, crop pixels); while the model
        server is not there, the one the app's ink finder fits to the crop's mask (see :meth:`detect`)."""
        try:
            with self.stage(timings, "pose"):
                people = self.torchserve.predict(self.settings.pose_model, crop_png, deadline, "pose")
        except (ModelsUnavailable, ModelServerUnavailable) as exc:
            out = self._in_app(exc, "fit", finder_steps.fit_crop_png, crop_png, deadline, timings, found)
            if not out["people"]:
                raise NoSkeleton(f"no skeleton was found in the character's box: {out['reason']}") from None
            people = out["people"]
        else:
            self._note_model_server(found)
        return self._skeleton(people)

    def rig(self, texture: np.ndarray, mask: np.ndarray, skeleton: list, deadline: Deadline,
            timings: dict[str, float]):
        """The animator character, checked to be riggable: most joints lie on the drawing.

        Raises :class:`InvalidCharacter` (422) for a skeleton the animator could not deform
        (e.g. joints placed on blank paper), instead of a render failing later.
        """
        import animator
        with animator_boundary("the character cannot be rigged"):
            character = animator.Character(texture, mask, skeleton)
        with self.stage(timings, "rig"):  # about a millisecond of numpy: no render-process round trip
            steps.check_rig(character.mask, [(j.name, j.loc) for j in character.skeleton])
        return character

    def render(self, character: tuple, motions: Sequence[Motion], options: RenderOptions, deadline: Deadline,
               timings: dict[str, float], store: Callable[[Motion, dict[str, Any]], str],
               task: Callable[..., dict[str, Any]] = steps.render_motion,
               progress: Callable[[dict[str, Any]], None] | None = None,
               interrupt: Callable[[], None] | None = None) -> dict[str, str]:
        """Render every motion in parallel in the process pool: ``task(*character, motion_cfg,
        retarget_cfg, options)`` (:func:`steps.render_motion` for an animator Character in memory,
        :func:`steps.render_stored` for a stored one's files). ``store(motion, out)`` saves each file
        as soon as it is rendered and answers its URL. Returns ``{motion name: url}``.

        While the renders run, ``progress(report)`` gets :func:`progress_report`'s figures (every
        few tenths of a second, and after each file is stored) and ``interrupt()`` may raise to stop
        them all (background work whose slot a request wants).

        CPUs that the admitted requests' motions leave idle are given to the renders: each makes
        its frames in :meth:`processes_per_render` processes (the file is the same for any number)."""
        t0 = time.perf_counter()
        options = replace(options, processes=self.processes_per_render(len(motions)))
        # longest clip first: with fewer render processes than motions, the short ones then fill in
        # beside it instead of a long one starting last and running alone
        order = sorted(motions, key=lambda m: getattr(m, "seconds", 0.0), reverse=True)
        futures = [(m, self.pool.submit(task, *character, str(m.motion_cfg),
                                        None if m.retarget_cfg is None else str(m.retarget_cfg), options))
                   for m in order]
        frames: dict[str, int] = {}
        done: dict[str, str] = {}
        # each clip's frame count, known from its header before its render poses it: the job's total
        # holds from the first report, so a progress bar never steps back when a motion starts
        expected = {m.name: expected_frames(m, options) for m in motions}

        def report(stage: str = "rendering") -> None:
            if progress is not None:
                progress(progress_report(stage, [(m.name, frames.get(m.name), f) for m, f in futures], expected))

        def tick() -> None:
            if interrupt is not None:
                interrupt()
            report()

        on_tick = tick if progress is not None or interrupt is not None else None
        try:
            report()
            for motion, future in futures:
                out = self.pool.wait(future, deadline, f"animate:{motion.name}", on_tick)
                frames[motion.name] = int(out["frame_count"])
                ms = out["timings_ms"].get("total", 0.0)
                timings[f"animate:{motion.name}"] = round(ms, 1)
                metrics.STAGE_SECONDS.labels(stage="animate").observe(ms / 1e3)
                log.info("stage=animate:%s ms=%.1f frames=%d bytes=%d pid=%d detail=%s", motion.name, ms,
                         out["frame_count"], len(out["data"]), out["pid"],
                         {k: round(v, 1) for k, v in out["timings_ms"].items()})
                report("storing")
                with self.stage(timings, f"upload:{motion.name}"):
                    done[motion.name] = store(motion, out)
                metrics.ANIMATIONS.labels(motion=motion.name, format=options.format).inc()
        except BaseException:
            # an error, a passed deadline or a dropped client: the other motions' renders stop now,
            # and the request (and its render slot) ends only once the render processes are free
            self.pool.abandon([pending for _, pending in futures])
            raise
        report("stored")
        timings["animate_all"] = round((time.perf_counter() - t0) * 1e3, 1)
        return {m.name: done[m.name] for m in motions}  # in the order asked for

    def processes_per_render(self, motions: int) -> int:
        """:func:`processes_per_render` for this pod's CPUs and ``DOODLEPOD_MAX_INFLIGHT``."""
        from ..config import available_cpus

        return processes_per_render(available_cpus(), self.settings.max_inflight, motions)

    def render_options(self, fmt: str, size: int | None = None, max_frames: int | None = None) -> RenderOptions:
        """The :class:`animator.RenderOptions` of a render from the settings (``size`` overrides
        DOODLEPOD_RENDER_SIZE, ``max_frames`` a request's own cap over DOODLEPOD_RENDER_MAX_FRAMES). A
        thumbnail (side <= :data:`THUMBNAIL_SIDE`) is rigged on a coarser mesh: its bends look the same
        at that size, and the mesh setup is most of its time."""
        from animator.api import RenderOptions

        s = self.settings
        side = int(size or s.render_size)
        options: dict[str, Any] = {"width": side, "height": side, "format": fmt, "threads": s.render_threads}
        if side <= THUMBNAIL_SIDE:
            options["mesh_cells"] = THUMBNAIL_MESH_CELLS
        if s.render_fps:
            options["fps"] = s.render_fps if s.render_fps == "native" else float(s.render_fps)
        if max_frames is not None or s.render_max_frames:
            options["max_frames"] = max_frames if max_frames is not None else s.render_max_frames
        return RenderOptions(**options)

    def check_output(self, fmt: str, size: int | None, max_frames: int | None, motions: Sequence[Any]) -> None:
        """Refuse now, before any work, a file of ``motions`` its format cannot hold (a sprite sheet over
        its bound: :mod:`app.render.sheet_price`)."""
        from .sheet_price import check_sheet

        options = self.render_options(fmt, size, max_frames)
        check_sheet(fmt, {m.name: expected_frames(m, options) for m in motions}, (options.width, options.height))

    def file_tag(self, options: RenderOptions) -> str:
        """The frame rate and frame cap in a stored render's name (``25fps``, ``defaultfps-max20``): a
        render cache's key carries what its file depends on (the default rate while the settings name none)."""
        fps: Any = options.fps if self.settings.render_fps else "default"
        fps = f"{fps:g}" if isinstance(fps, float) else str(fps)
        return f"{fps}fps" + (f"-max{options.max_frames}" if options.max_frames else "")

    # -- /animate: every step in memory ---------------------------------------------------------
    def run(self, order: AnimateOrder, image: bytes, motions: Sequence[Motion], deadline: Deadline,
            progress: Callable[[dict[str, Any]], None] | None = None) -> Result:
        """POST /animate's work: ``order``'s character found on ``image`` (or placed by its joints and
        box) and animated in ``motions`` (the order's, resolved, and a client's clip)."""
        timings: dict[str, float] = {}
        found: list[str] = []  # the finders that placed the box or joints, when not trained models
        if progress is not None:
            progress({"stage": "preparing"})
        img = self.decode(image, deadline, timings)
        height, width = img.rgb.shape[:2]
        joints = client_joints(order)
        if joints is not None:
            coordinates.check_inside(joints, img.image_size)
            work_joints = coordinates.joints_to_work(joints, img.scale)
            box = coordinates.box_for_client(None if order.bbox is None else list(order.bbox), work_joints,
                                             img.scale, width, height)
        else:
            box = self.detect(img, deadline, timings, found)[0].box
        crop = self.segment(img, box, deadline, timings)
        l, t, _, _ = box
        if joints is not None:
            from animator.skeleton import transform_skeleton
            skeleton = transform_skeleton(work_joints, offset=(-l, -t))
        else:
            skeleton = self.pose(crop.png, deadline, timings, found)
        character = self.rig(crop.texture, crop.mask, skeleton, deadline, timings)

        # The files' folder, and the answer's id, are made here: a client's X-Request-ID (which a
        # client can repeat or make up) stays in the logs and headers and never names a stored file.
        set_id = new_storage_id()

        def store(motion: Motion, out: dict[str, Any]) -> str:
            key = f"{set_id}/{motion.name}.{file_suffix(order.format)}"
            self.storage.put(key, out["data"], out["mime"], deadline)
            return self.storage.url(key, order.base_url)

        animations = self.render((character,), motions, self.render_options(order.format, order.size), deadline,
                                 timings, store, progress=progress)
        joints_img = {j.name: [round((j.loc[0] + l) / img.scale, 1), round((j.loc[1] + t) / img.scale, 1)]
                      for j in skeleton}
        bbox_img = [round(v / img.scale, 1) for v in box]
        return Result(set_id, animations, {"bbox": bbox_img, "joints": joints_img}, timings, warnings_of(found))

    def _detections(self, detections: Any, width: int, height: int, min_score: float | None = None) -> list[Detection]:
        if not isinstance(detections, list) or not all(isinstance(d, dict) for d in detections):
            raise ModelServerError("the detector answered in an unexpected format (expected a list of "
                                   "{bbox, score})")
        try:
            scored = sorted(((float(d.get("score", 0.0)), d.get("bbox")) for d in detections),
                            key=lambda p: p[0], reverse=True)
        except (TypeError, ValueError):
            raise ModelServerError("the detector answered a score that is not a number") from None
        cut = self.settings.min_detection_score if min_score is None else min_score
        kept = [(score, b) for score, b in scored if score >= cut]
        log.info("detections=%d kept=%d best_score=%s", len(scored), len(kept),
                 f"{scored[0][0]:.3f}" if scored else "-")
        found = []
        for score, bbox in kept:
            box = coordinates.clamp_box(bbox, width, height)
            if box is not None:
                found.append(Detection(box, score))
        if not found:
            raise NoCharacter("no drawn character was found in the image")
        return found

    def _skeleton(self, people: Any) -> list:
        from animator.skeleton import skeleton_from_coco

        if not isinstance(people, list):
            raise ModelServerError("the pose model answered in an unexpected format (expected a list)")
        if not people:
            raise NoSkeleton("no skeleton was found in the character's box")
        if len(people) > 1:
            log.warning("pose model found %d skeletons; using the highest-scoring one", len(people))
        try:
            best = max(people, key=lambda p: float(p.get("score", 0.0)))
            keypoints = np.asarray(best["keypoints"], dtype=np.float64)
        except (TypeError, ValueError, KeyError, AttributeError):
            raise ModelServerError("the pose model's answer has no readable keypoints") from None
        if keypoints.shape[0] != 17 or keypoints.ndim != 2 or keypoints.shape[1] < 2:
            raise ModelServerError(f"expected 17 COCO keypoints from the pose model, got shape {keypoints.shape}")
        if not np.isfinite(keypoints[:, :2]).all():
            raise NoSkeleton("the pose model returned no usable joint positions")
        return skeleton_from_coco(keypoints)


def client_joints(order: AnimateOrder) -> list | None:
    """The order's client joints as the animator's skeleton (image pixels), or None."""
    if order.joints is None:
        return None
    from animator.skeleton import skeleton_from_client

    with animator_boundary():
        return skeleton_from_client([joint.model_dump() for joint in order.joints])


def expected_frames(motion: Any, options: RenderOptions) -> int | None:
    """The frames the render of ``motion`` with ``options`` will make (the animator's own frame plan
    over the clip's header: frames in range and frame time), or None when the clip is not known here."""
    from animator.frame_rate import plan_frames

    clip = getattr(motion, "clip", None)
    if clip is None and getattr(motion, "frames", None) and getattr(motion, "frame_time_s", None):
        clip = (motion.frames, motion.frame_time_s)  # a client's clip: its cut frames
    if not clip:
        return None
    try:
        return int(plan_frames(int(clip[0]), float(clip[1]), fps=options.fps,
                               max_frames=options.max_frames).indices.size)
    except Exception:  # noqa: BLE001 - an estimate; the render reports its own count
        return None


def progress_report(stage: str, motions: Sequence[tuple[str, int | None, Any]],
                    expected: dict[str, int | None] | None = None) -> dict[str, Any]:
    """A render's progress as GET /jobs/{id} shows it: ``{"stage", "frames_done", "frames_total",
    "motions": {name: {"frames_done", "frames_total"}}}``. ``motions``: (name, frames of its finished
    file or None, its :class:`app.render.pool.PoolTask`); a motion whose render has not reported yet
    counts its ``expected`` frames (:func:`expected_frames`) in the totals, or has ``frames_total``
    None and counts nothing when that is not known."""
    per: dict[str, dict[str, int | None]] = {}
    for name, finished, pool_task in motions:
        if finished is not None:
            per[name] = {"frames_done": finished, "frames_total": finished}
            continue
        got = pool_task.progress()
        per[name] = {"frames_done": got[0], "frames_total": got[1]} if got else {
            "frames_done": 0, "frames_total": (expected or {}).get(name)}
    return {"stage": stage, "frames_done": sum(m["frames_done"] or 0 for m in per.values()),
            "frames_total": sum(m["frames_total"] or 0 for m in per.values()), "motions": per}


#: Most processes one render's frames are split over (see :func:`processes_per_render`).
MAX_PROCESSES_PER_RENDER = 4


def processes_per_render(cpus: int, max_inflight: int, motions: int) -> int:
    """Processes one render may use: the CPUs shared by the requests admitted at once and their
    motions, at most :data:`MAX_PROCESSES_PER_RENDER`, at least 1. One when a request has as many
    motions as there are CPUs per admitted request (the default admission)."""
    share = int(cpus) // max(1, int(max_inflight) * max(1, int(motions)))
    return max(1, min(MAX_PROCESSES_PER_RENDER, share))


#: Renders this small (px, either side) are thumbnails: the studio's motion previews are 128 px.
THUMBNAIL_SIDE = 160
#: Mesh cells of a thumbnail's rig (the animator's default is 300).
THUMBNAIL_MESH_CELLS = 100


def new_request_id() -> str:
    return uuid.uuid4().hex


def new_storage_id() -> str:
    """The folder of one request's files in the storage: random, made by the server."""
    return uuid.uuid4().hex


def file_suffix(fmt: str) -> str:
    """A stored animation's name ending: the format, then its file extension where they differ
    (``gif``, ``glb``; ``sheet.zip``, ``frames.zip``, ``apng.png``, ``joints.json``), so the cache
    key names the format and the name's extension the file's type (what local storage serves it as)."""
    import animator

    ext = animator.FORMATS[fmt][1]
    return fmt if ext == fmt else f"{fmt}.{ext}"
