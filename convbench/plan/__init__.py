"""Whole-network planning from measured costs: which variant each conv of a network runs,
with the layout transforms between them (:mod:`convbench.plan.layouts`), and the tables of
costs it plans from (:mod:`convbench.plan.costs`)."""
