"""What every test folder shares: the repository's paths and an in-process app on the real factory.

Paths are module constants (``from tests.conftest import CHAR1``); fixtures are found by pytest.
Markers (registered in pyproject.toml): ``e2e`` real servers over HTTP (gunicorn, TorchServe, moto),
``model_stack`` the OpenMMLab stack (torch, mmcv, mmdet, mmpose), ``browser`` a real Chromium,
``redis`` a real Redis server. ``make test-fast`` runs the tests that carry none of them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
#: AnimatedDrawings' example files (characters, BVH clips, motion and retarget configs), MIT licence.
AD_ROOT = FIXTURES / "animated_drawings"
AD_EXAMPLES = AD_ROOT / "examples"
CHARACTERS = AD_EXAMPLES / "characters"
CHAR1 = CHARACTERS / "char1"
BVH_DIR = AD_EXAMPLES / "bvh"
MOTION_CONFIGS = AD_EXAMPLES / "config" / "motion"
RETARGET_CONFIGS = AD_EXAMPLES / "config" / "retarget"
FAIR = RETARGET_CONFIGS / "fair1_ppf.yaml"
CMU = RETARGET_CONFIGS / "cmu1_pfp.yaml"
#: Joint positions recorded from AnimatedDrawings' own code (see that folder's README.md).
AD_REFERENCE = FIXTURES / "ad_reference"
#: TorchServe serving fake models, moto's S3 server and gunicorn, for the end-to-end tests.
TORCHSERVE_FAKE = FIXTURES / "torchserve_fake"


@pytest.fixture(scope="session")
def make_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """``make_app(**settings)``: the real :func:`app.create_app` in this process, on local storage
    in a temporary folder, one render process, and TorchServe pointed at a closed port (model calls
    fail fast as 503: the app's own ink finder is off unless a test turns it on, ``finder_fallback=True``).
    Keyword arguments override settings by attribute name (``auth_token="x"``).
    Render pools are shut down at the end of the session."""
    from app import create_app

    apps = []

    def make(**overrides: Any):
        root = tmp_path_factory.mktemp("app")
        settings: dict[str, Any] = {"local_dir": str(root / "files"), "runtime_dir": str(root / "run"),
                                    "render_processes": 1, "torchserve_url": "http://127.0.0.1:9",
                                    "torchserve_management_url": "http://127.0.0.1:9",
                                    "torchserve_retries": 0, "finder_fallback": False,
                                    # one client (127.0.0.1) makes every test's requests: a wide bucket
                                    "rate_limit_per_min": 6000.0, "rate_limit_burst": 2000}
        app = create_app(**{**settings, **overrides})
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["doodlepod"].pool.shutdown()


@pytest.fixture(scope="session")
def app(make_app):
    """The app on default settings (no auth), shared by the session's in-process tests."""
    return make_app()


@pytest.fixture
def client(app):
    """A Flask test client of :func:`app` (in-process HTTP: no sockets, no gunicorn)."""
    return app.test_client()


@pytest.fixture(scope="module")
def torchserve(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A real TorchServe on a loopback port serving the fake-model archives of
    ``tests/fixtures/torchserve_fake`` (answers the test controls with ``set_control``: the models
    need a GPU and weights this machine lacks). One per test module; stopped and removed after it."""
    from tests.support import stack

    workdir = stack.make_workdir(f"dp-{request.module.__name__.rsplit('.', 1)[-1]}-ts-")
    ts = stack.FakeTorchServe(workdir)
    try:
        ts.start()
        yield ts
    finally:
        ts.stop()
        stack.remove(workdir)


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    """moto's S3 server on a loopback port (S3 itself is on the internet). One per test module."""
    from tests.support import stack

    moto = stack.MotoS3()
    try:
        moto.start()
        yield moto
    finally:
        moto.stop()


@pytest.fixture
def models_find_the_drawing(request: pytest.FixtureRequest, page: tuple[Any, Any]) -> Iterator[None]:
    """The fake models answer the module's ``page`` fixture (a character pasted on a white page): the
    detector finds its dark pixels, the pose model answers the character's joints; the calls log starts
    empty. A module asks for it with ``pytest.mark.usefixtures``; tests without TorchServe skip it."""
    if "torchserve" not in request.fixturenames:
        yield
        return
    from tests.support import stack

    ts = request.getfixturevalue("torchserve")
    image, joints = page
    ts.set_control(detector={"mode": "nonwhite"},
                   pose={"mode": "fractions", "fractions": stack.pose_fractions(image, joints)})
    if ts.calls_log.exists():
        ts.calls_log.unlink()
    yield
