"""A real browser for the tests: headless Chromium (Debian's `chromium`) opening a page of a
small HTTP server of the test's own (`PageServer`, on 127.0.0.1, another origin than the
server tested), which posts what it found back to that server as JSON.

Chromium runs in a process group of its own with a fresh profile, and the whole group is
killed when the block ends, whatever happened."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
NODE_MODULES = CACHE / "zarrfs" / "geotiff" / "node_modules"
# geotiff.js's browser builds (scripts/install's): 3.x, as OpenLayers uses, and 2.x, as Viv does
GEOTIFF = {"3": NODE_MODULES / "geotiff" / "dist-browser" / "geotiff.js",
           "2": NODE_MODULES / "geotiff2" / "dist-browser" / "geotiff.js"}
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


class PageServer(ThreadingHTTPServer):
    """Serves `files` (path -> (content type, bytes)); the first POST to /result is kept."""

    def __init__(self, files: dict[str, tuple[str, bytes]]) -> None:
        super().__init__(("127.0.0.1", 0), PageHandler)
        self.files = files
        self.posted = threading.Event()
        self.result: Any = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class PageHandler(BaseHTTPRequestHandler):
    server: PageServer

    def do_GET(self) -> None:
        content_type, body = self.server.files.get(self.path.partition("?")[0], ("text/plain", b""))
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/result" and not self.server.posted.is_set():
            self.server.result = json.loads(body)
            self.server.posted.set()
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # (quiet)
        pass


@contextlib.contextmanager
def page_server(files: dict[str, tuple[str, bytes]]) -> Iterator[PageServer]:
    server = PageServer(files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def posted_by_chromium(url: str, page: PageServer, log_path: Path, seconds: float = 60.0) -> Any:
    """What the page at `url` posts to `page`, opened in headless Chromium (AssertionError if
    nothing comes within `seconds`)."""
    assert CHROMIUM is not None
    with (tempfile.TemporaryDirectory(prefix="zarrfs-chromium-", ignore_cleanup_errors=True) as profile,
          open(log_path, "wb") as log):
        process = subprocess.Popen([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        try:
            if not page.posted.wait(seconds):
                raise AssertionError(f"the page posted nothing within {seconds:g} s (chromium "
                                     f"{'exited' if process.poll() is not None else 'runs'}):\n"
                                     f"{log_path.read_text(errors='replace')[-4000:]}")
            return page.result
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
