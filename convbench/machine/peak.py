"""FP32 peak: FMA micro-benchmarks (independent chains, and a register tile as the conv
kernels compute one) at each explicit vector width (x86: 256 and 512 bits; aarch64: 128),
1..N threads; the peak is the best of them, since a limit is a maximum.

The width is fixed by ``NUMBA_CPU_FEATURES`` (:func:`convbench.host.cpu_features`, the same
string the kernels' workers run under), which numba reads once at import, so each width
runs in its own process: ``python -m convbench.machine.peak --width 512 --threads 1,2``
prints one JSON object.  The assembly of the compiled kernels is read back to record the
width LLVM actually used; a width the host cannot execute is reported as missing, not
invented.  Measured on the Zen 5 host (1 thread, 512-bit): 8 chains 234-250 GFLOP/s, the
6 x 32 tile 266-268, prepacked oneDNN up to 278 on a ResNet-50 3x3 layer.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PeakKernel:
    """One FMA code the peak is measured with: its name, the compiled kernel, its operands
    for a thread count and its FLOPs for ``n`` rounds on that many threads."""

    name: str
    kernel: Callable[..., None]
    operands: Callable[[int], tuple[Any, ...]]
    flops: Callable[[int, int], int]


def _peak_kernels(features: str) -> list[PeakKernel]:
    """The 8- and 16-chain kernels and the register tile at the width ``features`` compile
    for.  The 16-chain kernel spills with AVX2's 16 registers and cannot win
    (kernels.WIDE_CHAINS): not compiling it saves ~3 s of a host's first run (AMD znver1:
    8 chains won, 17 GFLOP/s)."""
    from convbench.kernels.asm import dispatcher_asm, fp_profile
    from convbench.machine import kernels

    found = [PeakKernel(f"{n_chains} chains", kernel,
                        functools.partial(kernels.fma_operands, chains=n_chains),
                        functools.partial(kernels.fma_flops, chains=n_chains, steps=steps))
             for kernel, n_chains, steps in
             ((kernels.fma_chains, kernels.CHAINS, kernels.STEPS),
              (kernels.fma_chains_wide, kernels.WIDE_CHAINS, kernels.WIDE_STEPS))]
    if _sixteen_vector_registers(features):
        found = found[:1]
    lanes = host.feature_lanes(features)
    tile = PeakKernel(f"{kernels.TILE_ROWS} x {2 * lanes} tile", kernels.fma_tile(lanes),
                      functools.partial(kernels.tile_operands, lanes=lanes),
                      functools.partial(kernels.tile_flops, lanes=lanes))
    # Only code of the width being measured gives its peak: at 256 bits on the Zen 5 host
    # LLVM fused the tile's 8-lane vectors into zmm FMAs (204 GFLOP/s on 1 thread, past
    # the 136 that 256-bit code can do at its clock); the chain kernels stayed in ymm.
    tile.kernel(1, *tile.operands(1))
    if fp_profile(dispatcher_asm(tile.kernel)).widest == 32 * lanes:
        found.append(tile)
    return found


def _measure_here(threads: list[int], min_seconds: float, repeats: int) -> dict[str, Any]:
    """Measure in this process (its NUMBA_CPU_FEATURES already set): per thread count the
    best of the FMA kernels (``kernel`` says which)."""
    from convbench.kernels.asm import dispatcher_asm, fp_profile
    from convbench.machine import kernels
    from convbench.machine.timing import best_seconds

    features = os.environ.get(host.FEATURES_ENV) or host.cpu_features("512") or ""
    variants = _peak_kernels(features)

    def best_rate(t: int) -> tuple[float, str]:
        """GFLOP/s of the fastest kernel on ``t`` threads, and its name."""
        kernels.set_threads(t)
        best = (0.0, "")
        for v in variants:
            operands = v.operands(t)
            n, seconds = best_seconds(
                lambda n, ops=operands, k=v.kernel: k(n, *ops), min_seconds, repeats)
            rate = v.flops(n, t) / seconds / 1e9
            if rate > best[0]:
                best = (rate, v.name)
        return best

    gflops: dict[str, float] = {}
    winner: dict[str, str] = {}
    one_thread = None   # the rate multi-thread figures are judged against (SCALING_*)
    unscaled: dict[str, float] = {}   # thread count -> its peak over the 1-thread one
    for t in sorted(threads):
        if t > 1 and one_thread is None:
            # a run that lacks only its multi-thread limits asks for those alone
            # (first_use.limits_for_run): the 1-thread reference is measured, not reported
            one_thread = best_rate(1)[0]
        for _attempt in range(1 + (SCALING_RETRIES if t > 1 else 0)):
            rate, name = best_rate(t)
            if rate > gflops.get(str(t), 0.0):
                gflops[str(t)], winner[str(t)] = rate, name
            if t == 1 or gflops[str(t)] >= SCALING_PLAUSIBLE * t * one_thread:
                break
        else:   # still implausible after every attempt: the caller notes it
            unscaled[str(t)] = gflops[str(t)] / one_thread
        if t == 1:
            one_thread = gflops["1"]
    # the width LLVM used is the narrowest of the kernels' (a peak at a width must be
    # reached by code of that width)
    profiles = [fp_profile(dispatcher_asm(v.kernel)) for v in variants]
    widths = [p.widest for p in profiles]
    packed: dict[str, int] = {}
    for p in profiles:
        for w, c in p.packed_fma.items():
            packed[str(w)] = packed.get(str(w), 0) + c
    return {"gflops": gflops, "kernel": winner, "unscaled": unscaled,
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
