"""atheris harnesses for the inputs zarrfs reads from other people's files (scripts/fuzz runs
them; test_replay.py replays their corpus). One module per target, each with `fuzz_one`."""
