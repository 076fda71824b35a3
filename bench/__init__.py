"""Benchmarks: figures beside floors measured in the same run (docs/bench.md)."""
