"""Remote stores through fsspec: S3 reads that return the object's ETag with its bytes (as
presigned GETs where they can: zarrfs.store.objects.presigned), and
S3's conditional writes (If-Match / If-None-Match), which make a write-back a
compare-and-swap. Other filesystems have neither: their generation comes from `info`.

Only public interfaces: s3fs's `call_s3` (botocore's operations with s3fs's credentials,
retries and error translation; fsspec's `sync` takes `timeout=` and cancels the request on
s3fs's loop when it is up), and, inside a batch of GETs already on that loop, the botocore
client s3fs hands out (`get_s3`) with s3fs's `translate_boto_error`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import fsspec

from ...errors import ConflictError
from ..deadline import call, each_answered, on_loop
from ..ranges import RangePastEnd
from ..values import Buffer, Versioned, info_generation
from . import obstore_gets, presigned

_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}


def is_s3(fs: fsspec.AbstractFileSystem) -> bool:
    return hasattr(fs, "call_s3") and "s3" in fs.protocol


def find(fs: Any, seconds: float | None, path: str, prefix: str = "") -> dict[str, dict[str, Any]]:
    """Every object below `path` whose name there starts with `prefix`, as fsspec's
    `find(path, prefix=prefix, detail=True)` describes it, as stored now (no cached listing),
    within `seconds`: on S3 through obstore where it can (a listing of 512 objects from moto:
    80 -> 54 ms, see `obstore_gets.listed`; it lists by path, not by a name's prefix)."""
    if prefix:
        fs.invalidate_cache(path)
        return dict(call(fs, seconds, "find", path, prefix=prefix, detail=True))
    started = time.monotonic()
    if is_s3(fs) and obstore_gets.usable(fs):
        bucket, key, _ = fs.split_path(path)
        found = on_loop(fs, seconds, obstore_gets.listed, fs, bucket, key)
        if found is not None:
            return dict(found)
    fs.invalidate_cache(path)
    return dict(call(fs, _left(seconds, started), "find", path, detail=True))


def prepare(fs: Any, seconds: float | None, path: str) -> None:
    """Make the clients the reads of the store at `path` use, before its first read."""
    if is_s3(fs) and obstore_gets.usable(fs):
        on_loop(fs, seconds, obstore_gets.prepare, fs, fs.split_path(path)[0])


def _left(seconds: float | None, started: float) -> float | None:
    """What is left of `seconds` given at `started` (a first way that did not answer)."""
    return None if seconds is None else max(seconds - (time.monotonic() - started), 0.01)


def s3_read(fs: Any, seconds: float | None, path: str, start: int | None = None,
            length: int | None = None) -> Versioned:
    """One GET: the bytes and the ETag of the version they came from, within `seconds`: in
    this thread where obstore can (`obstore_gets.get_now`), else on fsspec's loop."""
    if length is None or length > 0:
        started = time.monotonic()
        bucket, key, _ = fs.split_path(path)
        found = obstore_gets.get_now(fs, bucket, key, start, length, seconds)
        if found is not None:
            return Versioned(*found)
        seconds = _left(seconds, started)
    return s3_read_ranges(fs, seconds, path, [(start, length)], lambda: None)[0]


def s3_read_ranges(fs: Any, seconds: float | None, path: str,
                   ranges: Sequence[tuple[int | None, int | None]],
                   on_answer: Callable[[], None]) -> list[Versioned]:
    """A GET for each (start, length) of one object (None, None: all of it), all in flight
    at once on fsspec's loop (the caller waits once, not a thread a range), failed when none
    answers within `seconds` (`each_answered`): the bytes and the ETag of the version each
    came from."""
    bucket, key, _ = fs.split_path(path)

    async def get_all() -> list[tuple[Buffer, str] | BaseException | None]:
        gets = [_get(fs, bucket, key, start, length) for start, length in ranges]
        return await each_answered(gets, seconds, on_answer)

    found = on_loop(fs, None, get_all)
    read = []
    for (_, length), answer in zip(ranges, found, strict=True):
        if isinstance(answer, BaseException):
            past_end = isinstance(answer, RangePastEnd) or _error_code(answer) == "InvalidRange"
            if not isinstance(answer, OSError) or not past_end:
                raise answer
            answer = None  # nothing there
        if answer is None or (length is not None and length <= 0):
            read.append(Versioned(b"", s3_generation(fs, seconds, path)))
        else:
            read.append(Versioned(*answer))
    return read


def s3_read_objects(fs: Any, seconds: float | None, paths: Sequence[str],
                    on_answer: Callable[[], None]) -> list[Versioned | None]:
    """Whole objects (None: not stored), all in flight at once on fsspec's loop (the caller
    waits once, not once a GET), failed when none answers within `seconds`."""

    async def get_all() -> list[tuple[Buffer, str] | BaseException | None]:
        located = [fs.split_path(path) for path in paths]
        gets = [_get(fs, bucket, key, None, None) for bucket, key, _ in located]
        return await each_answered(gets, seconds, on_answer)

    read: list[Versioned | None] = []
    for answer in on_loop(fs, None, get_all):
        if isinstance(answer, FileNotFoundError) or answer is None:  # (None: only empty ranges)
            read.append(None)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            read.append(Versioned(*answer))
    return read


async def _get(fs: Any, bucket: str, key: str, start: int | None,
               length: int | None) -> tuple[Buffer, str] | None:
    """The bytes and ETag of one GET (None: an empty range)."""
    extra: dict[str, str] = {}
    if start is not None and length is not None:
        if length <= 0:
            return None
        extra["Range"] = f"bytes={start}-{start + length - 1}"
    if obstore_gets.usable(fs):
        fast = await obstore_gets.get(fs, bucket, key, start, length)
        if fast is not None:
            return fast
    if presigned.usable(fs):
        found = await presigned.get(fs, bucket, key, extra)
        if found is not None:
            return found
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    await fs.set_session()
    client = await fs.get_s3(bucket)
    try:
        response = await client.get_object(Bucket=bucket, Key=key, **extra, **fs.req_kw)
    except ClientError as e:  # (as s3fs's own calls raise it: FileNotFoundError, ...)
        raise translate_boto_error(e) from e
    async with response["Body"] as body:
        return await body.read(), str(response["ETag"])


def s3_generation(fs: Any, seconds: float | None, path: str) -> str | None:
    try:
        return info_generation(call(fs, seconds, "info", path))
    except FileNotFoundError:
        return None


def s3_put(fs: Any, seconds: float | None, path: str, data: bytes, expect: str | None) -> str:
    """Store `data` only if the object is still generation `expect` (None: absent)."""
    bucket, key, _ = fs.split_path(path)
    condition = {"IfNoneMatch": "*"} if expect is None else {"IfMatch": expect}
    try:
        response = fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition,
                              **fs.req_kw, timeout=seconds)
    except FileNotFoundError:
        raise ConflictError(key) from None  # If-Match on an object deleted meanwhile
    except (OSError, ValueError) as e:
        if _error_code(e) in _CONFLICT_CODES:
            raise ConflictError(key) from None
        raise
    fs.invalidate_cache(path)
    return str(response["ETag"])


def s3_delete(fs: Any, seconds: float | None, path: str, expect: str | None) -> None:
    bucket, key, _ = fs.split_path(path)
    if expect is None:
        if s3_generation(fs, seconds, path) is not None:
            raise ConflictError(key)
        return
    try:
        fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=expect, **fs.req_kw,
                   timeout=seconds)
    except FileNotFoundError:
        raise ConflictError(key) from None
    except (OSError, ValueError) as e:
        if _error_code(e) in _CONFLICT_CODES:
            raise ConflictError(key) from None
        raise
    fs.invalidate_cache(path)


def _error_code(error: BaseException) -> str | None:
    """The S3 error code behind an exception s3fs translated (it keeps the original as the
    cause)."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            return str(code) if code else None
        seen = seen.__cause__ or seen.__context__
    return None
