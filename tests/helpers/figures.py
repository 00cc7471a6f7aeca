"""Figures the reliability suites report (steps run, rounds survived, data lost): printed past
pytest's capture, and appended as JSON lines to the file ZARRFS_STATS names, if any."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import pytest


def report_figures(config: pytest.Config, line: str, record: dict[str, Any]) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line("\n" + line)
    if os.environ.get("ZARRFS_STATS"):
        with open(os.environ["ZARRFS_STATS"], "a") as f:
            f.write(json.dumps(record) + "\n")
