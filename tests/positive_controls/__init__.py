"""Positive controls: the self-test, the probes, the table and its docs."""
