"""The two model handlers on CUDA and on the CPU, in one process: latency, GPU memory, agreement.

What runs is the handlers' own code (``handlers/``), in-process, through the ``initialize`` /
``handle`` calls TorchServe makes, with a stand-in for TorchServe's context: the device comes from
the context's ``gpu_id`` as in a TorchServe worker (``cuda:0`` when given one, else ``cpu``). The
weights are random (the released ones cannot be downloaded here): the tiny configs the tests serve
(``models/*_tiny.py``) and the full-size ones the image serves (``models/drawn_humanoid_*.py``),
each initialised from a fixed seed by ``scripts/build_archives.py``'s ``tiny_checkpoint`` (the
detector's foreground bias raised so that it reports boxes). Speed does not depend on the weights'
values, except the detector's, whose number of boxes past the RPN does.

Inputs: the AnimatedDrawings fixture drawings (``tests/fixtures/animated_drawings``): char4's phone
photo of a drawing (4032x3024 JPEG) and the four characters' cut-out textures (216-564 px PNGs):
the detector gets all five, the pose estimator the four textures, as the app posts a detector crop.

For each model, size and device it prints, per image, the median wall milliseconds of ``handle``
(decode + model + answer) over ``--repeat`` warm runs (after ``--warmup`` runs of the first image)
and of the model alone (``predict`` on the decoded image), and a batch of the four textures in one
``handle`` call (TorchServe's batchSize is 4). On CUDA also the peak GPU memory torch allocated and
reserved. Then whether the CUDA answers agree with the CPU's: for the detector, the same number of
boxes above the threshold and, box by box, the largest corner difference in pixels and the largest
score difference; for the pose estimator, the largest keypoint difference in pixels. When they do not
agree within the tolerances, the CUDA run is repeated in strict float32 (``allow_tf32`` off for
cuDNN's convolutions and for matmuls), which tells TF32 rounding apart from a wrong kernel.

    python bench/gpu_models.py                         # every size on cuda (when available) and cpu
    python bench/gpu_models.py --sizes tiny --repeat 3 --json /tmp/gpu.json

scripts/gpu_check.sh runs it on a GPU machine after building the OpenMMLab stack there.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

AD = REPO / "tests" / "fixtures" / "animated_drawings" / "examples" / "characters"
PHOTO = AD / "char4" / "original_img.png"  # a JPEG despite its name: char4's photo of the drawing
TEXTURES = [AD / f"char{i}" / "texture.png" for i in (1, 2, 3, 4)]

DETECTOR = "drawn_humanoid_detector"
POSE = "drawn_humanoid_pose_estimator"
SIZES = ("tiny", "full")

#: agreement tolerances (CUDA vs CPU answers for the same image)
BOX_TOL_PX = 1.0
SCORE_TOL = 2e-3
KEYPOINT_TOL_PX = 1.0


class Context:
    """The parts of TorchServe's context the handlers read and write."""

    def __init__(self, model_dir: Path, serialized: str, settings: dict[str, Any], gpu_id: int | None) -> None:
        self.system_properties = {"model_dir": str(model_dir), "gpu_id": gpu_id}
        self.manifest = {"model": {"serializedFile": serialized}}
        self.model_yaml_config = {"handler": {"config": "config.py", **settings}}
        self.statuses: dict[int, int] = {}

    def set_response_status(self, code: int, phrase: str = "", idx: int = 0) -> None:
        self.statuses[idx] = code


def build_model_dirs(root: Path, sizes: tuple[str, ...]) -> dict[tuple[str, str], Path]:
    """One folder per (model, size) holding config.py and the random checkpoint, as an archive does."""
    import build_archives as ba

    dirs = {}
    for size in sizes:
        for name, spec in ba.MODELS.items():
            folder = root / f"{name}-{size}"
            folder.mkdir(parents=True)
            config = spec["tiny_config"] if size == "tiny" else spec["config"]
            t0 = time.perf_counter()
            cfg = ba.tiny_checkpoint(spec["kind"], config, folder / f"{name}.pth", seed=0)
            cfg.dump(str(folder / "config.py"))
            mb = (folder / f"{name}.pth").stat().st_size / 1e6
            print(f"  {name} {size}: random weights from seed 0, {mb:.1f} MB ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
            dirs[(name, size)] = folder
    return dirs


def handler_for(name: str, folder: Path, device: str) -> tuple[Any, Context]:
    import build_archives as ba

    from handlers.drawn_humanoid_detector import DrawnHumanoidDetectorHandler
    from handlers.drawn_humanoid_pose_estimator import DrawnHumanoidPoseEstimatorHandler

    cls = DrawnHumanoidDetectorHandler if name == DETECTOR else DrawnHumanoidPoseEstimatorHandler
    gpu_id = int(device.split(":")[1]) if device.startswith("cuda") else None
    ctx = Context(folder, f"{name}.pth", dict(ba.MODELS[name]["settings"]), gpu_id)
    handler = cls()
    handler.initialize(ctx)
    assert handler.device == (device if gpu_id is not None else "cpu"), (handler.device, device)
    return handler, ctx


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn, device: str, repeat: int) -> tuple[list[float], Any]:
    out = None
    times = []
    for _ in range(repeat):
        _sync(device)
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return times, out


def run_model(name: str, size: str, folder: Path, device: str, images: dict[str, bytes],
              repeat: int, warmup: int) -> dict[str, Any]:
    """Load ``name`` on ``device``, time it on each image; return figures and answers."""
    import torch

    from handlers.handler_base import decode_image

    cuda = device.startswith("cuda")
    if cuda:  # the previous model's memory back first, so that the figures are this model's
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    handler, ctx = handler_for(name, folder, device)
    _sync(device)
    load_s = time.perf_counter() - t0
    weights_mb = torch.cuda.memory_allocated() / 2**20 if cuda else None
    names = list(images)
    first = [{"body": images[names[0]]}]
    t0 = time.perf_counter()
    for _ in range(warmup):
        handler.handle(first, ctx)
    _sync(device)
    warm_s = time.perf_counter() - t0
    rows = []
    answers = {}
    for img_name in names:
        body = images[img_name]
        decoded = decode_image(body, handler.limits)
        h_ms, answer = timed(lambda: handler.handle([{"body": body}], ctx), device, repeat)
        p_ms, _ = timed(lambda: handler.predict([decoded]), device, repeat)
        answers[img_name] = answer[0]
        rows.append({"image": img_name, "size": f"{decoded.shape[1]}x{decoded.shape[0]}",
                     "handle_ms": statistics.median(h_ms), "predict_ms": statistics.median(p_ms),
                     "handle_all_ms": [round(t, 2) for t in h_ms]})
        assert not ctx.statuses, f"{name} refused {img_name}: {answer}"
    batch = [{"body": images[n]} for n in names if n.startswith("char") and n.endswith("texture")][:4]
    b_ms, _ = timed(lambda: handler.handle(batch, ctx), device, repeat)
    result: dict[str, Any] = {
        "model": name, "size": size, "device": device, "load_s": round(load_s, 2),
        "warmup_s": round(warm_s, 2), "images": rows,
        "median_handle_ms": statistics.median(r["handle_ms"] for r in rows),
        "median_predict_ms": statistics.median(r["predict_ms"] for r in rows),
        "batch": {"n": len(batch), "handle_ms": statistics.median(b_ms)},
        "answers": answers,
        "torch_threads": torch.get_num_threads(),
    }
    if cuda:
        result["gpu_weights_mib"] = round(weights_mb, 1)
        result["gpu_peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        result["gpu_peak_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    return result


def _iou(a: list[float], b: list[float]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 1.0


def compare(name: str, ref: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """How far ``other``'s answers (CUDA) are from ``ref``'s (CPU), image by image."""
    per_image = {}
    ok = True
    for img, a in ref.items():
        b = other[img]
        if name == DETECTOR:
            # pair each CPU box with the nearest CUDA box (largest corner difference); the answer keeps
            # the 10 best boxes, so a score tie at the cut can swap one box for another
            worst_px = worst_score = 0.0
            min_iou = 1.0
            matched = 0
            for det in a:
                if not b:
                    break
                best = min(b, key=lambda d: max(abs(x - y) for x, y in zip(det["bbox"], d["bbox"])))
                px = max(abs(x - y) for x, y in zip(det["bbox"], best["bbox"]))
                matched += px <= BOX_TOL_PX
                min_iou = min(min_iou, _iou(det["bbox"], best["bbox"]))
                worst_px = max(worst_px, px)
                worst_score = max(worst_score, abs(det["score"] - best["score"]))
            same = len(a) == len(b) == matched and worst_score <= SCORE_TOL
            per_image[img] = {"boxes_cpu": len(a), "boxes_cuda": len(b), "matched_within_tol": matched,
                              "max_corner_px": round(worst_px, 3), "max_score": round(worst_score, 5),
                              "min_iou": round(min_iou, 4), "agree": same}
        else:
            ka, kb = a[0]["keypoints"], b[0]["keypoints"]
            d = [max(abs(p[0] - q[0]), abs(p[1] - q[1])) for p, q in zip(ka, kb)]
            ds = [abs(p[2] - q[2]) for p, q in zip(ka, kb)]
            within = sum(x <= KEYPOINT_TOL_PX for x in d)
            same = within == len(d)
            per_image[img] = {"max_keypoint_px": round(max(d), 3), "median_keypoint_px": round(statistics.median(d), 3),
                              "keypoints_within_tol": f"{within}/{len(d)}", "max_score": round(max(ds), 5),
                              "agree": same}
        ok = ok and same
    return {"agree": ok, "images": per_image}


def environment() -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
                           "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, gpu_mem_gib=round(p.total_memory / 2**30, 1), sm=f"{p.major}.{p.minor}",
                   cudnn=torch.backends.cudnn.version(), cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
                   matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32)
    from importlib.metadata import version

    for pkg in ("mmcv", "mmengine", "mmdet", "mmpose", "numpy", "opencv-python-headless", "opencv-python"):
        try:
            env[pkg] = version(pkg)
        except Exception:  # noqa: BLE001 - absent is an answer
            env[pkg] = "absent"
    # (not mmcv.ops.get_compiling_cuda_version(): an extension linked with a static libstdc++ crashes
    # in it, see scripts/gpu_check.sh; cuda_kernel_check() tells whether the CUDA kernels are there)
    return env


def cuda_kernel_check() -> dict[str, Any]:
    """Whether mmcv's nms and roi_align run on CUDA tensors (kernels compiled in) and match the CPU."""
    import torch
    from mmcv.ops import nms, roi_align

    g = torch.Generator().manual_seed(0)
    xy = torch.rand(500, 2, generator=g) * 400
    wh = torch.rand(500, 2, generator=g) * 100 + 5
    boxes = torch.cat([xy, xy + wh], 1)
    scores = torch.rand(500, generator=g)
    feats = torch.rand(2, 32, 50, 50, generator=g)
    rois = torch.cat([torch.randint(0, 2, (64, 1), generator=g).float(), boxes[:64] / 8], 1)
    out: dict[str, Any] = {}
    try:
        _, keep_cpu = nms(boxes, scores, 0.5)
        _, keep_gpu = nms(boxes.cuda(), scores.cuda(), 0.5)
        out["nms_cuda"] = "ran"
        out["nms_same_kept"] = bool(torch.equal(keep_cpu, keep_gpu.cpu()))
    except Exception as err:  # noqa: BLE001
        out["nms_cuda"] = f"failed: {str(err).splitlines()[0][:160]}"
    try:
        r_cpu = roi_align(feats, rois, (7, 7), 1.0, 0, "avg", True)
        r_gpu = roi_align(feats.cuda(), rois.cuda(), (7, 7), 1.0, 0, "avg", True)
        out["roi_align_cuda"] = "ran"
        out["roi_align_max_abs_diff"] = float((r_cpu - r_gpu.cpu()).abs().max())
    except Exception as err:  # noqa: BLE001
        out["roi_align_cuda"] = f"failed: {str(err).splitlines()[0][:160]}"
    return out


def install_cpu_ops_shim() -> None:
    """Run mmcv's nms and roi_align on CPU copies of CUDA tensors (for an mmcv built without CUDA
    kernels): the networks still run on the GPU, the two ops cost a round trip each."""
    import mmcv.ops  # noqa: F401  (mmcv.ops.nms is also the name of a function: take the modules)

    nms_mod, ra_mod = sys.modules["mmcv.ops.nms"], sys.modules["mmcv.ops.roi_align"]

    class CpuOps:
        def __init__(self, ext: Any) -> None:
            self._ext = ext

        def __getattr__(self, attr: str) -> Any:
            return getattr(self._ext, attr)

        def nms(self, boxes, scores, **kw):
            if boxes.is_cuda:
                return self._ext.nms(boxes.cpu(), scores.cpu(), **kw).to(boxes.device)
            return self._ext.nms(boxes, scores, **kw)

        def roi_align_forward(self, inp, rois, output, argmax_y, argmax_x, **kw):
            if not inp.is_cuda:
                return self._ext.roi_align_forward(inp, rois, output, argmax_y, argmax_x, **kw)
            o, ay, ax = output.cpu(), argmax_y.cpu(), argmax_x.cpu()
            self._ext.roi_align_forward(inp.cpu(), rois.cpu(), o, ay, ax, **kw)
            output.copy_(o)
            argmax_y.copy_(ay)
            argmax_x.copy_(ax)

    nms_mod.ext_module = CpuOps(nms_mod.ext_module)
    ra_mod.ext_module = CpuOps(ra_mod.ext_module)


def install_torchvision_ops() -> None:
    """Answer mmcv's nms and roi_align with torchvision's kernels (CPU and CUDA), for an mmcv whose
    compiled extension cannot be trusted: ``roi_align`` with mmcv's arguments (average pooling) is
    torchvision's, and mmcv's ``nms`` with offset 0 is torchvision's."""
    import mmcv.ops  # noqa: F401
    import torchvision.ops as tvo

    nms_mod, ra_mod = sys.modules["mmcv.ops.nms"], sys.modules["mmcv.ops.roi_align"]

    class TorchvisionOps:
        def __init__(self, ext: Any) -> None:
            self._ext = ext

        def __getattr__(self, attr: str) -> Any:
            return getattr(self._ext, attr)

        def nms(self, boxes, scores, iou_threshold, offset=0):
            assert offset == 0, "torchvision's nms has no offset"
            return tvo.nms(boxes, scores, float(iou_threshold))

        def roi_align_forward(self, inp, rois, output, argmax_y, argmax_x, aligned_height, aligned_width,
                              spatial_scale, sampling_ratio, pool_mode, aligned):
            assert pool_mode == 1, "torchvision's roi_align averages"  # mmcv: 0 max, 1 avg
            output.copy_(tvo.roi_align(inp, rois, (aligned_height, aligned_width), spatial_scale,
                                       sampling_ratio, aligned))

    nms_mod.ext_module = TorchvisionOps(nms_mod.ext_module)
    ra_mod.ext_module = TorchvisionOps(ra_mod.ext_module)


def print_table(results: list[dict[str, Any]]) -> None:
    print("\n| model | size | device | image | image px | handle ms (median) | predict ms (median) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for row in r["images"]:
            print(f"| {r['model']} | {r['size']} | {r['device']} | {row['image']} | {row['size']} | "
                  f"{row['handle_ms']:.1f} | {row['predict_ms']:.1f} |")
    print("\n| model | size | device | median handle ms | median predict ms | batch of 4 ms | load s | "
          "GPU weights MiB | GPU peak alloc MiB | GPU peak reserved MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} | {r['size']} | {r['device']} | {r['median_handle_ms']:.1f} | "
              f"{r['median_predict_ms']:.1f} | {r['batch']['handle_ms']:.1f} | {r['load_s']} | "
              f"{r.get('gpu_weights_mib', '-')} | {r.get('gpu_peak_allocated_mib', '-')} | "
              f"{r.get('gpu_peak_reserved_mib', '-')} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--sizes", default="full,tiny",
                        help="model sizes, run in this order: full, tiny (default both, full first)")
    parser.add_argument("--devices", default="auto", help="auto (cuda:0 when available, and cpu), or a list")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per image on CUDA (default 10)")
    parser.add_argument("--cpu-repeat", type=int, default=3, help="timed runs per image on the CPU (default 3)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs of the first image (default 3)")
    parser.add_argument("--cpu-ops-shim", action="store_true",
                        help="mmcv was built without CUDA kernels: run its nms/roi_align on CPU copies")
    parser.add_argument("--torchvision-ops", action="store_true",
                        help="answer mmcv's nms/roi_align with torchvision's kernels (mmcv's extension unusable)")
    parser.add_argument("--json", type=Path, help="write every figure and answer here")
    args = parser.parse_args(argv)

    import torch

    os.environ.pop("DOODLEPOD_DEVICE", None)  # the handlers must pick the device from the context
    sizes = tuple(s for s in args.sizes.split(",") if s)
    if args.devices == "auto":
        devices = (["cuda:0"] if torch.cuda.is_available() else []) + ["cpu"]
    else:
        devices = [d for d in args.devices.split(",") if d]
    if args.cpu_ops_shim:
        install_cpu_ops_shim()
    if args.torchvision_ops:
        install_torchvision_ops()
    env = environment()
    env["mmcv_ops_path"] = ("CPU kernels only; nms/roi_align on CPU copies (--cpu-ops-shim)" if args.cpu_ops_shim
                            else "torchvision's nms/roi_align (--torchvision-ops)" if args.torchvision_ops
                            else "mmcv's compiled extension")
    print("environment:", json.dumps(env, indent=1), flush=True)
    report: dict[str, Any] = {"environment": env, "results": [], "agreement": {}, "failures": []}
    if any(d.startswith("cuda") for d in devices) and not (args.cpu_ops_shim or args.torchvision_ops):
        report["kernels"] = cuda_kernel_check()
        print("mmcv CUDA kernels:", json.dumps(report["kernels"]), flush=True)

    images = {"char4_photo": PHOTO.read_bytes()}
    images.update({f"{p.parent.name}_texture": p.read_bytes() for p in TEXTURES})
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="doodlepod-gpu-") as tmp:
        print("building the random-weight checkpoints:", flush=True)
        dirs = build_model_dirs(Path(tmp), sizes)
        for (name, size), folder in dirs.items():
            imgs = images if name == DETECTOR else {k: v for k, v in images.items() if k.endswith("texture")}
            by_device = {}
            for device in devices:
                repeat = args.repeat if device.startswith("cuda") else args.cpu_repeat
                t0 = time.perf_counter()
                try:
                    r = run_model(name, size, folder, device, imgs, repeat, args.warmup)
                except Exception as err:  # noqa: BLE001 - one failure must not hide the other figures
                    print(f"{name} {size} on {device}: FAILED: {type(err).__name__}: {err}", flush=True)
                    report["failures"].append(f"{name} {size} {device}: {type(err).__name__}: {err}")
                    continue
                by_device[device] = r
                report["results"].append(r)
                print(f"{name} {size} on {device}: median handle {r['median_handle_ms']:.1f} ms, predict "
                      f"{r['median_predict_ms']:.1f} ms, batch of {r['batch']['n']} {r['batch']['handle_ms']:.1f} ms"
                      + (f", GPU peak {r['gpu_peak_allocated_mib']} MiB allocated / "
                         f"{r['gpu_peak_reserved_mib']} MiB reserved" if 'gpu_peak_allocated_mib' in r else "")
                      + f" ({time.perf_counter() - t0:.1f} s)", flush=True)
            cuda_devs = [d for d in by_device if d.startswith("cuda")]
            if "cpu" in by_device and cuda_devs:
                dev = cuda_devs[0]
                agreement = compare(name, by_device["cpu"]["answers"], by_device[dev]["answers"])
                if not agreement["agree"]:
                    # TF32 convolutions (cuDNN's default on Ampere and later) or a wrong kernel?
                    flags = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
                    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
                    try:
                        strict = run_model(name, size, folder, dev, imgs, 1, 1)
                        agreement["strict_fp32"] = compare(name, by_device["cpu"]["answers"], strict["answers"])
                    except Exception as err:  # noqa: BLE001
                        report["failures"].append(f"{name} {size} {dev} strict fp32: {type(err).__name__}: {err}")
                    finally:
                        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = flags
                report["agreement"][f"{name}/{size}"] = agreement
                print(f"{name} {size}: cuda vs cpu agree={agreement['agree']}"
                      + (f" (strict fp32 rerun agree={agreement['strict_fp32']['agree']})"
                         if "strict_fp32" in agreement else "")
                      + " " + json.dumps(agreement["images"]), flush=True)
                if "strict_fp32" in agreement:
                    print("   strict fp32:", json.dumps(agreement["strict_fp32"]["images"]), flush=True)
            if args.json:  # after each model, so that a run stopped at a time limit keeps what it measured
                report["seconds"] = round(time.perf_counter() - t_start, 1)
                args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    print_table(report["results"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
        print(f"\nwrote {args.json}")
    for line in report["failures"]:
        print("FAILED:", line)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
