"""A moto S3 server behind a slow proxy (`tests/helpers/netproxy.py`), both in a child process.

A test that times the store's silence against a mount's `timeout` must not time its own
process: late in a whole suite's run pytest's process holds 1.6 GB and 70 threads, and a
pause of it (its garbage collector going over that heap) stalls a server and a proxy serving
from its threads, which a daemon rightly takes for a store that does not answer.

    python -m tests.helpers.slow_s3 DELAY   (the child: serves until stdin closes)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running

REPO = Path(__file__).resolve().parents[2]
START_SECONDS = 60


@dataclass(frozen=True)
class SlowS3:
    server: str  # the server's own endpoint (to fill the bucket at full speed)
    proxy: str  # the same server through the proxy's delay
    bucket: str

    def s3fs_options(self) -> dict[str, object]:
        """storage_options for s3fs at the server's own endpoint (full speed)."""
        return {"key": S3_ENV["AWS_ACCESS_KEY_ID"], "secret": S3_ENV["AWS_SECRET_ACCESS_KEY"],
                "client_kwargs": {"endpoint_url": self.server, "region_name": "us-east-1"}}

    def uploading_options(self) -> dict[str, object]:
        """storage_options for s3fs putting a test's data in place (as `S3Server`'s): the
        full-speed endpoint, with botocore's own patient timeouts and retries."""
        return self.s3fs_options()


@contextlib.contextmanager
def slow_s3(delay: float) -> Iterator[SlowS3]:
    """A fresh server with an empty bucket, and the proxy delaying each piece of data `delay`
    seconds each way; stopped at the end whatever happens."""
    child = subprocess.Popen([sys.executable, "-m", "tests.helpers.slow_s3", f"{delay:g}"],
                             cwd=REPO, env={**os.environ, **S3_ENV}, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    try:
        if not select.select([child.stdout], [], [], START_SECONDS)[0]:
            raise RuntimeError(f"the S3 server did not start in {START_SECONDS} s")
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"the S3 server exited with {child.wait()}")
        yield SlowS3(**json.loads(line))
    finally:
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def serve(delay: float) -> None:
    """The child: serve until stdin closes."""
    server = S3Server(free_port())
    with running(server), proxied(server.port, delay=delay) as proxy:
        print(json.dumps({"server": server.endpoint_url, "proxy": proxy.url, "bucket": server.bucket}),
              flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    serve(float(sys.argv[1]))
