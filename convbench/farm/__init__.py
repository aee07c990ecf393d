"""A benchmark farm on dask.distributed: one sweep across several hosts.

``convbench run SUITE --scheduler tcp://HOST:PORT`` sends the plan's worker groups to
dask workers started as ``dask worker ADDR --nthreads 1 --resources bench=1``: every task
asks for ``bench=1``, so a host never runs two groups at once.  A task runs the ordinary
worker path (:class:`convbench.harness.runner.Runner`) for one group on its host and ships
the rows back; the client writes them into one ordinary results directory per host.

- :mod:`convbench.farm.layout`: the farm directory (``farm.json`` and ``hosts/<host>/``).
- :mod:`convbench.farm.task`: what a dask worker runs for one group.
- :mod:`convbench.farm.client`: connecting, dispatching, collecting, losing and resuming.
"""
