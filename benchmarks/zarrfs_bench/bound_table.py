"""The table the cold benchmarks (cold_dd.py, cold_writes.py) print: each case's median MB/s
and CPU seconds, the bound the machine's cores set, and the ratios each benchmark names."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping
from typing import Protocol

from .common import alternated_medians

Row = tuple[str, dict[str, float], dict[str, float]]  # (label, MB/s by case, CPU seconds by case)
Ratio = Callable[[dict[str, float], float], float]  # (a row's MB/s by case, its bound) -> a ratio


class Case(Protocol):
    """A run gives MB/s and keeps the CPU seconds it took in `cpu`."""

    cpu: list[float]

    def __call__(self) -> float: ...


def measured_row(label: str, cases: Mapping[str, Case], repeat: int) -> Row:
    """The row of `cases`, run alternately `repeat` times: their median MB/s and CPU seconds."""
    speeds = alternated_medians(dict[str, Callable[[], float]](cases), repeat)
    cpu = {name: statistics.median(case.cpu) for name, case in cases.items()}
    return label, speeds, cpu


def print_bound_table(first: str, rows: list[Row], nbytes: int,
                      bound_cpu: Callable[[dict[str, float]], float], ratios: Mapping[str, Ratio]) -> None:
    """A Markdown table: a row's label (column `first`), each case's MB/s and CPU seconds, the
    bound (MB/s of `nbytes`) when the CPU seconds `bound_cpu` sums from the row's are spread over
    every core, and `ratios` (column title -> ratio of the row's MB/s and bound)."""
    names = list(rows[0][1])
    cores = len(os.sched_getaffinity(0))
    print(f"| {first} | " + " | ".join(f"{n}: MB/s, CPU s" for n in names)
          + f" | bound on {cores} cores (MB/s)" + "".join(f" | {title}" for title in ratios) + " |")
    print("|---" * (len(names) + 2 + len(ratios)) + "|")
    for label, speeds, cpu in rows:
        bound = nbytes / (bound_cpu(cpu) / cores) / 1e6
        print(f"| {label} | " + " | ".join(f"{speeds[n]:,.0f}, {cpu[n]:.2f}" for n in names)
              + f" | {bound:,.0f}" + "".join(f" | {ratio(speeds, bound):.2f}x" for ratio in ratios.values())
              + " |")
