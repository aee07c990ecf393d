"""The history of many runs: one table over every results directory under a root, the
series of each case on each host, and the steps in them (``convbench history``).

- :mod:`convbench.history.runs`: which directories are runs, their order, label and host.
- :mod:`convbench.history.table`: the long table (DuckDB over the Parquet files, or pandas).
- :mod:`convbench.history.steps`: change points in one series (penalised, documented).
- :mod:`convbench.history.trends`: every series' steps, and the last stable level.
"""
