"""Hypothesis state machines per family over a real world (see ``docs/properties.md``)."""
