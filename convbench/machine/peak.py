"""FP32 peak: an FMA micro-benchmark at each explicit vector width (x86: 256 and 512 bits;
aarch64: 128), 1..N threads.

The width is fixed by ``NUMBA_CPU_FEATURES`` (:func:`convbench.host.cpu_features`, the same
string the kernels' workers run under), which numba reads once at import, so each width
runs in its own process: ``python -m convbench.machine.peak --width 512 --threads 1,2``
prints one JSON object.  The assembly of the compiled kernel is read back to record the
width LLVM actually used; a width the host cannot execute is reported as missing, not
invented.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from typing import Any

from convbench import host

# The explicit widths whose peak `convbench machine` measures: x86's two (a CPU without
# AVX-512 gets a note in place of the 512-bit one) or aarch64's NEON width.
_HOST_WIDTHS = host.vector_widths()
WIDTHS = ("256", "512") if "256" in _HOST_WIDTHS else tuple(w for w in _HOST_WIDTHS
                                                            if w != "auto")


# A multi-thread peak far below t x the 1-thread one is measured again, up to SCALING_RETRIES
# more times, keeping the best: on the Zen 4 host (2 vCPUs) two threads in one process
# sometimes ran at the rate of one for a whole measurement (2 x 512-bit, aligned operands,
# four fresh processes: 150, 221, 220 and 179 GFLOP/s; 1 thread 115), and a peak measured
# low marks real kernels' shares as impossible (up to 1.17 of it).  A higher rate is one
# the code reached, so the best of the attempts is the estimate; where threads truly do not
# scale the retries cost time and change nothing.
SCALING_PLAUSIBLE = 0.9
SCALING_RETRIES = 4


def _measure_here(threads: list[int], min_seconds: float, repeats: int) -> dict[str, Any]:
    """Measure in this process (its NUMBA_CPU_FEATURES already set): per thread count the
    better of the 8- and 16-chain FMA kernels (``chains`` says which)."""
    from convbench.kernels.asm import dispatcher_asm, fp_profile
    from convbench.machine import kernels
    from convbench.machine.timing import best_seconds

    variants = ((kernels.fma_chains, kernels.CHAINS, kernels.STEPS),
                (kernels.fma_chains_wide, kernels.WIDE_CHAINS, kernels.WIDE_STEPS))
    features = os.environ.get(host.FEATURES_ENV) or host.cpu_features("512") or ""
    if _sixteen_vector_registers(features):
        # the 16-chain kernel spills there and cannot win (kernels.WIDE_CHAINS); not
        # compiling it saves ~3 s of a host's first run (AMD znver1: 8 chains won, 17 GFLOP/s)
        variants = variants[:1]

    def best_rate(t: int) -> tuple[float, int]:
        """GFLOP/s of the faster kernel on ``t`` threads, and its chain count."""
        kernels.set_threads(t)
        best = (0.0, 0)
        for kernel, n_chains, steps in variants:
            a, b, x = kernels.fma_operands(t, n_chains)
            n, seconds = best_seconds(
                lambda n, a=a, b=b, x=x, k=kernel: k(n, a, b, x), min_seconds, repeats)
            rate = kernels.fma_flops(n, t, n_chains, steps) / seconds / 1e9
            if rate > best[0]:
                best = (rate, n_chains)
        return best

    gflops: dict[str, float] = {}
    chains: dict[str, int] = {}
    one_thread = None   # the rate multi-thread figures are judged against (SCALING_*)
    unscaled: dict[str, float] = {}   # thread count -> its peak over the 1-thread one
    for t in sorted(threads):
        if t > 1 and one_thread is None:
            # a run that lacks only its multi-thread limits asks for those alone
            # (first_use.limits_for_run): the 1-thread reference is measured, not reported
            one_thread = best_rate(1)[0]
        for _attempt in range(1 + (SCALING_RETRIES if t > 1 else 0)):
            rate, n_chains = best_rate(t)
            if rate > gflops.get(str(t), 0.0):
                gflops[str(t)], chains[str(t)] = rate, n_chains
            if t == 1 or gflops[str(t)] >= SCALING_PLAUSIBLE * t * one_thread:
                break
        else:   # still implausible after every attempt: the caller notes it
            unscaled[str(t)] = gflops[str(t)] / one_thread
        if t == 1:
            one_thread = gflops["1"]
    # the width LLVM used is the narrower of the two kernels' (a peak at a width must be
    # reached by code of that width)
    profiles = [fp_profile(dispatcher_asm(k)) for k, _, _ in variants]
    widths = [p.widest for p in profiles]
    packed: dict[str, int] = {}
    for p in profiles:
        for w, c in p.packed_fma.items():
            packed[str(w)] = packed.get(str(w), 0) + c
    return {"gflops": gflops, "chains": chains, "unscaled": unscaled,
            "asm_width": None if None in widths else min(widths), "packed_fma": packed}


def _sixteen_vector_registers(features: str) -> bool:
    """An x86 CPU without AVX-512 (16 ymm registers; AVX-512 has 32, and so has AArch64)."""
    return platform.machine().lower() in ("x86_64", "amd64") and "+avx512f" not in features


def measure_width(width: str, threads: list[int], min_seconds: float = 0.2,
                  repeats: int = 5) -> dict[str, Any]:
    """Run the FMA benchmark for one width in a fresh process; returns ``gflops`` by
    thread count (as strings), ``asm_width`` (bits LLVM used) and ``packed_fma``."""
    features = host.cpu_features(width)
    if features is None:
        raise ValueError("the peak is measured at an explicit width (128, 256 or 512), not auto")
    env = {**os.environ, host.FEATURES_ENV: features}
    cmd = [sys.executable, "-m", "convbench.machine.peak", "--threads",
           ",".join(map(str, threads)), "--seconds", str(min_seconds), "--repeats",
           str(repeats)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"peak benchmark at {width} bits failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", default="1")
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    print(json.dumps(_measure_here(threads, args.seconds, args.repeats)))


if __name__ == "__main__":
    main()
