"""Encoding in the decoding processes without FUSE (zarrfs.array.decoding.staging and .encoding):
a fork server forked by a process of one thread (a script: pytest's workers run threads), its
workers encoding chunks of real arrays through staging buffers of shared memory.

A worker's encoding is byte for byte the daemon's (plain chunks and inner chunks of a shard);
staging buffers are used again, not made anew; an encoder that fails in the worker, one whose
encoding outgrows its buffer and one that cannot be pickled are NotEncoded; staging memory at
its budget is NoRoom; a worker killed in the middle of a job fails it with WorkerFailed, and
the next job gets a new worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.fast

SCRIPT = textwrap.dedent('''
    import functools, operator, os, signal, threading, time
    import numpy as np
    from zarrfs.array.decoding import DecodePool, ForkServer, NoRoom, NotEncoded, ProcessEncoder, WorkerFailed

    def slow_copy(data):  # (a worker's copy of this module has it: forked after it is defined)
        open(os.environ["ROOT"] + "/started", "w").close()
        time.sleep(30)
        return data.tobytes()

    def staging_buffers():
        return sum("zarrfs-slab" in os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                   if os.path.exists(f"/proc/self/fd/{fd}"))

    server = ForkServer.start(None)  # (first: zarr-python starts threads)
    assert server is not None
    import zarr
    from zarrfs.array_metadata import open_array
    from zarrfs.store import Store

    root = os.environ["ROOT"]
    rng = np.random.default_rng(5)
    values = (np.cumsum(rng.integers(-3, 4, (512, 512)), axis=1) % 4000).astype("uint16")
    zarr.create_array(f"{root}/plain.zarr", shape=values.shape, chunks=(256, 256), dtype="uint16")
    zarr.create_array(f"{root}/sharded.zarr", shape=values.shape, chunks=(256, 256), shards=(512, 512),
                      dtype="uint16")
    pool = DecodePool(server, 2)
    encoders = ProcessEncoder(pool, budget=8 << 20, spare=2 << 20)
    chunk = values[:256, 256:]  # (not contiguous: copied into the staging buffer as it lies)
    plain = open_array(Store.open(f"{root}/plain.zarr")).pipeline
    sharded = open_array(Store.open(f"{root}/sharded.zarr")).sharding.inner
    for pipeline in (plain, sharded):
        encoded, seconds = encoders.encode(encoders.stable(pipeline.encode), chunk)
        assert bytes(encoded) == bytes(pipeline.encode(np.ascontiguousarray(chunk))) and seconds >= 0
        assert (pipeline.decode(encoded) == chunk).all()
    assert encoders.stable(plain.encode) is encoders.stable(plain.encode)
    made = staging_buffers()
    for _ in range(20):
        encoders.encode(encoders.stable(plain.encode), chunk)
    assert made and staging_buffers() == made, "staging buffers made anew"

    for refused in (operator.methodcaller("no_such_method"), functools.partial(np.tile, reps=64),
                    lambda data: data.tobytes()):
        try:
            encoders.encode(refused, chunk)
            raise SystemExit(f"{refused} encoded")
        except NotEncoded:
            pass
    try:
        ProcessEncoder(pool, budget=1 << 16, spare=0).encode(encoders.stable(plain.encode), chunk)
        raise SystemExit("encoded past the staging budget")
    except NoRoom:
        pass

    def failure(encode):
        try:
            encode()
        except WorkerFailed as e:
            return e
        return None

    failed = []
    first = pool.pids
    job = threading.Thread(target=lambda: failed.append(failure(lambda: encoders.encode(slow_copy, chunk))))
    job.start()
    deadline = time.monotonic() + 20
    while not os.path.exists(root + "/started") and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in first:
        os.kill(pid, signal.SIGKILL)
    job.join(20)
    assert failed and failed[0] is not None, failed
    deadline = time.monotonic() + 10  # (the other killed worker's end heard too)
    while set(pool.pids) & set(first) and time.monotonic() < deadline:
        time.sleep(0.01)
    encoded, _ = encoders.encode(encoders.stable(plain.encode), chunk)
    assert (plain.decode(encoded) == chunk).all() and not set(pool.pids) & set(first)
    encoders.close()
    pool.close()  # (that nothing outlives it: test_decoding_pool)
    print("ok")
''')


def test_workers_encode_refuse_and_fail(tmp_path: object) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                          env={"ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr
