"""Benchmarks runnable from the CLI (``ferret bench ...``)."""
