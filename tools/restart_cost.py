"""How much slower a kernel's first calls run after a break, and which break causes it.

Times ``--calls`` consecutive single calls of one variant after each of several
preparations (median over ``--reps``), with the minor page faults per call, so the cost a
single cold-mode value carries besides its cache misses can be seen on the host at hand.
On the AMD EPYC Zen 3 host (2 vCPUs) the first calls after ~20 ms away from a layer's own
buffers ran 1.5-3.5x slower for ~5 calls whatever filled the 20 ms, and re-reading the
input and re-writing the output right before did not help
(``convbench/harness/coldcache.py``).

    python tools/restart_cost.py g96mb1ic96ih112oc96oh56kh3sh2ph1 \\
        depthwise3x3/nhwc/order=tiles/tile=1x4 --threads 1

Preparations: nothing (back to back); the cold-weights touch alone (read the input, write
the output); the cold-weights protocol (the pile, then the touch); a 20 ms sleep; the same
kernel for 20 ms on other buffers of the same shape, then the touch; the same kernel for
20 ms on the same buffers.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Callable

import numpy as np

BREAK_S = 0.020


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("descriptor", help="benchdnn conv descriptor")
    parser.add_argument("variant", help="variant id, e.g. depthwise3x3/nhwc/tile=1x4")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()

    # numba reads the thread count at import: pin and size before importing kernels
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:args.threads]))
    import numba

    from convbench.harness.coldcache import COLD_WEIGHTS, Evictor, _touch
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import prepare
    from convbench.kernels.base import Variant
    from convbench.spec.descriptor import parse_descriptor

    numba.set_num_threads(args.threads)
    problem = parse_descriptor(args.descriptor)
    x_nchw, w = make_inputs(problem)
    variant = Variant.parse(args.variant)
    # the pile first: writing it is a break too, which the first rows must not follow
    evictor = Evictor(COLD_WEIGHTS, args.threads)
    mine = prepare(problem, variant, x_nchw, w)
    other = prepare(problem, variant, x_nchw, w)
    run, x, y = mine.prepared.run, mine.x, mine.y
    for _ in range(5):
        other.prepared.run(other.x, other.y)
    for _ in range(20):
        run(x, y)

    def loop(execution, seconds: float = BREAK_S) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            execution.prepared.run(execution.x, execution.y)

    preparations: dict[str, Callable[[], object]] = {
        "back to back": lambda: None,
        "touch only (read input, write output)": lambda: _touch(x, y),
        "cold-weights protocol (pile + touch)": lambda: evictor.before(x, y),
        "sleep 20 ms": lambda: time.sleep(BREAK_S),
        "other buffers 20 ms, then touch": lambda: (loop(other), _touch(x, y)),
        "same buffers 20 ms": lambda: loop(mine),
    }
    print(f"{problem} {variant.id}, {args.threads} thread(s): calls 1..{args.calls}, "
          f"median ms of {args.reps} (max minor faults per call)")
    for label, before in preparations.items():
        times = np.empty((args.reps, args.calls))
        faults = np.zeros(args.calls, int)
        for rep in range(args.reps):
            before()
            for call in range(args.calls):
                f0, t0 = _minor_faults(), time.perf_counter()
                run(x, y)
                times[rep, call] = time.perf_counter() - t0
                faults[call] = max(faults[call], _minor_faults() - f0)
        medians = " ".join(f"{v * 1e3:7.3f}" for v in np.median(times, axis=0))
        print(f"  {label:40s} {medians}   ({' '.join(map(str, faults))})")


if __name__ == "__main__":
    main()
