"""Fuzz every registered kernel variant against the float64 reference, for as long as you
give it: random layer-like problems, each algorithm's whole registered grid on each.

    python tools/fuzz_kernels.py --threads 1 --minutes 25
    python tools/fuzz_kernels.py --threads 2 --minutes 25 --seed 5000 --fused
    python tools/fuzz_kernels.py --seed 1234 --problems 1 --algorithms nchwc   # one again

The test suite's property tests draw a few small problems a run (a new shape compiles new
kernels, so a run affords few); this is the long campaign to run after a kernel change.
Problems: pointwise, 3x3 dense and 3x3 depthwise layers with channel counts that are
mostly block sizes (8 to 128) and sometimes any count up to 130, outputs 3 to 30 wide,
stride 1 or 2; and general ones (kernels up to 5 x 5, dilation, groups 1/2/4, strides 1-3,
asymmetric padding).  Problem k is drawn from seed + k alone, so ``--seed S --problems 1``
reproduces a failure of problem S.  ``--fused`` checks, on every variant whose kernel fuses
them, a relu, a relu6, a residual add and an add then a relu, each against the reference
with the same op applied (the network pass runs them so).  Prints a progress line every
5 problems and every failure with its seed; exits 1 when anything failed.

Zen 3 host, 2026-12-01, 25 minutes each (the same kinds of problems and checks, by the
scripts this file gathers): 656 problems (25,436 variant checks) at 1 thread and 330
(12,633) at 2 threads; fused (each fused variant compiles anew, so fewer problems) 154
problems (9,618 fused checks) at 1 thread and 96 (5,224) at 2; no failure.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

import numpy as np

from convbench.harness.inputs import make_inputs
from convbench.harness.threads import use_threads
from convbench.harness.verify import prepare, verify
from convbench.kernels import layouts, registry
from convbench.kernels.base import Variant
from convbench.kernels.reference import Reference
from convbench.network.reference import run_op
from convbench.spec.network import Op
from convbench.spec.problem import ConvProblem

BLOCK_CHANNELS = (8, 16, 24, 32, 48, 64, 96, 128)
# (residual add, activation): the epilogues a network pass fuses into a conv
EPILOGUES = ((True, None), (False, "relu"), (False, "relu6"), (True, "relu"))


def _channels(rng: np.random.Generator) -> int:
    return int(rng.choice(BLOCK_CHANNELS)) if rng.random() < 0.7 else int(rng.integers(1, 131))


def problem_for(seed: int) -> ConvProblem:
    """The problem of ``seed`` (the same one on every host)."""
    rng = np.random.default_rng(seed)
    kind = int(rng.integers(0, 4))
    size, mb = int(rng.integers(3, 31)), int(rng.integers(1, 3))
    s = int(rng.choice([1, 1, 2]))
    if kind == 0:
        return ConvProblem.make(mb=mb, ic=_channels(rng), oc=_channels(rng), ih=size,
                                iw=int(rng.integers(3, 31)), kh=1, sh=s, name="pointwise")
    if kind == 1:
        return ConvProblem.make(mb=mb, ic=_channels(rng), oc=_channels(rng), ih=size, kh=3,
                                sh=s, ph=1, name="dense3x3")
    if kind == 2:
        c = _channels(rng)
        return ConvProblem.make(mb=mb, g=c, ic=c, oc=c, ih=size, kh=3, sh=s, ph=1,
                                name="depthwise")
    g = int(rng.choice([1, 1, 2, 4]))
    kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    dh, dw = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    return ConvProblem.make(
        mb=mb, g=g, ic=g * int(rng.integers(1, 40)), oc=g * int(rng.integers(1, 40)),
        ih=max(size, (kh - 1) * (dh + 1) + 1),
        iw=max(int(rng.integers(3, 31)), (kw - 1) * (dw + 1) + 1), kh=kh, kw=kw,
        sh=int(rng.integers(1, 4)), sw=int(rng.integers(1, 4)),
        ph=int(rng.integers(0, kh)), pw=int(rng.integers(0, kw)), dh=dh, dw=dw,
        name="general")


def _fused_failure(problem: ConvProblem, variant: Variant, reference: Reference,
                   x: np.ndarray, w: np.ndarray, shortcut: np.ndarray, add: bool,
                   act: str | None) -> tuple[bool, str | None]:
    """(whether the variant's kernel fuses this epilogue, why it is then wrong or None)."""
    execution = prepare(problem, variant, x, w)
    kernel = execution.prepared
    if (add and not kernel.fuse_residual()) or (act and not kernel.fuse_activation(act)):
        return False, None
    if add:   # the kernel adds its sums to the shortcut placed in its output
        execution.y[...] = layouts.to_layout(shortcut, kernel.out_layout)
    kernel.run(execution.x, execution.y)
    # the float64 glue ops of the network reference pass, as the pass is checked
    expected = copy.copy(reference)
    y = run_op(Op("add", "add", ()), [reference.y, shortcut]) if add else reference.y
    expected.y = run_op(Op(act, act, ()), [y]) if act else y
    if add:
        expected.magnitude = reference.magnitude + np.abs(shortcut)
    report = expected.compare(execution.output_nchw(problem),
                              registry.get(variant.algorithm).error_growth)
    return True, None if report.passed else report.reason


def check_problem(seed: int, algorithms: tuple[str, ...], fused: bool
                  ) -> tuple[int, list[str]]:
    """(checks made, a line per failed check) for problem ``seed``."""
    problem = problem_for(seed)
    x, w = make_inputs(problem, seed=seed)
    reference = Reference(problem, x, w)
    # residuals of the outputs' size, so an add moves results past relu6's clip as well
    shortcut = (3 * np.random.default_rng(seed + 1).standard_normal(
        problem.output_shape)).astype(np.float32)
    checks, failed = 0, []
    for variant, skip in registry.variants(problem, algorithms):
        if skip is not None:
            continue
        for epilogue in (None, *(EPILOGUES if fused else ())):
            what = "" if epilogue is None else f" add={epilogue[0]} act={epilogue[1]}"
            made = True
            try:
                if epilogue is None:
                    verdict, _ = verify(problem, variant, reference, x, w)
                    reason = None if verdict.status == "ok" else verdict.reason
                else:
                    made, reason = _fused_failure(problem, variant, reference, x, w,
                                                  shortcut, *epilogue)
            except Exception as exc:   # a crash of one check is a failure, not the end
                reason = f"{type(exc).__name__}: {exc}"
            checks += made
            if reason is not None:
                failed.append(f"FAIL seed={seed} {variant.id}{what} on {problem}: {reason}")
    return checks, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--problems", type=int, default=0, help="at most this many (0: any)")
    parser.add_argument("--seed", type=int, default=1000, help="the first problem's seed")
    parser.add_argument("--algorithms", default="", help="comma-separated (default: all)")
    parser.add_argument("--fused", action="store_true", help="also the fused epilogues")
    args = parser.parse_args(argv)
    algorithms = tuple(a for a in args.algorithms.split(",") if a) or tuple(
        sorted(registry.algorithms()))
    held = use_threads(args.threads)  # noqa: F841 - held for the run
    start, problems, checks, failed = time.monotonic(), 0, 0, 0
    while (time.monotonic() - start < 60 * args.minutes
           and (not args.problems or problems < args.problems)):
        made, lines = check_problem(args.seed + problems, algorithms, args.fused)
        checks, failed, problems = checks + made, failed + len(lines), problems + 1
        for line in lines:
            print(line, flush=True)
        if problems % 5 == 0:
            print(f"[{time.monotonic() - start:6.0f} s] {problems} problems, {checks} "
                  f"checks, {failed} failed", flush=True)
    print(f"{problems} problems, {checks} checks at {args.threads} thread(s), "
          f"{failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
