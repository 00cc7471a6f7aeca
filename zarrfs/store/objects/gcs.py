"""Google Cloud Storage (gcsfs) as a compare-and-swap store, as S3 is in `remote`: a read
returns the object's generation with its bytes, and a put or a delete carries a generation
precondition (`ifGenerationMatch`; 0: the object must not exist), so that a write-back that
finds the object replaced fails with ConflictError instead of losing the other writer's update.

Requests go through gcsfs's `call` (its session, credentials, endpoint and retries of 5xx
answers), each under the store's deadline: fsspec's `sync` takes `timeout=` and cancels the
request on gcsfs's loop when it is up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import fsspec

from ...errors import ConflictError
from ..ranges import RangePastEnd
from ..values import Versioned

PROTOCOLS = {"gs", "gcs"}


def is_gcs(fs: fsspec.AbstractFileSystem) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & PROTOCOLS) and hasattr(fs, "call")


def gcs_read(fs: Any, seconds: float | None, path: str, start: int | None = None,
             length: int | None = None) -> Versioned:
    """One media GET: the bytes and the generation they came from (`x-goog-generation`).
    A server that does not send that header (an emulator) is read between two metadata
    reads of the generation: equal, the bytes are that generation's (GCS never reuses one)."""
    if length is not None and length <= 0:
        return Versioned(b"", gcs_generation(fs, seconds, path))
    headers = {} if start is None or length is None else {"Range": f"bytes={start}-{start + length - 1}"}

    def get() -> tuple[bytes, str | None]:
        response_headers, data = _call(fs, seconds, "GET", fs.url(path), headers=headers)
        return bytes(data), response_headers.get("x-goog-generation")

    try:
        data, generation = get()
    except RangePastEnd:  # the range starts past the end: nothing there
        return Versioned(b"", gcs_generation(fs, seconds, path))
    if generation is not None:
        return Versioned(data, generation)
    return _read_between_generations(fs, seconds, path, get)


def _read_between_generations(fs: Any, seconds: float | None, path: str,
                              get: Callable[[], tuple[bytes, str | None]]) -> Versioned:
    before = gcs_generation(fs, seconds, path)
    if before is None:
        raise FileNotFoundError(path)
    data, _ = get()
    if gcs_generation(fs, seconds, path) != before:
        raise OSError(f"{path} was replaced while it was read")  # transient: read again
    return Versioned(data, before)


def gcs_generation(fs: Any, seconds: float | None, path: str) -> str | None:
    """The object's generation now (None: no object). One metadata GET, not `info`, which
    also lists a missing object's "directory"."""
    bucket, key, _ = fs.split_path(path)

    try:
        return str(_call(fs, seconds, "GET", "b/{}/o/{}", bucket, key, json_out=True)["generation"])
    except FileNotFoundError:
        return None


def gcs_put(fs: Any, seconds: float | None, path: str, data: bytes, expect: str | None) -> str:
    """Store `data` only if the object is still generation `expect` (None: absent); the new
    generation."""
    bucket, key, _ = fs.split_path(path)
    upload = fs.base.removesuffix("storage/v1/") + f"upload/storage/v1/b/{quote(bucket, safe='')}/o"

    try:
        stored = _call(fs, seconds, "POST", upload, uploadType="media", name=key,
                       ifGenerationMatch=expect or "0", data=data,
                       headers={"Content-Type": "application/octet-stream"}, json_out=True)
    except FileExistsError:  # gcsfs's name for 412 Precondition Failed
        raise ConflictError(key) from None
    fs.invalidate_cache(path)
    return str(stored["generation"])


def gcs_delete(fs: Any, seconds: float | None, path: str, expect: str | None) -> None:
    """Delete the object only if it is still generation `expect` (None: it must be absent)."""
    bucket, key, _ = fs.split_path(path)
    if expect is None:
        if gcs_generation(fs, seconds, path) is not None:
            raise ConflictError(key)
        return

    try:
        _call(fs, seconds, "DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=expect)
    except (FileExistsError, FileNotFoundError):  # replaced, or deleted, meanwhile
        raise ConflictError(key) from None
    fs.invalidate_cache(path)


def _call(fs: Any, seconds: float | None, *request: Any, **options: Any) -> Any:
    """One request of gcsfs's JSON API (`GCSFileSystem.call`) within `seconds`, its errors as
    the store classifies them: 401 and 403 are PermissionError (not retried), other HTTP
    failures OSError (retried while the deadline allows). gcsfs raises 403 as a bare OSError,
    404 as FileNotFoundError and 412 as FileExistsError."""
    from gcsfs.retry import HttpError

    try:
        result = fs.call(*request, timeout=seconds, **options)
    except HttpError as e:
        if e.code == 416:
            raise RangePastEnd from None
        if e.code in (401, 403):
            raise PermissionError(f"GCS: {e.message}") from None
        raise OSError(f"GCS: {e.message}") from None
    except OSError as e:
        if type(e) is OSError and str(e).startswith("Forbidden"):
            raise PermissionError(" ".join(str(e).split())) from None
        raise
    return result
