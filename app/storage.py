"""Where finished animations go: a local folder served by the app, or S3 (boto3).

Both backends make an object visible only once it is complete: the local one writes a temporary
file in the target folder and renames it into place (atomic on POSIX); the S3 one sends each file
with a single ``put_object`` call, which S3 applies all or nothing. Keys look like
``<prefix><id>/<motion>.<ext>``, the id random and made by the server (never the client's
X-Request-ID), so no request can overwrite or guess another's files.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from animator.files import PARTIAL_PREFIX, write_atomic

from .deadline import Deadline
from .errors import StorageFailed
from .loop import off_loop

log = logging.getLogger("doodlepod.storage")


class Storage(Protocol):
    name: str

    def put(self, key: str, data: bytes, content_type: str, deadline: Deadline) -> None: ...

    def url(self, key: str, base_url: str) -> str: ...

    def check(self, timeout_s: float) -> dict[str, Any]: ...


#: Longest storage key accepted (the server makes keys of about 50 characters).
MAX_KEY_LENGTH = 512


def _safe_key(key: str) -> str:
    """``key`` if it is a relative path of plain names (no empty, ``.`` or ``..`` part, no control
    character such as NUL), else ValueError."""
    parts = key.split("/")
    if (not key or len(key) > MAX_KEY_LENGTH or key.startswith("/") or any(p in ("", ".", "..") for p in parts)
            or any(ord(c) < 32 or ord(c) == 127 for c in key)):
        raise ValueError(f"bad storage key {key[:80]!r}")
    return key


class LocalStorage:
    """Files under ``root``, served by the app at ``/files/<key>``."""

    name = "local"

    def __init__(self, root: str | Path, public_url: str = "") -> None:
        self.root = Path(root).resolve()
        self.public_url = public_url.rstrip("/")
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, key: str, data: bytes, content_type: str, deadline: Deadline) -> None:
        deadline.check("upload")
        target = self.root / _safe_key(key)
        # write + fsync can take tens of ms on a busy disk: off the gevent loop, in a native thread
        # (plain file I/O, no monkey-patched locks involved)
        off_loop(self._write, key, target, data)

    def _write(self, key: str, target: Path, data: bytes) -> None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data, durable=True)
        except OSError as exc:
            raise StorageFailed(f"cannot write {key} to local storage: {exc.strerror or exc}") from None

    def url(self, key: str, base_url: str) -> str:
        base = self.public_url or base_url.rstrip("/")
        return f"{base}/files/{quote(key)}"

    def path_of(self, key: str) -> Path | None:
        """The file of ``key`` if it exists (never a partial file, never outside ``root``)."""
        try:
            key = _safe_key(key)
        except ValueError:
            return None
        if any(p.startswith(PARTIAL_PREFIX) for p in key.split("/")):
            return None
        path = (self.root / key).resolve()
        if self.root not in path.parents or not path.is_file():
            return None
        return path

    def check(self, timeout_s: float) -> dict[str, Any]:
        ok = os.access(self.root, os.W_OK)
        return {"ok": ok, "backend": "local", "detail": str(self.root) if ok else f"{self.root} not writable"}


class S3Storage:
    """Objects in ``bucket`` under ``prefix``; URLs presigned for ``expiry_s`` or public."""

    name = "s3"

    def __init__(self, bucket: str, prefix: str = "", *, region: str = "", endpoint_url: str = "",
                 url_mode: str = "presigned", expiry_s: int = 86400, public_base_url: str = "",
                 timeout_s: float = 10.0, attempts: int = 3) -> None:
        import boto3
        from botocore.config import Config

        if not bucket:
            raise ValueError("DOODLEPOD_S3_BUCKET is required when DOODLEPOD_STORAGE=s3")
        self.bucket = bucket
        self.prefix = prefix
        self.url_mode = url_mode
        self.expiry_s = max(1, min(int(expiry_s), 604800))
        self.endpoint_url = endpoint_url.rstrip("/")
        self.public_base_url = public_base_url.rstrip("/")
        config = Config(connect_timeout=timeout_s, read_timeout=timeout_s, signature_version="s3v4",
                        retries={"max_attempts": max(1, attempts), "mode": "standard"},
                        s3={"addressing_style": "path"} if endpoint_url else None,
                        max_pool_connections=32)
        self.client = boto3.session.Session().client(
            "s3", region_name=region or None, endpoint_url=endpoint_url or None, config=config)
        # /ping must not wait for retries: a separate client with one attempt and the ping timeout.
        self._check_config = config.merge(Config(retries={"max_attempts": 1, "mode": "standard"}))
        self._region = region or None

    def key(self, key: str) -> str:
        return f"{self.prefix}{_safe_key(key)}"

    def put(self, key: str, data: bytes, content_type: str, deadline: Deadline) -> None:
        import gevent
        from botocore.exceptions import BotoCoreError, ClientError

        left = deadline.check("upload")
        try:
            with gevent.Timeout(left, deadline.exceeded("upload")):
                self.client.put_object(Bucket=self.bucket, Key=self.key(key), Body=data,
                                       ContentType=content_type)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise StorageFailed(f"S3 refused {key}: {err.get('Code', '?')} {err.get('Message', '')}".strip()) from None
        except BotoCoreError as exc:
            raise StorageFailed(f"S3 upload of {key} failed: {exc}") from None

    def url(self, key: str, base_url: str) -> str:
        full = self.key(key)
        if self.url_mode == "public":
            base = self.public_base_url or (f"{self.endpoint_url}/{self.bucket}" if self.endpoint_url
                                            else f"https://{self.bucket}.s3.amazonaws.com")
            return f"{base}/{quote(full)}"
        return self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": full}, ExpiresIn=self.expiry_s)

    def check(self, timeout_s: float) -> dict[str, Any]:
        import gevent
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            with gevent.Timeout(timeout_s + 0.5, TimeoutError("no answer")):
                client = self._ping_client(timeout_s)
                client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "?")
            return {"ok": False, "backend": "s3", "detail": f"bucket {self.bucket}: {code}"}
        except (BotoCoreError, TimeoutError) as exc:
            return {"ok": False, "backend": "s3", "detail": f"unreachable: {type(exc).__name__}"}
        return {"ok": True, "backend": "s3", "detail": f"bucket {self.bucket} reachable"}

    def _ping_client(self, timeout_s: float):
        client = getattr(self, "_ping", None)
        if client is None:
            import boto3
            from botocore.config import Config
            config = self._check_config.merge(Config(connect_timeout=timeout_s, read_timeout=timeout_s))
            client = boto3.session.Session().client(
                "s3", region_name=self._region, endpoint_url=self.endpoint_url or None, config=config)
            self._ping = client
        return client


def free_disk_mb(path: str | Path) -> float:
    """Free space (MiB) of the filesystem holding ``path`` (its nearest existing ancestor)."""
    p = Path(path).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free / 2**20


def from_settings(settings) -> Storage:
    """Build the storage backend the settings name."""
    if settings.storage == "s3":
        return S3Storage(settings.s3_bucket, settings.s3_prefix, region=settings.s3_region,
                         endpoint_url=settings.s3_endpoint_url, url_mode=settings.s3_url_mode,
                         expiry_s=settings.s3_url_expiry_s, public_base_url=settings.s3_public_base_url,
                         timeout_s=settings.s3_timeout_s, attempts=settings.s3_retries)
    return LocalStorage(settings.local_dir, settings.public_url)
