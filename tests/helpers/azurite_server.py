"""An Azurite blob server (the Azure Storage emulator, an npm package) on 127.0.0.1, on a free
port, storing in a temporary directory, with one empty container, for Azure tests; stopped at
the end whatever happens.

`scripts/install` installs Azurite with npm into `~/.cache/zarrfs/azurite` (or
`$ZARRFS_AZURITE_DIR`); an `azurite-blob` on PATH serves too. Azurite honours the ETag
conditions of Put Blob and Delete Blob (If-Match, If-None-Match) as Azure does, and knows the
development account `devstoreaccount1` and its published key (not a secret: every Azurite has
it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.s3_server import free_port

CONTAINER = "zarrfs-test"
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
STARTUP_SECONDS = 30.0  # a bound on Azurite's start (node loads in about a second)


def azurite_command() -> str | None:
    """Where `azurite-blob` is (None: not installed)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    directory = Path(os.environ.get("ZARRFS_AZURITE_DIR") or Path(cache) / "zarrfs" / "azurite")
    installed = directory / "node_modules" / ".bin" / "azurite-blob"
    return str(installed) if installed.exists() else shutil.which("azurite-blob")


@dataclass
class AzuriteServer:
    """A running Azurite blob service with one empty container."""

    command: str
    container: str = CONTAINER
    port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = None
    _location: str | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint={self.endpoint_url};")

    @property
    def account_env(self) -> dict[str, str]:
        """Credentials as an account name and key in the environment (no connection string)."""
        return {"AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": KEY}

    def adlfs_options(self, **extra: object) -> dict[str, object]:
        """storage_options for adlfs: this server by connection string, no listings cache."""
        return {"connection_string": self.connection_string, "use_listings_cache": False, **extra}

    def start(self) -> None:
        self._location = tempfile.mkdtemp(prefix="azurite-")
        with open(Path(self._location) / "stderr", "wb") as errors:
            self._process = subprocess.Popen(
                [self.command, "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                 "--location", self._location, "--silent", "--disableTelemetry",
                 "--skipApiVersionCheck", "--loose"],
                stdout=subprocess.DEVNULL, stderr=errors)
        self._wait_listening()
        self.service().create_container(self.container)

    def service(self) -> object:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def stop(self) -> None:
        if self._process is not None:
            process, self._process = self._process, None
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._location is not None:
            shutil.rmtree(self._location, ignore_errors=True)
            self._location = None

    def _wait_listening(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                assert self._location is not None
                error = (Path(self._location) / "stderr").read_text(errors="replace")
                raise RuntimeError(f"azurite-blob exited ({self._process.returncode}): {error}")
            with (contextlib.suppress(OSError),
                  socket.create_connection(("127.0.0.1", self.port), timeout=0.5)):
                return
            time.sleep(0.05)
        raise RuntimeError(f"azurite-blob did not listen on port {self.port}")


@contextlib.contextmanager
def running() -> Iterator[AzuriteServer]:
    """A fresh Azurite (its state in a temporary directory of its own); stopped at the end."""
    import pytest

    command = azurite_command()
    if command is None:
        pytest.skip("Azurite is not installed (scripts/install installs it with npm)")
    server = AzuriteServer(command)
    try:
        server.start()
        yield server
    finally:
        server.stop()
