"""The zarrfs benchmark, as a package; `benchmarks/run.py` is its one command.

Modules: common (units, targets, timing), arrays (the arrays and TensorStore specs),
mounting (a zarrfs mount in a child process), workers (measurements in child processes),
context (the run's state), reads, writes, big (memory and sharding), groups, s3,
profiling, runner (the order of the sections), report (markdown), plot (PNG), cli.
"""
