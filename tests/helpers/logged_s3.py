"""A moto S3 server that logs every request it answers (method, key, a listing's prefix,
status), for the tests that count a mount's requests (tests/reliability/test_s3_group.py,
test_s3_tiff.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from tests.helpers.s3_server import S3Server


@dataclass(frozen=True)
class Request:
    method: str
    key: str  # the object key ("" for a bucket-level request such as a listing)
    prefix: str | None  # a listing's prefix= parameter
    status: int

    @property
    def subject(self) -> str:
        """The key, or the prefix a listing asks for."""
        return self.key or self.prefix or ""

    @property
    def fetched_data(self) -> bool:
        """A GET of an object that returned (some of) its bytes."""
        return self.method == "GET" and bool(self.key) and 200 <= self.status < 300


@dataclass
class RequestLog:
    """WSGI middleware in front of moto: records the method, key and status of each request."""

    app: Any
    bucket: str
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = unquote(environ.get("PATH_INFO", ""))
        host = environ.get("HTTP_HOST", "")
        if host.startswith(self.bucket + "."):  # virtual-hosted style
            key = path.lstrip("/")
        else:  # path style: /bucket/key
            _, _, key = path.lstrip("/").partition("/")
        query = parse_qs(environ.get("QUERY_STRING", ""))
        prefix = query.get("prefix", [None])[0]

        def start(status: str, headers: Any, exc_info: Any = None) -> Any:
            request = Request(environ["REQUEST_METHOD"], key, prefix, int(status.split()[0]))
            with self.lock:
                self.requests.append(request)
            return start_response(status, headers, exc_info)

        return self.app(environ, start)

    def take(self) -> list[Request]:
        """The requests since the last take()."""
        with self.lock:
            taken, self.requests = self.requests, []
        return taken


class _LoggedMotoServer:
    """moto's S3 app behind RequestLog, served by werkzeug in a thread (as ThreadedMotoServer
    does, with the middleware in between)."""

    def __init__(self, port: int, log: RequestLog) -> None:
        from moto.moto_server.werkzeug_app import MotoRequestHandler
        from werkzeug.serving import make_server

        self._server = make_server("127.0.0.1", port, log, threaded=True,
                                   request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@dataclass
class LoggedS3Server(S3Server):
    log: RequestLog | None = None

    def start(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        assert self._server is None
        self.log = RequestLog(DomainDispatcherApplication(create_backend_app), self.bucket)
        server = _LoggedMotoServer(self.port, self.log)
        server.start()
        self._server = server
        self._wait_listening()
