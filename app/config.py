"""The one table of the app's settings: every ``DOODLEPOD_*`` environment variable lives here.

Nothing else in ``app/`` reads ``os.environ`` for a setting: it calls :func:`load_settings` (or reads
``current_app.config["SETTINGS"]``). The docs' configuration table and the manifests' tests read
:data:`SETTINGS`, so a variable added here is documented everywhere at once
(``python -m app.config --markdown`` prints the table).
"""
from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from animator.formats import FORMATS


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, default (as the string one would export) and meaning."""

    name: str
    default: str
    description: str
    parse: Callable[[str], Any] = str


def _token68(text: str) -> str:
    """A bearer token as Authorization carries it (RFC 9110's token68); '' for none."""
    if text and not re.fullmatch(r"[A-Za-z0-9\-._~+/]+=*", text):
        raise ValueError("must be a token68: letters, digits and -._~+/, with '=' only at its end")
    return text


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true/false, got {text!r}")


def _csv(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"must be > 0, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise ValueError(f"must be >= 0, got {text!r}")
    return value


def _fps(text: str) -> str:
    value = text.strip().lower()
    if value in ("", "native"):
        return value
    if not float(value) > 0:
        raise ValueError(f"must be > 0, 'native' or empty, got {text!r}")
    return value


def _ipv6_prefix(text: str) -> int:
    value = int(text)
    if not 16 <= value <= 128:
        raise ValueError(f"must be 16..128, got {text!r}")
    return value


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {text!r}")
        return value
    return parse


#: Every setting of the app, in the order the docs list them.
SETTINGS: tuple[Setting, ...] = (
    # --- server ---
    Setting("DOODLEPOD_HOST", "0.0.0.0", "Address gunicorn binds to."),
    Setting("DOODLEPOD_PORT", "8000", "Port gunicorn binds to.", int),
    Setting("DOODLEPOD_WORKERS", "1", "gunicorn worker processes (gevent). Each worker has its own render "
            "process pool; on a small node keep 1 worker and raise DOODLEPOD_RENDER_PROCESSES instead.", int),
    Setting("DOODLEPOD_WORKER_CONNECTIONS", "200", "Simultaneous connections per gevent worker.", int),
    Setting("DOODLEPOD_CLIENT_CONNECTIONS", "40", "Connections one client (its address; an IPv6 address by its "
            "network of DOODLEPOD_CLIENT_IPV6_PREFIX bits) may hold open to one gunicorn worker; one more is "
            "answered 429 too_many_connections (Retry-After) and closed before its request is read, so one "
            "client's slow or idle connections cannot fill DOODLEPOD_WORKER_CONNECTIONS and keep everyone else "
            "(and the kubelet's probes) waiting in the backlog. Peers in DOODLEPOD_TRUSTED_PROXIES are not "
            "capped (they carry many clients). 0: no cap.", _non_negative_int),
    Setting("DOODLEPOD_CLIENT_REFUSALS_PER_S", "0", "Refusals (4xx answers) one client gets a second, as many "
            "at once, before each next one is held back on the event loop (at most 1 s, no CPU) before it is "
            "sent: a client that sends again at once after each refusal cannot keep a gunicorn worker busy "
            "refusing it while other clients wait. pod.yaml and deploy/ set 20. 0: not paced.", _non_negative_float),
    Setting("DOODLEPOD_GRACEFUL_TIMEOUT_S", "0", "Seconds a worker gets to finish in-flight requests on "
            "shutdown; 0 means the request deadline plus 5 s.", float),
    Setting("DOODLEPOD_LOG_LEVEL", "info", "Log level of the app and gunicorn (debug, info, warning, error).",
            _choice("debug", "info", "warning", "error")),
    Setting("DOODLEPOD_ACCESS_LOG", "true", "Write one gunicorn access-log line per request (with its "
            "request id).", _bool),
    Setting("DOODLEPOD_RUNTIME_DIR", "", "Folder for state shared by the workers of one pod (render slots, "
            "Prometheus' memory-mapped metric files); empty: a fresh temporary folder made at start. Give it a "
            "small volume of its own (the pod: 64 MiB in memory): a write to a mapped file on a full disk "
            "kills the worker.", str),
    Setting("DOODLEPOD_FORWARDED_ALLOW_IPS", "127.0.0.1,::1", "Addresses or networks (comma-separated, "
            "e.g. 10.0.0.0/8) of the proxies trusted to set X-Forwarded-Proto, SCRIPT_NAME and the Host that "
            "answers' URLs are built from (when DOODLEPOD_PUBLIC_URL is empty); '*' trusts every client. "
            "Requests from other addresses get URLs relative to the server.", _csv),
    Setting("DOODLEPOD_TRUSTED_PROXIES", "", "Networks (comma-separated CIDRs, e.g. 10.0.0.0/8) of the proxies "
            "(an Ingress controller, a load balancer) whose X-Forwarded-For names the client: the client is the "
            "right-most address in it that is not itself a trusted proxy. Used by rate limits, idempotency keys "
            "and logs. Empty: the TCP peer is the client and X-Forwarded-For is ignored (as it is from any "
            "peer outside these networks).", _csv),
    Setting("DOODLEPOD_AUTH_TOKEN", "", "If set, every API call needs the header 'Authorization: Bearer "
            "<token>'. Open without it: /ping, /healthz, /live, /metrics, the files of local storage (/files/...: "
            "animation and character images, under keys that name no character; never documents, clients' own "
            "motions or queued videos), the pages (/studio, /studio-scenes, /studio/credits, /docs, and GET /, "
            "which redirects to the studio; their API calls carry the person's token), the document "
            "(/openapi.json, /openapi.yaml) and the library's previews (/motions/{name}/preview.gif). Character "
            "and scene documents are API calls. A token68 (RFC 9110: letters, digits and -._~+/, '=' only at its "
            "end), as Authorization carries it.",
            _token68),
    # --- limits ---
    Setting("DOODLEPOD_REQUEST_DEADLINE_S", "120", "Longest time one request may take end to end; past "
            "it the app answers 504. A client may ask for less with the header X-Deadline-Seconds.",
            _positive_float),
    Setting("DOODLEPOD_MAX_UPLOAD_MB", "20", "Largest accepted request body, in MiB (413 beyond).",
            _positive_float),
    Setting("DOODLEPOD_BODY_TIMEOUT_S", "60", "Longest time to receive a request's body (the upload); past "
            "it the app answers 408. The body is read before a render slot is taken, so slow uploads never "
            "hold one.", _positive_float),
    Setting("DOODLEPOD_MAX_JSON_KB", "256", "Largest JSON body, in KiB (413 too_large beyond, refused from its "
            "Content-Length before it is read): JSON bodies carry fields, not files. POST / (the old client's "
            "JSON with a base64 image) may send DOODLEPOD_MAX_UPLOAD_MB.", _positive_float),
    Setting("DOODLEPOD_MAX_FIELD_KB", "64", "Largest form or JSON field other than the image (joints, bbox, "
            "motions), in KiB (413 beyond).", _positive_float),
    Setting("DOODLEPOD_MAX_IMAGE_PIXELS", "40000000", "Largest accepted image, in pixels (width x height; "
            "413 beyond), checked before the image is decoded.", int),
    Setting("DOODLEPOD_MAX_INFLIGHT", "0", "Requests being animated at once per pod (across all workers); "
            "beyond them a few wait (DOODLEPOD_ADMISSION_WAIT_S), the others get 503 with Retry-After. 0: as "
            "many as the CPUs can run, one motion per CPU: ceil(CPUs / motions in DOODLEPOD_DEFAULT_MOTIONS), CPUs "
            "from the affinity mask and the cgroup quota (a Kubernetes CPU limit).", _non_negative_int),
    Setting("DOODLEPOD_CLIENT_RENDER_SLOTS", "0", "Render slots one client's synchronous requests may hold or "
            "wait for at once across the pod (see DOODLEPOD_CLIENT_STORAGE_MB for who a client is); one more "
            "answers 429 render_share_used with Retry-After at once, so a client firing requests back to back "
            "cannot hold every slot or waiting place while others wait. With it on the waiting room has 4 places "
            "per slot. 0: no such share (a backend or a studio sending for many people through one address needs "
            "several slots); 1 suits clients that are people, each at its own address. The render worker's async "
            "jobs of one client hold at most this many of its slots too (and take turns with other clients' jobs "
            "either way).", _non_negative_int),
    Setting("DOODLEPOD_ADMISSION_WAIT_S", "10", "Longest a request waits for a render slot when all are taken, "
            "in seconds: one request per slot may wait (more get 503 at once), and only when a slot is expected "
            "to be free within this time and the pod turned nobody away within the last render time (else 503 "
            "at once: under overload waiting only adds latency); background work (the studio's previews, "
            "'Priority: u=7') never waits and gives its slot up to a waiting request. 0: never wait.",
            _non_negative_float),
    Setting("DOODLEPOD_RETRY_AFTER_S", "0", "Retry-After of 503 overloaded answers, in seconds. 0: measured, "
            "the time until the first render slot is likely free (the moving average of completed "
            "requests' render time minus the oldest slot's age; 2 s before the first request), 1-60 s; "
            "other 503s (model server down, low disk) 3 s.",
            _non_negative_int),
    Setting("DOODLEPOD_RENDER_PROCESSES", "0", "Processes per worker that decode, segment and render "
            "(CPU work never runs on the gevent loop); 0 means one per CPU.", _non_negative_int),
    Setting("DOODLEPOD_RENDER_PROCESS_MEMORY_MB", "0", "Hard memory limit of each render process, in MiB "
            "(its heap and private mappings, RLIMIT_DATA): a render asking more fails alone with 422 "
            "render_too_large, before the container's memory limit is reached and the OOM killer picks a "
            "process. 0: the container's memory limit (its cgroup's, else the machine's memory) less 384 MiB "
            "per gunicorn worker, shared among the render processes of all workers (at least 256 MiB).",
            _non_negative_float),
    Setting("DOODLEPOD_STORAGE_BUDGET_MB", "0", "Most MiB the app stores on its local storage (files, "
            "characters, animations); at it, requests that would store more answer 503 storage_full with "
            "Retry-After until the expiry sweep frees room. Set it well under the volume's size (the pod: 75% "
            "of the app-data emptyDir's sizeLimit, which the kubelet evicts the pod beyond); 0: no budget "
            "(only DOODLEPOD_MIN_FREE_DISK_MB applies). Not used with S3.", _non_negative_float),
    Setting("DOODLEPOD_CLIENT_STORAGE_MB", "0", "Most MiB one client may have stored within the last "
            "DOODLEPOD_EXPIRY_HOURS (characters, their versions, animations, motions from videos); past it its "
            "requests that store answer 429 storage_share_used with Retry-After (DELETE /characters/{id} gives "
            "room back) while other clients go on. A client is its address (an IPv6 address by its network of "
            "DOODLEPOD_CLIENT_IPV6_PREFIX bits, see "
            "DOODLEPOD_TRUSTED_PROXIES) with its bearer token when DOODLEPOD_AUTH_TOKEN is set. 0: a tenth of "
            "DOODLEPOD_STORAGE_BUDGET_MB (no share when that is 0 too). Used with S3 as well.",
            _non_negative_float),
    Setting("DOODLEPOD_CLIENT_IPV6_PREFIX", "56", "Prefix length that names one IPv6 client (for every share, "
            "rate limit and idempotency key): a home or small site is given a /56 (RFC 6177), so a /64 would "
            "make each home 256 clients. 64 where each client has a /64 of its own; 128 for single addresses.",
            _ipv6_prefix),
    Setting("DOODLEPOD_MIN_FREE_DISK_MB", "200", "Free space required on the local storage / temp folder; "
            "below it /ping is 503 and uploads are refused with 503.", _positive_float),
    # --- pipeline ---
    Setting("DOODLEPOD_DETECT_MAX_SIDE", "1000", "The photo is downsized so its longest side is at most "
            "this many pixels before detection (as AnimatedDrawings does).", int),
    Setting("DOODLEPOD_MIN_DETECTION_SCORE", "0.2", "Detections scoring below this are ignored (422 "
            "no_character if none is left).", float),
    Setting("DOODLEPOD_SCENE_MAX_CHARACTERS", "8", "Most characters one scene holds (POST /scenes: the best "
            "detections of a photo after non-maximum suppression; 422 too_many_characters for more sent).",
            _positive_int),
    Setting("DOODLEPOD_SCENE_MIN_SCORE", "0.5", "A photo's detections scoring below this make no character of "
            "a scene (its best detection always does, if it passes DOODLEPOD_MIN_DETECTION_SCORE).", float),
    Setting("DOODLEPOD_SCENE_MAX_OVERLAP", "0.5", "Non-maximum suppression of a scene's detections: a box "
            "overlapping a better one by more than this intersection over union is dropped.", float),
    Setting("DOODLEPOD_SCENE_MAX_MOTIONS", "3", "Most motions one POST /animate with every_character may name "
            "(422 too_many_motions beyond): each is a scene render of every character, one after the other under "
            "one render slot, so it is bounded like a request of DOODLEPOD_DEFAULT_MOTIONS' three motions.",
            _positive_int),
    Setting("DOODLEPOD_SCENE_MAX_WORK_MPX", "1000", "Most work one scene render may ask: characters x frames x "
            "canvas pixels, in millions (422 scene_too_large beyond).", _positive_float),
    Setting("DOODLEPOD_DEFAULT_MOTIONS", "dab,jumping,zombie", "Motions rendered when a request names none "
            "(also the old client's keys).", _csv),
    Setting("DOODLEPOD_DEFAULT_FORMAT", "gif", "Animation format when a request names none.",
            _choice(*FORMATS)),
    Setting("DOODLEPOD_RENDER_SIZE", "400", "Width and height of rendered animations, in pixels.", int),
    Setting("DOODLEPOD_RENDER_SIZE_MIN", "64", "Smallest 'size' a client may ask of POST "
            "/characters/{id}/animations, in pixels.", int),
    Setting("DOODLEPOD_RENDER_SIZE_MAX", "1024", "Largest 'size' a client may ask of POST "
            "/characters/{id}/animations, in pixels.", int),
    Setting("DOODLEPOD_RENDER_FPS", "15", "Frames per second of the animations (the BVH clips are resampled; "
            "15 is smooth on a phone at 40% fewer frames than 25); 'native' keeps every BVH frame; empty: "
            "the animator's default (25).", _fps),
    Setting("DOODLEPOD_RENDER_MAX_FRAMES", "0", "Cap on frames per animation; 0: no cap.", _non_negative_int),
    Setting("DOODLEPOD_RENDER_THREADS", "1", "Threads one render uses for its frames (rasterising, GIF "
            "compression). 1: the process pool already runs one motion per CPU, and threads inside a render "
            "cost more CPU than they save at phone sizes; 2 can shorten a lone large render on an idle pod.",
            _positive_int),
    Setting("DOODLEPOD_MOTIONS_DIR", "", "Extra motion library merged over the built-in one: a folder with a "
            "library.yaml (see docs) plus its BVH and config files.", str),
    Setting("DOODLEPOD_BVH_MAX_MB", "4", "Largest BVH clip a client may upload (form field 'bvh'), in MiB "
            "(413 beyond).", _positive_float),
    Setting("DOODLEPOD_BVH_MAX_JOINTS", "256", "Most joints (end sites included) an uploaded BVH clip may have "
            "(422 invalid_motion beyond).", int),
    Setting("DOODLEPOD_BVH_MAX_FRAMES", "20000", "Most frames an uploaded BVH clip may have (422 invalid_motion "
            "beyond), checked before its frames are read.", int),
    Setting("DOODLEPOD_BVH_MAX_SECONDS", "120", "Longest stretch of an uploaded clip (its start_frame to "
            "end_frame) that is rendered, in seconds (422 invalid_motion beyond).", _positive_float),
    Setting("DOODLEPOD_VIDEO_MAX_MB", "32", "Largest video POST /motions accepts (form field 'video'), in MiB "
            "(413 beyond).", _positive_float),
    Setting("DOODLEPOD_VIDEO_MAX_SECONDS", "20", "Longest video POST /motions accepts, in seconds (the job fails "
            "422 invalid_video beyond, checked before any frame is decoded).", _positive_float),
    # --- TorchServe ---
    Setting("DOODLEPOD_TORCHSERVE_URL", "http://127.0.0.1:8080", "TorchServe inference API."),
    Setting("DOODLEPOD_TORCHSERVE_MANAGEMENT_URL", "http://127.0.0.1:8081", "TorchServe management API "
            "(used by /ping to check that the models have READY workers)."),
    Setting("DOODLEPOD_DETECTOR_MODEL", "drawn_humanoid_detector", "TorchServe model name of the detector."),
    Setting("DOODLEPOD_POSE_MODEL", "drawn_humanoid_pose_estimator", "TorchServe model name of the pose "
            "estimator."),
    Setting("DOODLEPOD_TORCHSERVE_TIMEOUT_S", "30", "Timeout of one TorchServe call (capped by the time "
            "left to the request).", _positive_float),
    Setting("DOODLEPOD_TORCHSERVE_RETRIES", "2", "Retries of a TorchServe call that failed to connect or "
            "got 503/507 (with backoff).", _non_negative_int),
    Setting("DOODLEPOD_MODELS_STATE_FILE", "", "A JSON file in which `make run` says how far the models' "
            "preparation has got (the model stack building, TorchServe starting): /ping reports it, and requests "
            "that need the models are answered by the app's own ink finder meanwhile (DOODLEPOD_FINDER_FALLBACK; "
            "off: 503 models_unavailable). Empty: TorchServe's own state only."),
    Setting("DOODLEPOD_FINDER_FALLBACK", "true", "While the model server is being prepared or is down (the "
            "models' state file says so, it refuses connections, or it has not loaded a model), find a photo's "
            "drawing and fit its joints with the ink finder in the app's own render processes (under the request's "
            "render slot and deadline) instead of answering 503; answers say so (warnings: "
            "found_by_ink_finder_in_app). A busy or slow model server still answers 503. false: always 503.", _bool),
    Setting("DOODLEPOD_PING_TIMEOUT_S", "1", "Timeout of each check /ping makes.", _positive_float),
    # --- storage ---
    Setting("DOODLEPOD_STORAGE", "local", "Where animations go: 'local' (a folder served by the app under "
            "/files/) or 's3'.", _choice("local", "s3")),
    Setting("DOODLEPOD_LOCAL_DIR", "./var/files", "Folder of the local storage (relative paths: from the "
            "working directory; the container uses /var/lib/doodlepod/files)."),
    Setting("DOODLEPOD_PUBLIC_URL", "", "Base URL clients reach the app at (e.g. https://doodles.example.com), "
            "used for local-storage URLs; empty: the host the request reached through a trusted proxy "
            "(DOODLEPOD_FORWARDED_ALLOW_IPS), else URLs relative to the server."),
    Setting("DOODLEPOD_EXPIRY_HOURS", "24", "Characters, animations and motions made from videos are deleted "
            "this many hours after they are made (a character: after its upload; GET answers 404 from then on). "
            "Local storage sweeps them; with S3 give the bucket a lifecycle rule (deploy/examples/s3-lifecycle.json).",
            _positive_float),
    Setting("DOODLEPOD_SWEEP_INTERVAL_S", "600", "How often the local storage is swept of expired files, "
            "in seconds (one worker of the pod sweeps at a time).", _positive_float),
    Setting("DOODLEPOD_S3_BUCKET", "", "S3 bucket (required when DOODLEPOD_STORAGE=s3)."),
    Setting("DOODLEPOD_S3_PREFIX", "doodlepod/", "Key prefix of uploaded animations."),
    Setting("DOODLEPOD_S3_REGION", "", "S3 region; empty: boto3's default chain."),
    Setting("DOODLEPOD_S3_ENDPOINT_URL", "", "S3 endpoint (MinIO, moto, ...); empty: AWS."),
    Setting("DOODLEPOD_S3_URL_MODE", "presigned", "'presigned' (GET URLs signed for "
            "DOODLEPOD_S3_URL_EXPIRY_S) or 'public' (plain URLs; the bucket must allow public reads).",
            _choice("presigned", "public")),
    Setting("DOODLEPOD_S3_URL_EXPIRY_S", "86400", "Lifetime of presigned URLs in seconds (at most 604800).",
            int),
    Setting("DOODLEPOD_S3_PUBLIC_BASE_URL", "", "With URL mode 'public': base URL of the objects (e.g. a "
            "CDN); empty: <endpoint>/<bucket>."),
    Setting("DOODLEPOD_S3_TIMEOUT_S", "10", "Connect and read timeout of one S3 call.", _positive_float),
    Setting("DOODLEPOD_S3_RETRIES", "3", "Attempts per S3 call (botocore standard retry mode).", int),
    # --- async jobs, idempotency keys and rate limits (Redis) ---
    Setting("DOODLEPOD_REDIS_URL", "", "Redis (or Valkey) holding async jobs, idempotency keys and rate-limit "
            "buckets, e.g. redis://doodlepod-redis:6379/0 (a password goes in the URL: redis://:PASS@host...). "
            "Empty: 'Prefer: respond-async' requests answer 503 and requests are neither rate limited nor "
            "deduplicated; synchronous requests work either way.", str),
    Setting("DOODLEPOD_REDIS_PREFIX", "doodlepod:", "Prefix of every Redis key the app writes (to share a "
            "Redis between deployments)."),
    Setting("DOODLEPOD_REDIS_TIMEOUT_S", "2", "Connect timeout of Redis calls; a call answers within this plus "
            "3 s or fails (async requests then get 503).", _positive_float),
    Setting("DOODLEPOD_JOBS_MAX_QUEUED", "100", "Async jobs queued or running at once across the deployment; "
            "one more gets 503 with Retry-After.", _positive_int),
    Setting("DOODLEPOD_JOBS_MAX_ATTEMPTS", "3", "Tries of an async job that fails with a server-side error (or "
            "whose worker dies); after the last it ends 'failed' and stays readable (dead letter).",
            _positive_int),
    Setting("DOODLEPOD_JOBS_VISIBILITY_TIMEOUT_S", "60", "A job whose worker stopped renewing it (every third of "
            "this) for this long is taken over by another worker.", _positive_float),
    Setting("DOODLEPOD_JOBS_TTL_S", "604800", "How long an ended job stays readable at GET /jobs/{id}, in seconds "
            "(never less than DOODLEPOD_IDEMPOTENCY_TTL_S: a repeated key must find its job).", _positive_int),
    Setting("DOODLEPOD_JOBS_POLL_AFTER_S", "2", "Retry-After sent with 202 and with unfinished jobs: how soon a "
            "client should poll.", _positive_int),
    Setting("DOODLEPOD_WORKER_CONCURRENCY", "2", "Jobs one worker process (python -m app.worker) renders at "
            "once; each holds one of the pod's DOODLEPOD_MAX_INFLIGHT render slots while it renders (an idle "
            "worker holds none), and jobs together hold all the slots but one when there are several: one stays "
            "for synchronous requests however many jobs are queued. Videos (POST /motions) are not among them: see "
            "DOODLEPOD_WORKER_VIDEO_CONCURRENCY.", _positive_int),
    Setting("DOODLEPOD_WORKER_VIDEO_CONCURRENCY", "1", "Videos one worker process reads at once (POST /motions: "
            "decoding and the pose model), on threads of their own from a queue of their own, holding no render "
            "slot: videos never take the capacity renders need, and wait behind each other only.",
            _non_negative_int),
    Setting("DOODLEPOD_CLIENT_MAX_QUEUED", "10", "Async jobs one client (see DOODLEPOD_CLIENT_STORAGE_MB) may have "
            "queued, running or waiting for their callback's delivery at once (so a client whose receivers "
            "answer slowly cannot pile up callbacks without end); one more answers 429 jobs_share_used with "
            "Retry-After, while other clients' jobs are still taken (DOODLEPOD_JOBS_MAX_QUEUED bounds them all).",
            _positive_int),
    Setting("DOODLEPOD_CLIENT_QUEUED_MB", "64", "MiB of uploads (images, videos) one client's queued or running "
            "jobs may hold at once; past it 429 queued_bytes_share_used with Retry-After. Images wait in Redis, "
            "videos in the storage (the job names them).", _positive_float),
    Setting("DOODLEPOD_CLIENT_MAX_VIDEOS", "2", "Videos (POST /motions) one client may have queued or being read "
            "at once; one more answers 429 video_share_used with Retry-After.", _positive_int),
    Setting("DOODLEPOD_IDEMPOTENCY_TTL_S", "86400", "How long an Idempotency-Key is remembered, in seconds.",
            _positive_int),
    Setting("DOODLEPOD_RATE_LIMIT_PER_MIN", "60", "Requests that create or store work (every POST of /animate, "
            "/, /characters and /characters/{id}/animations, PATCH /characters/{id}, sync or async) each client "
            "(its address, see DOODLEPOD_TRUSTED_PROXIES, and its bearer token when DOODLEPOD_AUTH_TOKEN is set) "
            "may make per minute, on average (429 beyond); 0: no rate limit. Counted in Redis across the "
            "deployment; without DOODLEPOD_REDIS_URL in each worker process's memory.",
            _non_negative_float),
    Setting("DOODLEPOD_RATE_LIMIT_BURST", "20", "Requests a client may make at once before the per-minute rate "
            "applies (the token bucket's size).", _positive_int),
    Setting("DOODLEPOD_WEBHOOK_SECRET", "", "Key of the HMAC-SHA256 signature of job callbacks "
            "(X-Doodlepod-Signature); empty: requests with a callback_url are refused.", str),
    Setting("DOODLEPOD_WEBHOOK_ATTEMPTS", "5", "Tries of a job callback (exponential backoff from 1 s).",
            _positive_int),
    Setting("DOODLEPOD_WEBHOOK_TIMEOUT_S", "5", "Longest time one callback attempt may take in all (connecting, "
            "sending, reading the answer's head), however slowly the receiver answers.", _positive_float),
    Setting("DOODLEPOD_WEBHOOK_ALLOW", "", "Callback destinations allowed although internal (comma-separated): "
            "networks (10.20.0.0/16, 127.0.0.1/32) and host names (hooks.ns.svc, or .example.internal for every "
            "name under it). Empty: callbacks reach public addresses only; loopback, private, link-local, "
            "unique-local, multicast and cluster names (*.svc, single labels, localhost) are refused with 422.",
            _csv),
    Setting("DOODLEPOD_WEBHOOK_CONCURRENCY", "8", "Callbacks one worker process delivers at once (lanes): at "
            "most 2 to one receiver (scheme, host, port) and DOODLEPOD_CLIENT_WEBHOOK_LANES for one client; a "
            "callback waiting out its retry backoff holds no lane.", _positive_int),
    Setting("DOODLEPOD_CLIENT_WEBHOOK_LANES", "2", "Callbacks of one client (see DOODLEPOD_CLIENT_STORAGE_MB) one "
            "worker process delivers at once: a client whose receivers answer slowly, on however many hosts "
            "and ports, holds at most this many lanes; its other callbacks wait their turn (never refused).",
            _positive_int),
    Setting("DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S", "2", "Longest a callback_url's name may take to resolve when "
            "the request is made (422 callback_url_refused, rule dns_timeout, beyond); at delivery the lookup "
            "counts in the attempt's DOODLEPOD_WEBHOOK_TIMEOUT_S. Lookups run on threads of their own "
            "(DOODLEPOD_WEBHOOK_DNS_THREADS), never on gevent's resolver pool, one at a time per client (429 "
            "callback_dns_share_used while one runs).", _positive_float),
    Setting("DOODLEPOD_WEBHOOK_DNS_THREADS", "8", "Threads per process that look callback names up (the app's "
            "and the worker's own; a slow name holds one until the system resolver gives up).", _positive_int),
)

_BY_NAME = {s.name: s for s in SETTINGS}


class SettingsError(ValueError):
    """A DOODLEPOD_* variable has a value that cannot be parsed."""


@dataclass(frozen=True)
class Settings:
    """Parsed settings; attribute names are the variable names without ``DOODLEPOD_``, lower case."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, item: str) -> Any:
        try:
            return self.values[item]
        except KeyError:
            raise AttributeError(item) from None

    def __reduce__(self):  # picklable although __getattr__ is dynamic
        return (Settings, (dict(self.values),))


def attribute_name(env_name: str) -> str:
    return env_name.removeprefix("DOODLEPOD_").lower()


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Parse every setting from ``environ`` (default: ``os.environ``).

    ``overrides`` (attribute names, already parsed values) win over the environment; tests use them.
    A value that cannot be parsed raises :class:`SettingsError` naming the variable.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for s in SETTINGS:
        raw = env.get(s.name, s.default)
        try:
            values[attribute_name(s.name)] = s.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{s.name}={raw!r}: {exc}") from None
    for key, value in overrides.items():
        if key not in values:
            raise SettingsError(f"unknown setting override {key!r}")
        values[key] = value
    if not values["max_inflight"]:
        values["max_inflight"] = default_max_inflight(len(values["default_motions"]) or 1)
    return Settings(values)


def default_max_inflight(motions_per_request: int, cpus: int | None = None) -> int:
    """Requests the CPUs can animate at once: each CPU renders one motion at a time, a request
    renders its motions in parallel, so ceil(CPUs / motions) requests keep every CPU busy without
    queueing one request's motions behind another's (at least 1)."""
    if cpus is None:
        cpus = available_cpus()
    return max(1, -(-cpus // max(1, motions_per_request)))


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """``DOODLEPOD_*`` variables set in the environment that no setting declares (likely typos)."""
    env = os.environ if environ is None else environ
    return sorted(k for k in env if k.startswith("DOODLEPOD_") and k not in _BY_NAME
                  and k not in _IGNORED and not k.startswith(_IGNORED_PREFIXES))


#: DOODLEPOD_* variables read by other parts of the kit (make's venv/cache, scripts/run_local.sh), not the app.
_IGNORED = frozenset({"DOODLEPOD_CACHE", "DOODLEPOD_VENV"})
_IGNORED_PREFIXES = ("DOODLEPOD_RUN_",)


def markdown_table() -> str:
    """The settings as a Markdown table (name, default, description) for docs/configuration.md."""
    lines = ["| Variable | Default | Description |", "|---|---|---|"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default else "(empty)"
        lines.append(f"| `{s.name}` | {default} | {s.description} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--markdown" in sys.argv[1:]:
        print(markdown_table())
    else:
        print("usage: python -m app.config --markdown   (print the settings table)\n")
        for s in SETTINGS:
            print(f"{s.name}={s.default}\n    {s.description}")


def available_cpus(cpu_max: str | Path = "/sys/fs/cgroup/cpu.max") -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota (``cpu_max``,
    "QUOTA PERIOD" in microseconds, what a Kubernetes CPU limit sets), rounded up; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        quota, period = Path(cpu_max).read_text().split()[:2]
        if quota != "max" and float(period) > 0:
            n = min(n, max(1, math.ceil(float(quota) / float(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)
