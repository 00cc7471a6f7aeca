"""Azure Blob Storage (adlfs: `az://`, `abfs://`) as a compare-and-swap store, as S3 is in
`remote` and GCS in `gcs`: a read returns the blob's ETag with its bytes, and a put or a
delete carries an ETag condition (If-Match; If-None-Match: * when the blob must not exist),
so that a write-back that finds the blob replaced fails with ConflictError instead of losing
the other writer's update.

Requests go through the Azure SDK's asynchronous blob client that adlfs holds
(`service_client`: its credentials, endpoint and session), run on adlfs's loop under the
store's deadline (fsspec's `sync` cancels a request when the time is up). The SDK's own
retries are off for these requests (`retry_total=0`): the store retries transient faults
itself, within the deadline, and a retry with backoff inside one attempt would eat it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import fsspec

from ...errors import ConflictError
from ..deadline import each_answered, on_loop, one_line
from ..ranges import RangePastEnd
from ..values import Versioned

T = TypeVar("T")
PROTOCOLS = {"az", "abfs", "abfss"}
# Each request: one attempt (the store retries within its deadline).
_ONE_ATTEMPT = {"retry_total": 0}


def is_azure(fs: fsspec.AbstractFileSystem) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & PROTOCOLS) and hasattr(fs, "service_client")


def quoted(etag: str) -> str:
    """An ETag as Azure sends it, in quotes (adlfs's listings and the SDK agree on this form;
    a generation given without them still matches)."""
    return '"' + etag.strip('"') + '"'


def azure_read(fs: Any, seconds: float | None, path: str, start: int | None = None,
               length: int | None = None) -> Versioned:
    """One GET: the bytes and the ETag of the version they came from."""
    if length is not None and length <= 0:
        return Versioned(b"", azure_generation(fs, seconds, path))
    found = on_loop(fs, seconds, _download, fs, seconds, path, start, length)
    if found is None:  # the range starts past the end: nothing there
        return Versioned(b"", azure_generation(fs, seconds, path))
    return found  # type: ignore[no-any-return]


def azure_read_objects(fs: Any, seconds: float | None, paths: Sequence[str],
                       on_answer: Callable[[], None]) -> list[Versioned | None]:
    """Whole blobs (None: not stored), all in flight at once on adlfs's loop (the caller waits
    once, not once a GET), failed when none answers within `seconds` (`each_answered`)."""

    async def download_all() -> list[Versioned | BaseException | None]:
        downloads = [_download(fs, seconds, path, None, None) for path in paths]
        return await each_answered(downloads, seconds, on_answer)

    read: list[Versioned | None] = []
    for answer in on_loop(fs, None, download_all):
        if isinstance(answer, FileNotFoundError):
            read.append(None)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            read.append(answer)
    return read


async def _download(fs: Any, seconds: float | None, path: str, start: int | None,
                    length: int | None) -> Versioned | None:
    """The bytes and ETag of one GET (None: the range starts past the end)."""
    blob = _blob(fs, path)
    try:
        stream = await _request(path, blob.download_blob(offset=start, length=length, max_concurrency=1,
                                                         **_timeouts(seconds)))
    except RangePastEnd:
        return None
    return Versioned(await _request(path, stream.readall()), quoted(stream.properties.etag))


def azure_generation(fs: Any, seconds: float | None, path: str) -> str | None:
    """The blob's ETag now (None: no blob)."""

    async def properties() -> str | None:
        try:
            found = await _request(path, _blob(fs, path).get_blob_properties(**_timeouts(seconds)))
        except FileNotFoundError:
            return None
        return quoted(found.etag)

    return on_loop(fs, seconds, properties)  # type: ignore[no-any-return]


def azure_put(fs: Any, seconds: float | None, path: str, data: bytes, expect: str | None) -> str:
    """Store `data` only if the blob is still ETag `expect` (None: absent); the new ETag."""
    from azure.core import MatchConditions

    if expect is None:
        condition: dict[str, Any] = {"match_condition": MatchConditions.IfMissing}
    else:
        condition = {"etag": quoted(expect), "match_condition": MatchConditions.IfNotModified}

    async def upload() -> str:
        stored = await _request(path, _blob(fs, path).upload_blob(
            data, overwrite=True, max_concurrency=1, **condition, **_timeouts(seconds)))
        return quoted(stored["etag"])

    etag: str = on_loop(fs, seconds, upload)
    fs.invalidate_cache(path)
    return etag


def azure_delete(fs: Any, seconds: float | None, path: str, expect: str | None) -> None:
    """Delete the blob only if it is still ETag `expect` (None: it must be absent)."""
    from azure.core import MatchConditions

    if expect is None:
        if azure_generation(fs, seconds, path) is not None:
            raise ConflictError(path)
        return

    async def delete() -> None:
        try:
            await _request(path, _blob(fs, path).delete_blob(
                etag=quoted(expect), match_condition=MatchConditions.IfNotModified, **_timeouts(seconds)))
        except FileNotFoundError:  # deleted meanwhile
            raise ConflictError(path) from None

    on_loop(fs, seconds, delete)
    fs.invalidate_cache(path)


def _blob(fs: Any, path: str) -> Any:
    container, key, _ = fs.split_path(path)
    return fs.service_client.get_blob_client(container, key)


def _timeouts(seconds: float | None) -> dict[str, Any]:
    if seconds is None:
        return dict(_ONE_ATTEMPT)
    return {**_ONE_ATTEMPT, "connection_timeout": seconds, "read_timeout": seconds}


class AzureAnswer(OSError):
    """An HTTP answer of Azure's that is an error; `status` tells the store whether another
    try may go better (a 5xx) or not (a 4xx: `deadline.definite`)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _request(path: str, request: Awaitable[T]) -> T:
    """`request` awaited, the SDK's errors as the store classifies them: a missing blob or
    container is FileNotFoundError, a condition that does not hold ConflictError, 401 and 403
    PermissionError (not retried), an unsatisfiable range `RangePastEnd`, anything
    else AzureAnswer (a failed connection or a 5xx retried while the deadline allows, another
    4xx not: `deadline.definite`)."""
    from azure.core import exceptions

    try:
        return await request
    except exceptions.ResourceNotFoundError:
        raise FileNotFoundError(path) from None
    except (exceptions.ResourceModifiedError, exceptions.ResourceExistsError):
        raise ConflictError(path) from None
    except exceptions.AzureError as e:
        status = getattr(e, "status_code", None)
        message = "Azure: " + (one_line(e).split(" RequestId:")[0] or type(e).__name__)
        if status == 416:
            raise RangePastEnd from None
        if isinstance(e, exceptions.ClientAuthenticationError) or status in (401, 403):
            raise PermissionError(message) from None
        raise AzureAnswer(status, message) from e  # (the cause: a refused connection, ...)
