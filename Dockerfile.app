# doodlepod app container: the Flask API under gunicorn with gevent workers, plus the animator.
# CPU only; talks to the model container (TorchServe) over localhost in the pod.
#   docker build -f Dockerfile.app -t doodlepod-app .
#   docker build -f Dockerfile.app --build-arg ROLE=worker -t doodlepod-worker .
#   docker run -p 8000:8000 -e DOODLEPOD_TORCHSERVE_URL=http://host:8080 doodlepod-app
# ROLE=worker: the same image plus the pose model that turns a video into a motion (mediapipe,
# OpenCV, matplotlib: 370 MB), for the render worker (python -m app.worker), the only process
# that runs it (the motion_from_video job); the API's image (ROLE=app, the default) leaves it out.
# Settings: DOODLEPOD_* environment variables (app/config.py; `python -m app.config` lists them).
# No HEALTHCHECK: Kubernetes probes /healthz (liveness) and /ping (readiness) itself.

# Which image the last stage is: app (the API) or worker (the API's image + the video pose model).
ARG ROLE=app

# The animator's kernels (animator/_*.pyx) are compiled in a stage of their own: the runtime image
# below gets the built modules and holds no compiler.
FROM python:3.11.11-slim-bookworm AS kernel
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY requirements/build.txt requirements/
RUN pip install --no-cache-dir --disable-pip-version-check -r requirements/build.txt
COPY setup.py ./
COPY animator/_*.pyx animator/
RUN python setup.py build_ext --inplace

FROM python:3.11.11-slim-bookworm AS deps-app

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/doodlepod

# Dependencies first (pinned), so code changes do not reinstall them.
COPY requirements/animator.txt requirements/app.txt requirements/pose.txt requirements/
RUN pip install --no-cache-dir -r requirements/app.txt

# The pose model (a motion from a video): mediapipe without its declared dependencies (see pose.txt),
# with the OpenCV and matplotlib builds it imports.
FROM deps-app AS deps-worker
# mediapipe opens libEGL.so.1 and libGLESv2.so.2 even on its CPU path (scripts/install_pose_libs.sh)
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libegl1 libgles2 \
 && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir opencv-python-headless==5.0.0.93 matplotlib==3.11.2 \
    && pip install --no-cache-dir --no-deps -r requirements/pose.txt

# hadolint ignore=DL3006
FROM deps-${ROLE}
# (DL3006 ignored: deps-${ROLE} names one of the stages above, deps-app or deps-worker, not an image
# from a registry, so there is no tag to pin.)
WORKDIR /srv/doodlepod

COPY animator/ animator/
COPY --from=kernel /src/animator/*.so animator/
COPY app/ app/
COPY motions/ motions/
COPY docs/motions.md docs/motions.md
# Bytecode now: the workers and render processes cannot write it (PYTHONDONTWRITEBYTECODE, a
# read-only tree), and would otherwise compile every module of app/ and animator/ at each start.
RUN python -m compileall -q animator app

RUN useradd --system --uid 10001 --user-group --home-dir /srv/doodlepod --shell /usr/sbin/nologin doodlepod \
    && mkdir -p /var/lib/doodlepod/files /run/doodlepod \
    && chown -R 10001:10001 /var/lib/doodlepod /run/doodlepod

# The runtime folder (render slots, memory-mapped metric files) lives apart from the data: pod.yaml
# mounts a small in-memory volume there, so a full data disk cannot SIGBUS the workers.
ENV DOODLEPOD_LOCAL_DIR=/var/lib/doodlepod/files \
    DOODLEPOD_RUNTIME_DIR=/run/doodlepod \
    DOODLEPOD_PORT=8000

USER 10001:10001
EXPOSE 8000
STOPSIGNAL SIGTERM
ENTRYPOINT ["gunicorn", "-c", "app/gunicorn_conf.py", "app:create_app()"]
