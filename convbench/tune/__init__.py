"""``convbench tune``: successive halving over each layer's candidate variants, tuning records,
and applying them to a run (``convbench run --records``).

- :mod:`.schedule`  the halving: rounds, their timing, who survives (pure functions)
- :mod:`.space`     the candidates of a layer group (an algorithm's tuning space or the sweep)
- :mod:`.records`   the JSON-lines records: format, reading, writing, the best per group
- :mod:`.session`   a tuning session: rounds measured through the ordinary worker path
- :mod:`.apply`     a run's plan with each recorded layer reduced to its tuned variant
"""
