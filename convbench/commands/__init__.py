"""One module per CLI command, each defining ``command`` (a click command).

Command modules import only click at module level: ``convbench --help`` must stay fast, so
numba, pandas and matplotlib are imported inside the functions that need them.
"""
