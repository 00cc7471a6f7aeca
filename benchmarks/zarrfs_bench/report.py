"""The markdown report: a summary of the targets, then one table per section. Every cell
that is judged against a target is recorded, and the summary counts those records."""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from .common import WARM_RUNS, fmt_size, fs_type
from .context import Bench


@dataclass
class Check:
    what: str  # which array / mount
    ok: bool
    value: float  # what is compared (a ratio, bytes, seconds)
    text: str  # the value as printed


class Report:
    def __init__(self, b: Bench, targets: Sequence[Any], sections: Sequence[Callable[[Report], None]],
                 plot: Path | None = None) -> None:
        """`targets` (the summary's rows) and `sections` (each adds its table): `tables`'."""
        self.b, self.a, self.res = b, b.args, b.res
        self.targets, self.sections = targets, sections
        self.plot = plot
        self.checks: dict[str, list[Check]] = {}
        self.lines: list[str] = []

    # -- cells ------------------------------------------------------------------------------

    def judge(self, key: str, what: str, ok: bool, value: float, text: str) -> str:
        self.checks.setdefault(key, []).append(Check(what, ok, value, text))
        return "ok" if ok else "MISS"

    def cell(
        self,
        v: float | None,
        ref: float | None = None,
        target: float | None = None,
        key: str = "",
        what: str = "",
    ) -> str:
        """`v` (0 decimals), with its ratio to `ref` judged against `target` (as `key`)."""
        if v is None:
            return "n/a"
        s = f"{v:,.0f}"
        if ref:
            r = v / ref
            s += f" ({r:.2f}x"
            if target is not None:
                s += ", " + self.judge(key, what, r >= target, r, f"{r:.2f}x")
            s += ")"
        return s

    def cell_abs(self, v: float | None, ref: float | None, target: float, key: str, what: str) -> str:
        """A ratio for information, judged against an absolute target."""
        if v is None:
            return "n/a"
        r = f"{v / ref:.2f}x, " if ref else ""
        return f"{v:,.0f} ({r}{self.judge(key, what, v >= target, v, f'{v:,.0f}/s')})"

    def rss(self, peak: float | None, what: str) -> str:
        """A daemon's peak RSS, judged against cache + 100 MiB."""
        if not peak:
            return "n/a"
        text = fmt_size(peak)
        return f"{text} ({self.judge('rss', what, peak <= self.b.rss_target, peak, text)})"

    def seconds(self, t: float | None, limit: float, key: str, what: str) -> str:
        if t is None:
            return "n/a"
        return f"{t:.3f} s ({self.judge(key, what, t < limit, t, f'{t:.3f} s')})"

    # -- layout -----------------------------------------------------------------------------

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def section(self, title: str, text: str = "") -> None:
        self.add(f"## {title}", "")
        if text:
            self.add(text, "")

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(row) + " |" for row in rows))
        self.add("")

    # -- the whole --------------------------------------------------------------------------

    def header(self) -> list[str]:
        a, b = self.a, self.b
        cpu = "?"
        with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        where = (
            f"Groups only (--only-group), on {fs_type(Path(a.data_dir))} ({a.data_dir}). "
            if a.only_group
            else f"Arrays of {fmt_size(a.size)} on {fs_type(b.work)} ({b.work.parent}); "
            f"raw copies on tmpfs. Medians of {a.repeat} runs "
            f"({a.write_repeat} for writes; warm and tmpfs dd {WARM_RUNS} per run). "
            "MB/s = 10^6 B/s of uncompressed data. "
        )
        return [
            "# zarrfs benchmark",
            "",
            f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}: {os.cpu_count()} x {cpu}, "
            f"Linux {platform.release()}; Python {platform.python_version()}, "
            f"tensorstore {version('tensorstore')}, zarr {version('zarr')}, numpy {np.__version__}. "
            f"Load average at the end: {load}.",
            "",
            where + f"Every mount: `-o {b.mount_opts()}` (so the RSS target is cache + 100 MiB = "
            f"{fmt_size(b.rss_target)}). Run took {b.elapsed:.0f} s.",
            "",
        ]

    def summary(self) -> list[str]:
        out = [
            "## Targets",
            "",
            "| figure | target | result | worst |",
            "|---|---|---|---|",
        ]
        for t in self.targets:
            checks = self.checks.get(t.key, [])
            if not checks:
                out.append(f"| {t.figure} | {t.target} | not measured | |")
                continue
            nok = sum(c.ok for c in checks)
            pick = min if t.higher_is_better else max
            worst = pick(checks, key=lambda c: c.value)
            verdict = "ok" if nok == len(checks) else "MISS"
            out.append(
                f"| {t.figure} | {t.target} | {verdict} ({nok} of {len(checks)} ok) | "
                f"{worst.text} ({worst.what}) |"
            )
        out.append("")
        if self.plot is not None:
            out += [f"![zarrfs against TensorStore, zarr-python and tmpfs]({self.plot.name})", ""]
        return out

    def render(self) -> str:
        for section in self.sections:
            section(self)
        return "\n".join(self.header() + self.summary() + self.lines)
