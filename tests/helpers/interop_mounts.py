"""What the interop matrix through a real mount (tests/interop/test_mount_matrix_*.py) shares:
the fork server whose daemons start in milliseconds (tests/interop/conftest.py's
`zarrfs_command`), and the expected contents of `data` and `chunks/`.

File layout (little-endian, C order): bool is one byte 0/1, int4 one sign-extended byte,
bfloat16 its raw 2 bytes; these are exactly `interop_values.bits` of what TensorStore reads
on a little-endian host.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from tests.helpers.interop_model import Case
from tests.helpers.interop_values import bits
from tests.helpers.mounting import Mount


def seed(case: Case) -> int:
    return zlib.crc32(case.id.encode())


# -- starting daemons cheaply ------------------------------------------------------------------

# A fork server: imports what `zarrfs mount` imports, once, then forks one daemon per request
# and runs `zarrfs.cli.main(argv)` in it, with the requester's stdin, stdout and stderr.
# Single-threaded, so forking is safe; exits when its stdin (a pipe from pytest) closes.
SERVER = r"""
import json, os, select, socket, sys, traceback
import zarrfs.cli.command_line, zarrfs.daemon.run

server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(64)
print("ready", flush=True)
waiting = {}
while True:
    readable, _, _ = select.select([server, sys.stdin], [], [], 0.02)
    if sys.stdin in readable and not os.read(0, 1):
        break
    if server in readable:
        connection, _ = server.accept()
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        pid = os.fork()
        if pid == 0:
            for inherited in (server, connection, *waiting.values()):
                inherited.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            status = 1
            try:
                status = zarrfs.cli.main(json.loads(message))
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        for fd in fds:
            os.close(fd)
        connection.sendall(b"%d\n" % pid)
        waiting[pid] = connection
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        connection = waiting.pop(pid)
        connection.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
        connection.close()
"""

# What `mounted` runs instead of the zarrfs script: asks the server for a daemon, forwards
# signals to it and exits with its status, so it stands in for the daemon's process.
CLIENT = r"""
import json, os, signal, socket, sys
connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
connection.connect(sys.argv[1])
socket.send_fds(connection, [json.dumps(sys.argv[2:]).encode()], [0, 1, 2])
replies = connection.makefile("rb")
pid = int(replies.readline())
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, lambda signum, _: os.kill(pid, signum))
status = int(replies.readline() or b"1")
sys.exit(128 - status if status < 0 else status)
"""


# -- expected contents -------------------------------------------------------------------------


def with_overhang(case: Case, data: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """`data` padded to whole chunks of the grid with the fill value (bit for bit)."""
    extended = tuple(-(-s // c) * c for s, c in zip(case.shape, case.chunk_shape, strict=True))
    out = np.empty(extended, dtype=data.dtype)
    out.reshape(-1).view(np.uint8).reshape(-1, data.dtype.itemsize)[:] = bits(fill)
    out[tuple(slice(0, s) for s in case.shape)] = data
    return out


def chunk_slices(case: Case, index: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, case.chunk_shape, strict=True))


def assert_same_bytes(actual: bytes, expected: bytes, what: str) -> None:
    if actual != expected:
        differ = [i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e]
        first = differ[0] if differ else min(len(actual), len(expected))
        raise AssertionError(
            f"{what}: {len(actual)} bytes read, {len(expected)} expected; first difference at "
            f"byte {first}: got {actual[first : first + 8].hex()}, "
            f"expected {expected[first : first + 8].hex()}"
        )


def assert_clean_log(mount: Mount) -> None:
    log = mount.log()
    assert "ERROR" not in log and "Traceback" not in log, log
