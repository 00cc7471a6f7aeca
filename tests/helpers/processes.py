"""Processes as /proc shows them, for the tests of a daemon's helper processes (its fork
server and decoding processes: tests/array/decoding/test_decoding_processes.py,
tests/fuse/test_pushed_pages.py, tests/array/writes/test_random_write_memory.py): a process's
children, whether it still runs, and the memory of several together. Linux only."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pss(pids: list[int]) -> int:
    """The proportional set size of these processes together, in bytes (a page shared by
    several counted once in all)."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")) << 10
    return total
