"""How each kind of example of the docs is run on a scratch machine (`tests/helpers/docs_scratch.py`).

- `sh` blocks: one `bash -e -o pipefail` script; every command must succeed.
- `console` blocks: a transcript. `$ ` starts a command (`> ` continues it); the lines up to
  the next command are its output, compared exactly after the scratch root is taken out. A
  line `...` stands for any lines, `...` in a line for any text; a last line `[N]` is the
  exit status (0 when absent), as in cram and prysk transcripts.
- `python` blocks starting with `>>>`: doctests (the standard `doctest` module, ELLIPSIS on).
- other `python` blocks: a script run by the test's interpreter; it must exit 0.
- `fstab` blocks: each line mounted as mount(8) mounts it, by the helper its type names
  (`mount.zarrfs`, or `mount.fuse3 -t fuse.zarrfs`, which runs `zarrfs`) with every option
  of the line, then unmounted.
"""

from __future__ import annotations

import doctest
import io
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.docs_examples import Example
from tests.helpers.docs_scratch import Scratch, unmount_below
from tests.helpers.mounting import is_mounted

TIMEOUT = 180


class ExampleFailed(AssertionError):
    pass


def run(example: Example, machine: Scratch, session: dict[str, Any]) -> None:
    kinds = {"shell": run_shell, "console": run_console, "session": run_session, "script": run_script,
             "fstab": run_fstab}
    if example.kind not in kinds:
        raise ExampleFailed(f"{example.name}: no way to run a {example.language or 'plain'} block: "
                            "mark it <!-- docs-test: not run: REASON -->")
    kinds[example.kind](example, machine, session)


def _completed(command: list[str], machine: Scratch, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=machine.work, env=machine.environment(), input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT)


def run_shell(example: Example, machine: Scratch, session: dict[str, Any]) -> None:
    if example.text.startswith("$ "):
        raise ExampleFailed(f"{example.name}: a transcript (`$ ` prompts) in a {example.language} fence: "
                            "make it ```console, so its output is compared")
    done = _completed(["bash", "-e", "-o", "pipefail", "-s"], machine, machine.localize(example.text))
    if done.returncode != 0:
        raise ExampleFailed(f"{example.name}: exit status {done.returncode}\n"
                            f"{machine.delocalize(done.stdout + done.stderr)}")


def run_script(example: Example, machine: Scratch, session: dict[str, Any]) -> None:
    done = _completed([sys.executable, "-"], machine, machine.localize(example.text))
    if done.returncode != 0:
        raise ExampleFailed(f"{example.name}: exit status {done.returncode}\n"
                            f"{machine.delocalize(done.stdout + done.stderr)}")


def run_session(example: Example, machine: Scratch, session: dict[str, Any]) -> None:
    """`session` holds the interpreter's names, shared along a chain of blocks that continue
    one another."""
    test = doctest.DocTestParser().get_doctest(machine.localize(example.text), session, example.name,
                                               example.document, example.line)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.write, clear_globs=False)
    session.update(test.globs)  # (a DocTest runs in a copy of the names it is given)
    if result.failed:
        raise ExampleFailed(machine.delocalize(out.getvalue()))


@dataclass
class Command:
    text: str
    expected: list[str]
    status: int = 0


def transcript(text: str) -> list[Command]:
    commands: list[Command] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            commands.append(Command(line[2:], []))
        elif line.startswith("> ") and commands and not commands[-1].expected:
            commands[-1].text += "\n" + line[2:]
        elif commands:
            commands[-1].expected.append(line)
        elif line.strip():
            raise ExampleFailed(f"output before the first command: {line!r}")
    for command in commands:
        if command.expected and command.expected[-1].startswith("[") and command.expected[-1].endswith("]"):
            command.status = int(command.expected.pop()[1:-1])
    return commands


_MARK = "@@docs-test-{}@@"


def run_console(example: Example, machine: Scratch, session: dict[str, Any]) -> None:
    commands = transcript(example.text)
    script = ["exec 2>&1"]
    for number, command in enumerate(commands):
        script += [command.text, f'echo "{_MARK.format(number)} $?"']
    done = _completed(["bash", "-s"], machine, machine.localize("\n".join(script) + "\n"))
    outputs = machine.delocalize(done.stdout).split("\n")
    for number, command in enumerate(commands):
        mark = _MARK.format(number) + " "
        end = next((i for i, line in enumerate(outputs) if mark in line), None)
        if end is None:
            raise ExampleFailed(f"{example.name}: `{command.text}` did not finish:\n" + "\n".join(outputs))
        unended, _, status_text = outputs[end].partition(mark)  # (output without a last newline)
        got = outputs[:end] + ([unended] if unended else [])
        status, outputs = int(status_text), outputs[end + 1:]
        if not matches(command.expected, got) or status != command.status:
            expected = "\n".join(command.expected)
            raise ExampleFailed(f"{example.name}: `{command.text}`\nexpected (status {command.status}):\n"
                                f"{expected}\ngot (status {status}):\n" + "\n".join(got))


def matches(expected: list[str], got: list[str]) -> bool:
    """Whether `got` is `expected`, a line `...` standing for any lines, and `...` in a line
    for any text (a figure that varies from machine to machine)."""
    if not expected:
        return not got
    if expected[0] == "...":
        return any(matches(expected[1:], got[start:]) for start in range(len(got) + 1))
    return bool(got) and _line_matches(expected[0], got[0]) and matches(expected[1:], got[1:])


def _line_matches(expected: str, got: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def run_fstab(example: Example, machine: Scratch, session: dict[str, Any]) -> None:
    for line in machine.localize(example.text).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        source, mountpoint, kind, options = line.split()[:4]
        Path(mountpoint).mkdir(parents=True, exist_ok=True)
        if kind.startswith("fuse."):
            helper = ["mount.fuse3", source, mountpoint, "-t", kind, "-o", options]
        else:
            helper = [f"mount.{kind}", source, mountpoint, "-o", options]
        done = _completed(helper, machine, "")
        shown = machine.delocalize(line)
        if done.returncode != 0 or not is_mounted(Path(mountpoint)):
            raise ExampleFailed(f"{example.name}: `{shown}` did not mount (exit status {done.returncode}):\n"
                                f"{machine.delocalize(done.stdout + done.stderr)}")
        unmount_below(Path(mountpoint).parent)
