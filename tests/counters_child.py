"""A worker stand-in for the counters tests: count one variant's calls and print the row.

    python tests/counters_child.py KIND DESCRIPTOR ALGORITHM LAYOUT CALLS [WARMUPS]

Builds the variant, runs WARMUPS calls outside the region (JIT, first-touch), then CALLS
calls inside it, and prints ``session.read(CALLS)`` as JSON on stdout.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> None:
    kind, descriptor, algorithm, layout, calls = argv[:5]
    warmups = int(argv[5]) if len(argv) > 5 else 1
    from convbench.harness.counters import open_session
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import prepare
    from convbench.kernels.base import Variant
    from convbench.spec.descriptor import parse_descriptor

    problem = parse_descriptor(descriptor)
    x, w = make_inputs(problem)
    run = prepare(problem, Variant.of(algorithm, layout), x, w)
    session = open_session(kind)
    for _ in range(warmups):
        run.prepared.run(run.x, run.y)
    with session.region():
        for _ in range(int(calls)):
            run.prepared.run(run.x, run.y)
    print(json.dumps(session.read(int(calls))))
    session.close()


if __name__ == "__main__":
    main(sys.argv[1:])
