"""The OpenAPI document against the code: one source of truth for routes, fields, bounds and error codes.

The document is app/http/openapi.yaml (written by hand: paths, prose, answers, headers) plus the
request schemas generated from the request models (app/intake/models.py). These tests fail when the
code and the document disagree, in either direction:

* request bodies: the served document's request schemas are the ones the models generate, and each
  route's request body is the model its view reads (``@takes``), for exactly the media types the
  model reads; the yaml writes none of the generated schemas itself;
* routes: Flask's url_map (path and method) against the document's paths and operations;
* error codes: every ApiError class of the app against the document's ErrorCode list, with its status,
  and each status's error schema against the codes of that status;
* bounds: every ``x-bounds`` value equals what it names (a setting's default, a constant), every
  request-bounding setting and ``MAX_*`` constant of the app is named by one, and the served document
  carries the running settings;
* headers: every header the routes read (found in their source) is a header parameter of the
  document, and every one the document has is read somewhere.

tests/app/http/test_openapi_fuzz.py sends the live app what the document allows (and what it does not).
"""
from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import app as app_package
from app import config
from app.errors import ApiError
from app.http import codes, reference
from app.intake import bounds

REPO = Path(__file__).resolve().parents[3]
ROUTES = REPO / "app" / "http"
SPEC = reference.written()
METHODS = {"get", "post", "put", "patch", "delete"}


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _deref(node: dict) -> dict:
    while "$ref" in node:
        target: Any = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def test_the_document_is_valid_openapi_3_1(client):
    from openapi_spec_validator import validate

    assert SPEC["openapi"].startswith("3.1")
    validate(SPEC)
    served = client.get("/openapi.json")
    assert served.status_code == 200 and served.mimetype == "application/json"
    validate(served.get_json())
    as_yaml = client.get("/openapi.yaml")
    assert as_yaml.status_code == 200 and yaml.safe_load(as_yaml.data) == served.get_json()


# --- routes --------------------------------------------------------------------------------------

def _flask_path(rule: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def test_every_route_is_in_the_document_and_every_operation_is_a_route(app):
    routes = {(_flask_path(rule.rule), method.lower()) for rule in app.url_map.iter_rules()
              for method in rule.methods - {"HEAD", "OPTIONS"}}
    documented = {(path, method) for path, item in SPEC["paths"].items() for method in item if method in METHODS}
    assert routes - documented == set(), "routes the document lacks"
    assert documented - routes == set(), "operations no route answers"


def test_path_parameters_match_the_routes():
    for path, item in SPEC["paths"].items():
        names = set(re.findall(r"{([a-z_]+)}", path))
        for method, op in item.items():
            if method not in METHODS:
                continue
            params = [_deref(p) for p in item.get("parameters", []) + op.get("parameters", [])]
            assert {p["name"] for p in params if p["in"] == "path"} == names, f"{method} {path}"


# --- error codes ---------------------------------------------------------------------------------

def _api_errors() -> dict[str, int]:
    """code -> status of every ApiError class the app defines (every module imported)."""
    for info in pkgutil.walk_packages(app_package.__path__, "app."):
        if info.name not in ("app.worker", "app.gunicorn_conf"):  # entry points with import-time effects
            importlib.import_module(info.name)
    importlib.import_module("app.worker")  # its classes too (it only runs when started as __main__)
    found: dict[str, int] = {}
    todo = [ApiError]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("app.") and not _family_base(cls):
            assert found.get(cls.code, cls.status) == cls.status, f"{cls.code} has two statuses"
            found[cls.code] = cls.status
    return found


def _family_base(cls: type) -> bool:
    """A class only subclassed, never raised itself (ApiError, ClientError, UpstreamError, Unavailable)."""
    if not cls.__subclasses__():
        return False
    source = "\n".join(p.read_text() for p in (REPO / "app").rglob("*.py"))
    return re.search(rf"\b{cls.__name__}\(", source.replace(f"class {cls.__name__}(", "")) is None


def _documented_codes() -> dict[str, int]:
    return {entry["const"]: entry["x-status"] for entry in SPEC["components"]["schemas"]["ErrorCode"]["oneOf"]}


def test_every_error_class_is_a_listed_code_and_the_document_lists_them_all():
    """The list app/http/codes.py makes (and the document prints) holds every ApiError class the app
    defines (found by importing every module, not from the list's own modules), each with its text."""
    from werkzeug.exceptions import MethodNotAllowed, RequestedRangeNotSatisfiable

    from app.gunicorn_worker import CODES as GUNICORN_CODES

    listed = {c.code: c.status for c in codes.codes()}
    others = {c.code: c.status for c in codes.OTHERS}
    assert {**_api_errors(), **others} == listed
    assert all(c.when for c in codes.codes()), "a code without its text (its class's docstring)"
    assert _documented_codes() == listed
    # the codes no class raises are the names werkzeug's errors get (app/http/answers.py) and gunicorn's
    for exc in (MethodNotAllowed(), RequestedRangeNotSatisfiable()):
        assert listed[exc.name.lower().replace(" ", "_")] == exc.code
    assert GUNICORN_CODES[431] == "headers_too_large" and "headers_too_large" in others


def test_each_status_error_schema_lists_exactly_that_status_codes():
    documented = _documented_codes()
    statuses = sorted(set(documented.values()))
    for status in statuses:
        schema = SPEC["components"]["schemas"][f"Error{status}"]
        assert sorted(schema["properties"]["error"]["enum"]) == sorted(c for c, s in documented.items() if s == status)
    # and every error response of the document uses its status's schema
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            for status, response in op["responses"].items():
                body = _deref(response).get("content", {}).get("application/json", {}).get("schema", {})
                if int(status) >= 400 and path != "/ping":  # /ping's 503 is its readiness document
                    assert body == {"$ref": f"#/components/schemas/Error{status}"}, f"{method} {path} {status}"


# --- bounds --------------------------------------------------------------------------------------

def _bounds() -> list[tuple[dict, str, str]]:
    return [(node, keyword, source) for node in _walk(SPEC) for keyword, source in node.get("x-bounds", {}).items()]


def test_written_bounds_are_the_code_defaults():
    defaults = config.load_settings({})
    assert _bounds(), "the document names no bound"
    for node, keyword, source in _bounds():
        assert node[keyword] == bounds.bound_value(source, defaults), f"{keyword} from {source}"
    assert bounds.resolve(SPEC, defaults) == SPEC


def test_the_served_document_carries_the_running_settings(make_app):
    app = make_app(render_size_max=512, max_upload_mb=2, bvh_max_joints=99, render_max_frames=300)
    served = app.test_client().get("/openapi.json").get_json()
    schemas = served["components"]["schemas"]
    assert schemas["RenderSize"]["maximum"] == 512
    assert schemas["MaxFrames"]["maximum"] == 300
    assert schemas["BvhFile"]["x-max-joints"] == 99
    assert served["paths"]["/animate"]["post"]["requestBody"]["x-max-bytes"] == 2 * 2**20


#: Settings whose names say "limit" but that bound no client input (capacity, operations, processing);
#: each is documented where it shows (Retry-After, /ping) or in docs/configuration.md.
NOT_REQUEST_BOUNDS = {
    "DOODLEPOD_MAX_INFLIGHT",        # capacity: 503 overloaded
    "DOODLEPOD_MIN_FREE_DISK_MB",    # operations: 503 low_disk_space, /ping
    "DOODLEPOD_STORAGE_BUDGET_MB",   # operations: 503 storage_full (what the app stored, not one request)
    "DOODLEPOD_DETECT_MAX_SIDE",     # the image is downsized to it, not refused
    "DOODLEPOD_MIN_DETECTION_SCORE",  # the detector's threshold
    "DOODLEPOD_JOBS_MAX_QUEUED",     # capacity: 503 queue_full
    "DOODLEPOD_JOBS_MAX_ATTEMPTS",   # the worker's retries
    "DOODLEPOD_SCENE_MIN_SCORE",     # which detections of a photo make a scene's characters
    "DOODLEPOD_SCENE_MAX_OVERLAP",   # the non-maximum suppression of those detections
    "DOODLEPOD_STORAGE_BUDGET_MB",   # capacity: 503 storage_full
    "DOODLEPOD_RENDER_PROCESS_MEMORY_MB",  # capacity of a render process: 422 render_too_large
    "DOODLEPOD_CLIENT_STORAGE_MB",   # a client's share (app/shares.py): 429 storage_share_used
    "DOODLEPOD_CLIENT_QUEUED_MB",    # a client's share: 429 queued_bytes_share_used
    "DOODLEPOD_CLIENT_MAX_QUEUED",   # a client's share: 429 jobs_share_used
    "DOODLEPOD_CLIENT_MAX_VIDEOS",   # a client's share: 429 video_share_used
}
#: MAX_* constants of the app that bound no client input.
NOT_REQUEST_CONSTANTS = {
    "app.characters.torchserve:MAX_ANSWER_BYTES",         # TorchServe's answers
    "app.render.pipeline:MAX_PROCESSES_PER_RENDER",   # CPUs a render uses
    "app.jobs.webhooks:MAX_ANSWER_HEAD",       # what a callback receiver's answer may hold
    "app.jobs.retry:MAX_DELAY_S",              # how long a retried job waits before its next attempt
    "app.characters.preparation:MAX_STATE_BYTES",    # make run's models-state file
    "app.characters.preparation:MAX_RETRY_AFTER_S",  # the longest Retry-After of models_unavailable
    "app.worker:MAX_WAITING_CALLBACKS",   # callbacks a worker holds while their lanes are busy
    "app.render.finder_steps:MAX_FIGURES",     # boxes the app's own ink finder reports in one photo
}


def _named_sources() -> set[str]:
    return {part.strip() for _, _, source in _bounds() for part in source.split(" or ")}


def test_every_request_bound_of_the_code_is_in_the_document():
    named = _named_sources()
    bounding = {s.name for s in config.SETTINGS
                if re.search(r"(^|_)(MAX|MIN)(_|$)|_(MB|KB|PIXELS)$|DEADLINE|BODY_TIMEOUT|RATE_LIMIT", s.name.removeprefix("DOODLEPOD_"))}
    assert bounding - NOT_REQUEST_BOUNDS - named == set(), "settings that bound requests but the document lacks"
    constants = set()
    for path in (REPO / "app").rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for name in re.findall(r"^(MAX_[A-Z_]+|[A-Z_]+_MAX|[A-Z_]+_LIMIT)\s*[:=]", path.read_text(), re.M):
            constants.add(f"{module}:{name}")
    assert constants - NOT_REQUEST_CONSTANTS - named == set(), "constants that bound requests but the document lacks"
    assert {s for s in named if ":" in s and s.startswith("app.")} - constants - {"app.http.hooks:_REQUEST_ID"} == set()


def test_format_enum_is_the_animator_formats():
    from animator.formats import FORMATS

    assert SPEC["components"]["schemas"]["Format"]["enum"] == list(FORMATS)


# --- request bodies: generated equals served -----------------------------------------------------

def test_the_served_request_schemas_are_the_generated_ones(make_app):
    from app.intake.models import MODELS, components

    generated = components()
    assert {m.__name__ for m in MODELS} <= set(generated)
    assert not set(generated) & set(reference.hand_written()["components"]["schemas"]), "written twice"
    assert not set(codes.schemas()) & set(reference.hand_written()["components"]["schemas"]), "written twice"
    settings = config.load_settings({}, render_size_max=512, max_field_kb=8)
    app = make_app(render_size_max=512, max_field_kb=8)
    served = app.test_client().get("/openapi.json").get_json()["components"]["schemas"]
    for name, schema in bounds.resolve(generated, settings).items():
        assert served[name] == schema, name
    assert served["RenderSize"]["maximum"] == 512 and served["MotionList"]["anyOf"][0]["maxLength"] == 8 * 1024


#: The request body media types each kind of body a model reads (its ``media``) stands for.
MEDIA = {"json": {"application/json", "application/merge-patch+json"},
         "form": {"multipart/form-data", "application/x-www-form-urlencoded"},
         "image": {"image/png", "image/jpeg", "image/webp", "image/heic"}}


def test_each_request_body_is_the_model_its_route_reads(app):
    routes = 0
    for rule in app.url_map.iter_rules():
        model = getattr(app.view_functions[rule.endpoint], "request_model", None)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            op = SPEC["paths"][_flask_path(rule.rule)][method.lower()]
            where = f"{method} {rule.rule}"
            if model is None:
                assert "requestBody" not in op, f"{where} reads no model but documents a body"
                continue
            routes += 1
            content = _deref(op["requestBody"])["content"]
            for media in model.media:  # every kind of body it reads is documented (the main type at least)
                assert content.keys() & MEDIA[media], f"{where}: no {media} body"
            for media_type, entry in content.items():
                kind = next(k for k, types in MEDIA.items() if media_type in types)
                assert kind in model.media, f"{where} documents {media_type}, which {model.__name__} does not read"
                want = "RawImage" if kind == "image" else model.__name__
                assert entry["schema"] == {"$ref": f"#/components/schemas/{want}"}, f"{where} {media_type}"
    assert routes == 9  # 6, and the three scene routes with a body


def test_a_route_reads_only_the_model_it_declares(app):
    from app.intake.models import RenderRequest
    from app.intake.read import read

    with app.test_request_context("/animate", method="POST"), pytest.raises(RuntimeError, match="@takes"):
        read(RenderRequest, settings=config.load_settings({}))


# --- headers -------------------------------------------------------------------------------------

def _headers_read_in_code() -> set[str]:
    """Header names the routes and their helpers read, found in their source."""
    headers: set[str] = set()
    for path in ROUTES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get", "getlist") and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str) and _name_of(node.func.value) == "headers"):
                headers.add(node.args[0].value.lower())
            # the headers Werkzeug parses for the routes (request.if_none_match, request.authorization, ...)
            if isinstance(node, ast.Attribute) and _name_of(node.value) == "request" and node.attr in PARSED:
                headers.add(PARSED[node.attr])
    from app.jobs.idempotency import HEADER
    headers.add(HEADER.lower())
    return headers


#: Werkzeug's parsed request headers, by the request's attribute.
PARSED = {"if_match": "if-match", "if_none_match": "if-none-match", "authorization": "authorization",
          "if_modified_since": "if-modified-since", "range": "range"}


def _name_of(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _documented_headers() -> set[str]:
    names = set()
    for item in SPEC["paths"].values():
        for method, op in item.items():
            if method in METHODS:
                names |= {_deref(p)["name"].lower() for p in item.get("parameters", []) + op.get("parameters", [])
                          if _deref(p)["in"] == "header"}
    return names


def test_every_header_the_routes_read_is_documented_and_back():
    headers = _headers_read_in_code()
    documented = _documented_headers()
    # Authorization is the bearer scheme (components.securitySchemes); X-Forwarded-For is believed only from
    # the proxies in front (DOODLEPOD_TRUSTED_PROXIES), not a client's to send; Range of /files is read by
    # werkzeug's send_file
    assert headers - {"authorization", "x-forwarded-for"} == documented - {"range"}


def test_security_scheme_is_bearer_and_public_routes_say_so(app):
    scheme = SPEC["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    from app.http import API_CHILDREN
    api_endpoints = {f"api.{bp.name}" for bp in API_CHILDREN}
    for rule in app.url_map.iter_rules():
        public = not any(rule.endpoint.startswith(prefix + ".") for prefix in api_endpoints)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            op = SPEC["paths"][_flask_path(rule.rule)][method.lower()]
            assert (op.get("security") == []) == public, f"{method} {rule.rule}"


# --- the page ------------------------------------------------------------------------------------

def test_docs_page_is_self_hosted_under_the_studio_policy(client):
    from app.http.studio import CONTENT_SECURITY_POLICY

    page = client.get("/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    html = page.get_data(as_text=True)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the page loads nothing from elsewhere"
    for asset in re.findall(r"""(?:src|href)="(docs/[^"]+)""", html):
        got = client.get("/" + asset)
        assert got.status_code == 200, asset
        assert "http://" not in got.get_data(as_text=True) and "https://" not in got.get_data(as_text=True)
    assert client.get("/static/studio/index.html").status_code == 404  # no second copy without the policy


def test_document_names_no_unknown_schema():
    text = json.dumps(SPEC)
    for ref in set(re.findall(r'"\$ref": "#/([^"]+)"', text)):
        target: Any = SPEC
        for part in ref.split("/"):
            assert part in target, ref
            target = target[part]


def test_the_document_has_no_duplicate_keys():
    """YAML keeps the last of two equal keys silently: two branches adding the same path must not merge
    into one document that quietly lost an operation's answers."""
    class Strict(yaml.SafeLoader):
        pass

    duplicates = []

    def mapping(loader, node, deep=False):
        keys = [loader.construct_object(key, deep=True) for key, _ in node.value]
        duplicates.extend(f"{k} (line {node.start_mark.line + 1})" for k in set(keys) if keys.count(k) > 1)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    yaml.load(reference.SPEC_PATH.read_text(), Loader=Strict)  # noqa: S506 - a SafeLoader subclass
    assert duplicates == []
