"""scripts/fuzz: run each harness under atheris for a while, one after another, and report.

    scripts/fuzz [--seconds N] [--no-save] [TARGET...]     (targets: all, by default)

Per target: executions, new corpus entries, findings. A finding (an exception other than
zarrfs's own, a timeout, running out of memory, a crash of the process) is saved as
tests/fuzz/corpus/TARGET/crash-* (timeout-*, oom-*) and the run goes on until its time is
up. The inputs that found new coverage are merged into tests/fuzz/corpus/TARGET/ (libFuzzer's
-merge keeps only those adding coverage), capped so the committed corpus stays small.
tests/fuzz/test_replay.py replays every file there.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))

from fuzz.common import CORPUS, TARGETS  # noqa: E402

ARTIFACTS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")
MAX_FILES = 50  # per target, in the committed corpus
MAX_BYTES = 200_000
DICTIONARIES = {"metadata": "zarr.dict", "consolidated": "zarr.dict", "references": "references.dict"}
# atheris's process grows by about 2 KB an execution whatever the harness does (the same
# inputs in a plain loop stay at 45 MB): restart it every RUNS executions, so that its memory
# limit catches inputs, not that growth (2 GB after 940,000 executions of the shard target).
RUNS = 300_000
OPTIONS = ["-timeout=20", "-rss_limit_mb=2048", "-max_len=16384", "-print_final_stats=1", f"-runs={RUNS}"]


@dataclass
class Outcome:
    executions: int = 0
    new_entries: int = 0
    findings: list[str] = field(default_factory=list)


def launcher(target: str, work: Path) -> Path:
    """An executable that runs `target` under atheris: libFuzzer's -merge runs its argv[0]
    again, which must be executable (python -m is not)."""
    path = work / f"run-{target}"
    pythonpath = os.pathsep.join(p for p in (str(TESTS), str(REPO), os.environ.get("PYTHONPATH")) if p)
    path.write_text(f"""#!/bin/sh
cd {shlex.quote(str(TESTS))} && PYTHONPATH={shlex.quote(pythonpath)} exec \\
    {shlex.quote(sys.executable)} -m fuzz.atheris_main {target} --self "$0" "$@"
""")
    path.chmod(0o755)
    return path


def libfuzzer(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(run), *args], text=True, errors="replace", stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False)


def is_artifact(path: Path) -> bool:
    return path.name.startswith(ARTIFACTS)


def fuzz(target: str, seconds: int, work: Path) -> Outcome:
    """Fuzz `target` for `seconds`, restarting after each finding; new inputs land in `work`."""
    committed = CORPUS / target
    committed.mkdir(parents=True, exist_ok=True)
    seeds = work / "seeds"  # the committed corpus without known findings (they would stop the run)
    grown = work / "grown"
    for folder in (seeds, grown):
        folder.mkdir()
    for path in committed.iterdir():
        if path.is_file() and not is_artifact(path):
            shutil.copy(path, seeds / path.name)
    outcome = Outcome()
    run_target = launcher(target, work)
    deadline = time.monotonic() + seconds
    while (left := int(deadline - time.monotonic())) > 0:
        run = libfuzzer(run_target, *OPTIONS, *dictionary(target), f"-max_total_time={left}",
                        f"-artifact_prefix={committed}/", str(grown), str(seeds))
        with (work / "log").open("a") as log:
            log.write(run.stdout)
        outcome.executions += _executions(run.stdout)
        saved = re.findall(r"Test unit written to (\S+)", run.stdout)
        if run.returncode != 0 and not saved:
            outcome.findings.append(f"exit status {run.returncode} without an input saved: see {work}/log")
            break
        for path in saved:  # (the same input found again is one finding)
            finding = f"{Path(path).relative_to(REPO)}: {_cause(run.stdout)}"
            if finding not in outcome.findings:
                outcome.findings.append(finding)
    outcome.new_entries = sum(1 for _ in grown.iterdir())
    return outcome


def dictionary(target: str) -> list[str]:
    """libFuzzer's -dict for a target whose inputs are JSON: the tokens and names that lead
    past the first checks (a fuzzer mutating bytes finds "length_bytes" seldom)."""
    name = DICTIONARIES.get(target)
    return [f"-dict={TESTS / 'fuzz' / 'dicts' / name}"] if name else []


def _executions(log: str) -> int:
    final = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    if final:
        return int(final[-1])
    progress = re.findall(r"^#(\d+)\s", log, re.MULTILINE)
    return int(progress[-1]) if progress else 0


def _cause(log: str) -> str:
    """The one line that says what went wrong (the exception, or libFuzzer's verdict)."""
    for pattern in (r"^(\w+(?:\.\w+)*(?:Error|Exception)\b.*)$", r"==\d+== ERROR: libFuzzer: (.*)$",
                    r"^(ALARM: .*)$"):
        found = re.findall(pattern, log, re.MULTILINE)
        if found:
            return str(found[-1])[:200]
    return "(see the log)"


def save(target: str, work: Path) -> None:
    """Add what the run found to the committed corpus: the inputs that add coverage to it
    (libFuzzer's -merge), then cap it. Nothing there is removed but the largest inputs fuzzing
    added before (see `cap`)."""
    committed = CORPUS / target
    merged = work / "merged"  # the committed corpus without findings (a merge would re-run them)
    merged.mkdir()
    for path in committed.iterdir():
        if path.is_file() and not is_artifact(path):
            shutil.copy(path, merged / path.name)
    before = {path.name for path in merged.iterdir()}
    run = libfuzzer(launcher(target, work), "-merge=1", "-timeout=20", "-rss_limit_mb=2048",
                    str(merged), str(work / "grown"))
    with (work / "log").open("a") as log:
        log.write(run.stdout)
    if run.returncode != 0:
        print(f"  {target}: merge failed (see {work}/log); the corpus is left as it was", file=sys.stderr)
        return
    for path in merged.iterdir():
        if path.name not in before:
            shutil.copy(path, committed / path.name)
    cap(committed)


def cap(folder: Path) -> None:
    """Drop the largest inputs found by fuzzing (never seeds, never findings) until the folder
    holds at most MAX_FILES files and MAX_BYTES bytes."""
    files = [p for p in folder.iterdir() if p.is_file()]
    droppable = sorted((p for p in files if not p.name.startswith(("seed-", "regress-", *ARTIFACTS))),
                       key=lambda p: p.stat().st_size, reverse=True)
    count, total = len(files), sum(p.stat().st_size for p in files)
    for path in droppable:
        if count <= MAX_FILES and total <= MAX_BYTES:
            break
        count, total = count - 1, total - path.stat().st_size
        path.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--no-save", action="store_true", help="leave the committed corpus alone")
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help=f"some of {', '.join(TARGETS)} (default: all)")
    args = parser.parse_args()
    unknown = set(args.targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}: choose from {', '.join(TARGETS)}")
    total_findings = 0
    for target in args.targets or TARGETS:
        work = Path(tempfile.mkdtemp(prefix=f"zarrfs-fuzz-{target}-"))
        outcome = fuzz(target, args.seconds, work)
        if not args.no_save:
            save(target, work)
        print(f"{target}: {outcome.executions} executions, {outcome.new_entries} new corpus entries, "
              f"{len(outcome.findings)} findings", flush=True)
        for finding in outcome.findings:
            print(f"  {finding}")
        total_findings += len(outcome.findings)
        if not outcome.findings:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if total_findings else 0


if __name__ == "__main__":
    sys.exit(main())
