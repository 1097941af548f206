"""Work orders (app/orders.py): an async job runs the order its synchronous twin would have run, and a
request field handled nowhere fails.

The twins: the real app in process, with a real Redis (Valkey) on loopback. A synchronous request's
order is caught where the route hands it to the resource (the resource's method is wrapped to keep its
arguments and answer 503 instead of rendering: the render itself is the resources' tests' concern); the
async request's order is read back from the job's payload in Redis the way the render worker reads it
(:func:`app.worker.read_order`). No model server: the characters are the client's joints and box.
"""
from __future__ import annotations

import io
import json

import pytest
import yaml
from PIL import Image

from app.errors import Unavailable
from app.intake.models import AnimateForm, LegacyRequest, RenderRequest, SceneRenderRequest, VideoForm
from app.orders import ORDERS, AnimateOrder, CharacterOrder, SceneOrder, VideoOrder, WorkOrder
from app.worker import HANDLERS, read_order
from tests.conftest import CHAR1

pytestmark = [pytest.mark.redis]

#: Which order each request model of work becomes.
MADE_INTO: dict[type, type[WorkOrder]] = {AnimateForm: AnimateOrder, LegacyRequest: AnimateOrder,
                                          RenderRequest: CharacterOrder, SceneRenderRequest: SceneOrder,
                                          VideoForm: VideoOrder}


@pytest.mark.parametrize("model", list(MADE_INTO), ids=lambda m: m.__name__)
def test_every_field_of_a_request_is_in_its_order_or_named_apart(model):
    order = MADE_INTO[model]
    for name in model.model_fields:
        carried = order.renamed.get(name, name) in order.model_fields
        assert carried or name in order.apart, f"{model.__name__}.{name}: in no {order.__name__}"


@pytest.mark.parametrize("model", list(MADE_INTO), ids=lambda m: m.__name__)
def test_a_field_added_to_a_request_without_its_order_fails(model):
    """The next `fps` on a request model, forgotten in the order, cannot be dropped on the async path."""
    wider = type(f"Wider{model.__name__}", (model,), {"__annotations__": {"fps": int}, "fps": 12})
    fields = wider.model_construct(**{name: None for name in model.model_fields})
    with pytest.raises(TypeError, match=r"\.fps is in no"):
        MADE_INTO[model].of(fields, base_url="http://x")


def test_every_order_has_a_handler_and_survives_the_queue():
    assert set(ORDERS) == set(HANDLERS)
    order = AnimateOrder(motions=("dab", "zombie"), format="gif", size=200, bbox=(1, 2, 3, 4), base_url="http://h",
                         joints=[{"name": "root", "loc": [1, 2], "parent": None}])
    payload = json.loads(json.dumps(order.to_json()))
    assert read_order("animate", payload) == order
    assert read_order("some_test_kind", {"x": 1}) == {"x": 1}
    with pytest.raises(ValueError):  # a payload the order does not know is refused, not half-read
        read_order("animate", {**payload, "fps": 12})


def test_an_order_reads_the_payloads_of_jobs_queued_before_orders_existed():
    """A job queued by the previous version (its hand-written payload) runs on this one."""
    old = {"motions": ["dab"], "format": "gif", "size": 400, "joints": None, "bbox": None, "base_url": "http://h"}
    assert read_order("animate", old) == AnimateOrder(motions=("dab",), format="gif", size=400, base_url="http://h")
    assert read_order("animate", {"motions": ["dab"], "format": "gif", "size": 400, "every_character": True,
                                  "base_url": "http://h"}).every_character
    assert read_order("motion_from_video", {"client": "c", "base_url": "h", "video_key": "k"}).start_s is None
    assert read_order("character_animations", {"character": "c1", "motions": ["dab"], "format": "gif",
                                               "size": 400, "max_frames": None, "if_match": '"2"',
                                               "base_url": "h"}).if_match == '"2"'


# --- the twins -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(make_app, redis_server):
    return make_app(redis_url=redis_server.url, render_max_frames=4).test_client()


@pytest.fixture
def caught(client, monkeypatch):
    """The orders the resources are handed: each wrapped method keeps its first argument and answers 503."""
    svc = client.application.extensions["doodlepod"]
    orders: list[WorkOrder] = []

    def catch(*args, **kwargs):
        orders.append(next(a for a in args if isinstance(a, WorkOrder)))
        raise Unavailable("caught by the test", 1)

    for target, name in ((svc.pipeline, "run"), (svc.characters, "render"), (svc.scenes, "render"),
                         (svc.scenes, "animate_photo")):
        monkeypatch.setattr(target, name, catch)
    return orders


def _joints_and_box() -> tuple[str, str]:
    cfg = yaml.safe_load((CHAR1 / "char_cfg.yaml").read_text())
    with Image.open(CHAR1 / "texture.png") as im:
        box = [0, 0, im.width, im.height]
    return json.dumps({j["name"]: j["loc"] for j in cfg["skeleton"]}), json.dumps(box)


def _photo_form(**fields) -> dict:
    return {"image": (io.BytesIO((CHAR1 / "texture.png").read_bytes()), "char1.png", "image/png"), **fields}


def _twins(client, caught, path: str, body, headers=None) -> tuple[WorkOrder, WorkOrder]:
    """The order of ``body`` sent to ``path`` synchronously (caught at the resource) and asynchronously
    (read back from its job)."""
    def post(extra: dict[str, str]):
        data, sent = body(), {**(headers or {}), **extra}
        if "image" in data:
            return client.post(path, data=data, content_type="multipart/form-data", headers=sent)
        return client.post(path, json=data, headers=sent)

    sync = post({})
    assert sync.status_code == 503 and len(caught) == 1, sync.get_json()
    queued = post({"Prefer": "respond-async"})
    assert queued.status_code == 202, queued.get_json()
    raw = client.application.extensions["doodlepod"].jobs.raw_job(queued.get_json()["id"])
    return caught[0], read_order(raw["kind"], json.loads(raw["payload"]))


def test_animate_twins_run_the_same_order(client, caught):
    joints, box = _joints_and_box()
    sync, queued = _twins(client, caught, "/animate",
                          lambda: _photo_form(motions="dab,zombie,dab", size="200", joints=joints, bbox=box))
    assert isinstance(sync, AnimateOrder) and sync.motions == ("dab", "zombie") and sync.size == 200
    assert sync.joints is not None and sync.bbox is not None
    assert queued == sync


def test_every_character_twins_run_the_same_order(client, caught):
    sync, queued = _twins(client, caught, "/animate",
                          lambda: _photo_form(every_character="true", format="webp"))
    assert isinstance(sync, AnimateOrder) and sync.every_character and sync.format == "webp"
    assert sync.motions  # the default motions, filled in once
    assert queued == sync


@pytest.fixture(scope="module")
def character(client) -> str:
    joints, box = _joints_and_box()
    made = client.post("/characters", data=_photo_form(joints=joints, bbox=box), content_type="multipart/form-data")
    assert made.status_code == 201, made.get_json()
    return made.get_json()["id"]


def test_character_render_twins_run_the_same_order(client, caught, character):
    sync, queued = _twins(client, caught, f"/characters/{character}/animations",
                          lambda: {"motions": ["zombie", "dab"], "format": "gif", "size": 160, "max_frames": 3},
                          headers={"If-Match": '"1"'})
    assert sync == CharacterOrder(character=character, motions=("zombie", "dab"), format="gif", size=160,
                                  max_frames=3, if_match='"1"', base_url=sync.base_url)
    assert queued == sync


def test_scene_render_twins_run_the_same_order(client, caught, character):
    made = client.post("/scenes", json={"characters": [character], "motions": ["dab"]})
    assert made.status_code == 201, made.get_json()
    sid = made.get_json()["id"]
    sync, queued = _twins(client, caught, f"/scenes/{sid}/animations",
                          lambda: {"format": "gif", "size": 200, "max_frames": 4})
    assert sync == SceneOrder(scene=sid, format="gif", size=200, max_frames=4, base_url=sync.base_url)
    assert queued == sync
