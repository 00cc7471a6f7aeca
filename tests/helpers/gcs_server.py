"""A gcp-storage-emulator server on 127.0.0.1 (a free port, served by a thread of the test
process), holding one empty bucket, for GCS tests; stopped at the end whatever happens.

The emulator (gcp-storage-emulator 2026.7) stores, lists and serves objects and gives each
upload a new generation (its `time.time_ns()`), but it ignores the generation preconditions
real GCS honours: an upload or a delete with `ifGenerationMatch=G` succeeds whatever the
object's generation, and `ifGenerationMatch=0` replaces an existing object. Its media downloads
carry no `x-goog-generation` header either. A compare-and-swap cannot be tested against that,
so this server adds both, as GCS documents them, and changes nothing else:

* a request with `ifGenerationMatch=G` that would create, replace or delete an object whose
  generation is not G (0: the object exists) fails with 412 Precondition Failed and changes
  nothing. The emulator's HTTP server handles one request at a time, so the check and the
  write it guards are one step, as on GCS;
* a media download carries `x-goog-generation`, the generation of the bytes it serves (unless
  `generation_header=False`: a server without it, which clients must also read correctly).

`test_gcs.py` checks both additions against raw requests, so a test relying on them cannot
pass because they silently stopped working.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from http import server
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import buckets
from gcp_storage_emulator.server import RequestHandler
from gcp_storage_emulator.storage import Storage

BUCKET = "zarrfs-test"
# gcsfs >= 2026.10 asks an endpoint for its bucket type over gRPC, and an emulator never
# answers (60 s per operation); the daemon sets this itself for an endpoint_url, a test
# process that imports gcsfs must set it before it does.
GCS_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
_DOWNLOAD = re.compile(r"^(?:/download)?/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<name>.+)$")


class PreconditionFailed(Exception):
    pass


class ConditionalStorage(Storage):  # type: ignore[misc]
    """The emulator's in-memory storage, refusing a write whose precondition (`required`, set
    for the request being handled) does not hold."""

    def __init__(self) -> None:
        super().__init__(use_memory_fs=True)
        self.required: str | None = None

    def generation_of(self, bucket: str, name: str) -> str:
        """The object's generation; "0" when there is none (GCS's convention)."""
        try:
            return str(self.get_file_obj(bucket, name)["generation"])
        except NotFound:
            return "0"

    def create_file(self, bucket_name: str, file_name: str, *args: Any, **kwargs: Any) -> Any:
        self._require(bucket_name, file_name)
        return super().create_file(bucket_name, file_name, *args, **kwargs)

    def delete_file(self, bucket_name: str, file_name: str) -> Any:
        self._require(bucket_name, file_name)
        return super().delete_file(bucket_name, file_name)

    def _require(self, bucket: str, name: str) -> None:
        if self.required is not None and self.generation_of(bucket, name) != self.required:
            raise PreconditionFailed(f"{bucket}/{name}: generation is not {self.required}")


class ConditionalHandler(RequestHandler):  # type: ignore[misc]
    storage: ConditionalStorage
    generation_header = True
    served_generation: str | None = None

    def do_GET(self) -> None:
        self.served_generation = self._download_generation() if self.generation_header else None
        super().do_GET()

    def do_POST(self) -> None:
        self._with_precondition(super().do_POST)

    def do_PUT(self) -> None:
        self._with_precondition(super().do_PUT)

    def do_DELETE(self) -> None:
        self._with_precondition(super().do_DELETE)

    def end_headers(self) -> None:
        if self.served_generation is not None:
            self.send_header("x-goog-generation", self.served_generation)
        super().end_headers()

    def _query(self) -> dict[str, list[str]]:
        return parse_qs(urlparse(self.path).query)

    def _download_generation(self) -> str | None:
        url = urlparse(self.path)
        match = _DOWNLOAD.match(url.path)
        if match is None or self._query().get("alt") != ["media"]:
            return None
        generation = self.storage.generation_of(unquote(match["bucket"]), unquote(match["name"]))
        return None if generation == "0" else generation

    def _with_precondition(self, handle: Callable[[], None]) -> None:
        wanted = self._query().get("ifGenerationMatch")
        self.storage.required = wanted[0] if wanted else None
        try:
            handle()
        except PreconditionFailed as e:
            body = json.dumps({"error": {"code": 412, "message": f"Precondition Failed: {e}",
                                         "errors": [{"reason": "conditionNotMet"}]}}).encode()
            self.send_response(412, "Precondition Failed")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            self.storage.required = None


@dataclass
class GCSServer:
    """A running emulator with one empty bucket."""

    generation_header: bool = True
    bucket: str = BUCKET
    storage: ConditionalStorage = field(default_factory=ConditionalStorage)
    _httpd: server.HTTPServer | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> None:
        buckets.create_bucket(self.bucket, self.storage)
        handler = type("Handler", (ConditionalHandler,), {"generation_header": self.generation_header})
        self._httpd = server.HTTPServer(("127.0.0.1", 0), partial(handler, self.storage))
        threading.Thread(target=self._httpd.serve_forever, daemon=True, name="gcs-emulator").start()

    def stop(self) -> None:
        if self._httpd is not None:
            httpd, self._httpd = self._httpd, None
            httpd.shutdown()
            httpd.server_close()

    def gcsfs_options(self, **extra: object) -> dict[str, object]:
        """storage_options for gcsfs: this endpoint, anonymous, no instance cache."""
        return {"endpoint_url": self.endpoint_url, "token": "anon", "skip_instance_cache": True,
                "use_listings_cache": False, **extra}


@contextlib.contextmanager
def running(generation_header: bool = True) -> Iterator[GCSServer]:
    """A fresh server (its state is its own, in memory); stopped at the end."""
    # The emulator logs every exception out of a handler as an error, a 412 of ours included;
    # a real failure still shows, as the HTTP server's traceback.
    logging.getLogger("gcp_storage_emulator.server").setLevel(logging.CRITICAL)
    started = GCSServer(generation_header=generation_header)
    started.start()
    try:
        yield started
    finally:
        started.stop()
