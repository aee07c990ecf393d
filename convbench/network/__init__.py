"""Whole networks: running a suite's graph (:mod:`convbench.spec.network`) end to end."""
