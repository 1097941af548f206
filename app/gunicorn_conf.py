"""gunicorn settings for the app: ``gunicorn -c app/gunicorn_conf.py "app:create_app()"``.

gevent workers (one loop serves many slow clients; CPU work goes to each worker's render process
pool), bind address and worker count from ``DOODLEPOD_*`` variables (see app/config.py), and
timeouts that follow the request deadline: a worker gets the deadline plus a margin to finish its
in-flight requests on shutdown (``graceful_timeout``), and the keep-alive is short.

The master makes the pod's runtime folder (render slots, Prometheus multiprocess files) before it
forks, so every worker shares it.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from app import metrics_dir, new_runtime_dir  # noqa: E402
from app.config import load_settings  # noqa: E402

_settings = load_settings()

# The shared runtime folder: created here, in the master, and exported to the workers.
_made_runtime = not _settings.runtime_dir
_runtime = _settings.runtime_dir or new_runtime_dir()   # in memory (/dev/shm) where it can be
os.environ["DOODLEPOD_RUNTIME_DIR"] = _runtime
Path(_runtime).mkdir(parents=True, exist_ok=True)
_metrics_dir = metrics_dir(_runtime, _settings)   # in memory if the runtime folder shares the data disk
shutil.rmtree(_metrics_dir, ignore_errors=True)  # stale files of a previous run would be summed in
_metrics_dir.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics_dir)

bind = f"{_settings.host}:{_settings.port}"
# gevent, with gunicorn's own error answers (unparseable headers, limits) in JSON
worker_class = "app.gunicorn_worker.JsonErrorWorker"
workers = _settings.workers
worker_connections = _settings.worker_connections
# gevent workers heartbeat from their loop; a loop blocked this long is stuck, not busy (CPU work
# runs in the render processes).
timeout = 30
graceful_timeout = int(_settings.graceful_timeout_s or _settings.request_deadline_s + 5)
keepalive = 5
loglevel = _settings.log_level
accesslog = "-" if _settings.access_log else None
errorlog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms rid=%({x-request-id}o)s'
# Each worker imports the app after gevent has patched it (no preload: the render pool and the
# storage clients must be made in the worker).
preload_app = False
# Only these peers may set X-Forwarded-Proto / SCRIPT_NAME (gunicorn ignores them from others).
forwarded_allow_ips = ",".join(_settings.forwarded_allow_ips)


def on_exit(server) -> None:  # noqa: ANN001 - gunicorn hook signature
    """Remove the runtime folder if this master made it (a temporary one)."""
    if _made_runtime:
        shutil.rmtree(_runtime, ignore_errors=True)
    if Path(_runtime) not in _metrics_dir.parents:  # moved to memory: leave nothing behind there
        shutil.rmtree(_metrics_dir, ignore_errors=True)


def child_exit(server, worker) -> None:  # noqa: ANN001 - gunicorn hook signature
    """Drop a dead worker's live gauge values from the pod's metrics."""
    from prometheus_client import multiprocess
    multiprocess.mark_process_dead(worker.pid)
control_socket_disable = True  # several instances (tests, a sidecar) must not fight over one socket
