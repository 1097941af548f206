"""Where finished animations go: a local folder served by the app, or S3 (boto3).

Both backends make an object visible only once it is complete: the local one writes a temporary
file in the target folder and renames it into place (atomic on POSIX); the S3 one sends each file
with a single ``put_object`` call, which S3 applies all or nothing. Keys look like
``<prefix><id>/<motion>.<ext>``, the id random and made by the server (never the client's
X-Request-ID), so no request can overwrite or guess another's files.
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from animator.files import PARTIAL_PREFIX, write_atomic

from ..deadline import Deadline
from ..errors import StorageFailed
from ..loop import off_loop
from ..shares import freed, stored
from .budget import StorageBudget

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

    def __init__(self, root: str | Path, public_url: str = "", budget_mb: float = 0) -> None:
        self.root = Path(root).resolve()
        self.public_url = public_url.rstrip("/")
        self.root.mkdir(parents=True, exist_ok=True)
        self.budget = StorageBudget(self.root, budget_mb)

    def put(self, key: str, data: bytes, content_type: str, deadline: Deadline) -> None:
        deadline.check("upload")
        target = self.root / _safe_key(key)
        stored(len(data))  # the client's storage share (app/shares.py)
        # write + fsync can take tens of ms on a busy disk: off the gevent loop, in a native thread
        # (plain file I/O, no monkey-patched locks involved)
        off_loop(self._write, key, target, data)

    def _write(self, key: str, target: Path, data: bytes) -> None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data, durable=True)
            self.budget.wrote(len(data))
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
        if any(p.startswith((PARTIAL_PREFIX, ".")) for p in key.split("/")):  # partial files, lock files
            return None
        path = (self.root / key).resolve()
        if self.root not in path.parents or not path.is_file():
            return None
        return path

    def check(self, timeout_s: float) -> dict[str, Any]:
        ok = os.access(self.root, os.W_OK)
        return {"ok": ok, "backend": "local", "detail": str(self.root) if ok else f"{self.root} not writable"}

    # -- reads, conditional writes and deletes (the characters API's documents and folders) ------
    def get(self, key: str, deadline: Deadline) -> bytes | None:
        """The object's bytes, or None if there is none."""
        deadline.check("storage read")
        path = self.path_of(key)
        if path is None:
            return None
        try:
            return off_loop(path.read_bytes)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageFailed(f"cannot read {key} from local storage: {exc.strerror or exc}") from None

    def get_tagged(self, key: str, deadline: Deadline) -> tuple[bytes, str] | None:
        """The object's bytes and a tag that changes whenever it is replaced (for :meth:`put_if`)."""
        data = self.get(key, deadline)
        return None if data is None else (data, _tag(data))

    def put_if(self, key: str, data: bytes, content_type: str, deadline: Deadline, tag: str | None) -> None:
        """Write ``key`` only if it is unchanged since it was read with ``tag`` (``None``: only if it
        does not exist yet); else raise :class:`Conflict`. Writers of one key take turns on a lock
        file beside it (readers never wait: the file is swapped with a rename)."""
        deadline.check("upload")
        target = self.root / _safe_key(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = target.parent / f".lock-{target.name}"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    deadline.check("upload")
                    _sleep(0.002)
            try:
                current = target.read_bytes()
            except FileNotFoundError:
                current = None
            if (tag is None) != (current is None) or (current is not None and _tag(current) != tag):
                raise Conflict(key)
            stored(len(data) - len(current or b""))
            off_loop(self._write, key, target, data)
        finally:
            os.close(fd)

    def exists(self, key: str, deadline: Deadline) -> bool:
        deadline.check("storage read")
        return self.path_of(key) is not None

    def delete(self, key: str, deadline: Deadline) -> None:
        """Delete one object (nothing if there is none)."""
        deadline.check("storage delete")
        off_loop(lambda: (self.root / _safe_key(key)).unlink(missing_ok=True))

    def delete_prefix(self, prefix: str, deadline: Deadline) -> int:
        """Delete every object under the folder ``prefix`` (ending in ``/``); returns how many."""
        deadline.check("storage delete")
        folder = self.root / _safe_key(prefix.rstrip("/"))
        if not folder.is_dir():
            return 0
        files = [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")]
        size = 0
        for p in files:
            try:
                size += p.stat().st_size
            except FileNotFoundError:
                pass
        off_loop(shutil.rmtree, folder, True)
        freed(size)  # given back to the client's storage share
        return len(files)

    def list_folders(self, prefix: str, deadline: Deadline) -> list[str]:
        """Names of the folders directly under ``prefix`` (ending in ``/``)."""
        deadline.check("storage list")
        folder = self.root / _safe_key(prefix.rstrip("/"))
        try:
            return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        except FileNotFoundError:
            return []


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
        stored(len(data))
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

    # -- reads, conditional writes and deletes (the characters API's documents and folders) ------
    def _call(self, deadline: Deadline, stage: str, what: str, fn, **kwargs):
        import gevent
        from botocore.exceptions import BotoCoreError, ClientError

        left = deadline.check(stage)
        try:
            with gevent.Timeout(left, deadline.exceeded(stage)):
                return fn(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", "?"))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                raise _Missing() from None
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                raise Conflict(what) from None
            raise StorageFailed(f"S3 refused {what}: {code} {err.get('Message', '')}".strip()) from None
        except BotoCoreError as exc:
            raise StorageFailed(f"S3 {stage} of {what} failed: {exc}") from None

    def get_tagged(self, key: str, deadline: Deadline) -> tuple[bytes, str] | None:
        """The object's bytes and its ETag (for :meth:`put_if`), or None if there is none."""
        import gevent

        try:
            resp = self._call(deadline, "storage read", key, self.client.get_object, Key=self.key(key))
            with gevent.Timeout(deadline.check("storage read"), deadline.exceeded("storage read")):
                data = resp["Body"].read()
        except _Missing:
            return None
        return data, resp["ETag"]

    def get(self, key: str, deadline: Deadline) -> bytes | None:
        got = self.get_tagged(key, deadline)
        return None if got is None else got[0]

    def put_if(self, key: str, data: bytes, content_type: str, deadline: Deadline, tag: str | None) -> None:
        """Write ``key`` only if its ETag is still ``tag`` (``None``: only if it does not exist yet),
        with S3's conditional writes; else raise :class:`Conflict`."""
        condition = {"IfNoneMatch": "*"} if tag is None else {"IfMatch": tag}
        stored(len(data))
        try:
            self._call(deadline, "upload", key, self.client.put_object, Key=self.key(key), Body=data,
                       ContentType=content_type, **condition)
        except _Missing:  # If-Match on a key deleted meanwhile
            raise Conflict(key) from None

    def exists(self, key: str, deadline: Deadline) -> bool:
        try:
            self._call(deadline, "storage read", key, self.client.head_object, Key=self.key(key))
        except _Missing:
            return False
        return True

    def delete(self, key: str, deadline: Deadline) -> None:
        """Delete one object (nothing if there is none)."""
        self._call(deadline, "storage delete", key, self.client.delete_object, Key=self.key(key))

    def delete_prefix(self, prefix: str, deadline: Deadline) -> int:
        """Delete every object under the folder ``prefix`` (ending in ``/``); returns how many."""
        full = self.key(prefix.rstrip("/")) + "/"
        count = 0
        while True:
            page = self._call(deadline, "storage delete", prefix, self.client.list_objects_v2, Prefix=full,
                              MaxKeys=1000)
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if not keys:
                return count
            freed(sum(int(o.get("Size") or 0) for o in page.get("Contents", [])))
            resp = self._call(deadline, "storage delete", prefix, self.client.delete_objects,
                              Delete={"Objects": keys, "Quiet": True})
            if resp.get("Errors"):  # else the same keys would be listed (and refused) for ever
                err = resp["Errors"][0]
                raise StorageFailed(f"S3 refused to delete {err.get('Key', prefix)}: {err.get('Code', '?')}")
            count += len(keys)

    def list_folders(self, prefix: str, deadline: Deadline) -> list[str]:
        """Names of the folders directly under ``prefix`` (ending in ``/``)."""
        full = self.key(prefix.rstrip("/")) + "/"
        names: list[str] = []
        token: dict[str, str] = {}
        while True:
            page = self._call(deadline, "storage list", prefix, self.client.list_objects_v2, Prefix=full,
                              Delimiter="/", **token)
            names += [p["Prefix"][len(full):].rstrip("/") for p in page.get("CommonPrefixes", [])]
            if not page.get("IsTruncated"):
                return sorted(names)
            token = {"ContinuationToken": page["NextContinuationToken"]}


class Conflict(Exception):
    """A conditional write lost: the object changed (or appeared, or went) since it was read."""


class _Missing(Exception):
    """S3 answered 404 for the key."""


def _tag(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _sleep(seconds: float) -> None:
    try:
        import gevent
        gevent.sleep(seconds)
    except ImportError:
        import time
        time.sleep(seconds)


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
    return LocalStorage(settings.local_dir, settings.public_url, settings.storage_budget_mb)
