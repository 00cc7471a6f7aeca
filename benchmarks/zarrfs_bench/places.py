"""Where a benchmark's array lies: a local directory, or a bucket of the moto S3 server (in a
child process) reached through the proxy that adds DELAY each way (a 20 ms round trip), with
what each reader needs to reach it (zarrfs's mount options, fsspec's, TensorStore's kvstore)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .latency import proxy_child
from .s3 import BUCKET, environ, s3_server, s3_server_module

DELAY = 0.01  # (the proxy's, each way)


@dataclass(frozen=True)
class Where:
    """An array: a local directory, or an s3://BUCKET/name URL reached through `endpoint`."""

    url: str
    endpoint: str | None = None

    def mount_options(self, *more: str) -> str:
        return ",".join(("ro", *(() if self.endpoint is None else (f"endpoint_url={self.endpoint}",)), *more))

    def storage_options(self) -> dict[str, str] | None:
        """fsspec's options (zarr-python's `storage_options`); None for a local directory."""
        if self.endpoint is None:
            return None
        env = s3_server_module().S3_ENV
        return {"endpoint_url": self.endpoint, "key": env["AWS_ACCESS_KEY_ID"],
                "secret": env["AWS_SECRET_ACCESS_KEY"]}

    def kvstore(self) -> dict[str, object]:
        if self.endpoint is None:
            return {"driver": "file", "path": self.url}
        return {"driver": "s3", "bucket": BUCKET, "path": self.url.removeprefix(f"s3://{BUCKET}/") + "/",
                "endpoint": self.endpoint, "aws_region": "us-east-1",
                "aws_credentials": {"type": "environment"}}


@contextlib.contextmanager
def on_s3(stores: list[Path], log: Path) -> Iterator[list[Where]]:
    """The `stores` put in a moto server's bucket, reached through the delaying proxy (the
    server's credentials in the environment meanwhile, for TensorStore)."""
    import fsspec

    with environ(s3_server_module().S3_ENV), open(log, "ab") as logfile, s3_server(logfile) as endpoint:
        options = s3_server_module().S3Server(0, bucket=BUCKET).s3fs_options()
        options["client_kwargs"]["endpoint_url"] = endpoint
        fs = fsspec.filesystem("s3", **options)
        for store in stores:
            fs.put(str(store), f"{BUCKET}/{store.name}", recursive=True)
        port = int(endpoint.rsplit(":", 1)[1])
        with proxy_child(port, DELAY, logfile) as proxy:
            yield [Where(f"s3://{BUCKET}/{store.name}", proxy.url) for store in stores]
