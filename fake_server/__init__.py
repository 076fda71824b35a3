"""Simulated Yaoyao control plane speaking Runner protocol 1 (the oracle)."""
