"""Replay every committed input of every fuzz target (seeds, what fuzzing found, and the
inputs of past findings, crash-*) through its harness: each must parse/decode or raise one of
zarrfs's own errors (tests/fuzz/common.py), so a fixed finding stays fixed. scripts/fuzz grows
the corpus; tests/reliability/test_fuzz.py checks, with hypothesis, the values of what parses."""

from __future__ import annotations

import importlib

import pytest

from .common import TARGETS, corpus_files, harness_module

CASES = [(target, path) for target in TARGETS for path in corpus_files(target)]


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_has_a_corpus(target: str) -> None:
    seeds = [p for p in corpus_files(target) if p.name.startswith("seed-")]
    assert seeds, f"tests/fuzz/corpus/{target} has no seeds (python -m fuzz.make_seeds)"


@pytest.mark.parametrize(("target", "path"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_replay(target: str, path: object) -> None:
    harness = importlib.import_module(harness_module(target))
    harness.fuzz_one(path.read_bytes())  # type: ignore[attr-defined]
