"""The negative controls' own checks: seams, probes, registry, docs and the self-test."""
