"""Writes the aarch64 assembly samples under tests/data/asm/ that test the static profile.

Owns one job: compile two small kernels with numba on an aarch64 machine (or in the
emulated root of tools/arm64.sh) and keep the hottest basic block of each -- the block
with the most FP instructions -- with a header saying where it came from:

- ``aarch64_nchwc_6x16.s``: convbench's NCHW[x]c register tile at reg_n x oc_bn = 6 x 16
  (the 4-lane default), packed ``fmla v.4s`` (by element and by vector);
- ``aarch64_scalar_recurrence.s``: a loop-carried ``s = s * x[i] + y[i]`` with FP
  contraction allowed, which cannot vectorise and compiles to scalar ``fmadd``.

Usage, inside the root (the checkout is copied to /opt/convbench there):
    tools/arm64.sh --exec python /opt/convbench/tools/aarch64_asm_samples.py OUT_DIR
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

import numba
import numpy as np

_LABEL = re.compile(r"^\.?[\w$.]+:")
_FP = re.compile(r"^\s*f(?:n?ml[as]|n?madd|n?msub|mul|add|sub)\s")


def hottest_block(asm: str) -> str:
    """The basic block (from its label to the next one) with the most FP instructions."""
    blocks: list[list[str]] = [[]]
    for line in asm.splitlines():
        if _LABEL.match(line):
            blocks.append([])
        blocks[-1].append(line)
    best = max(blocks, key=lambda b: sum(bool(_FP.match(x)) for x in b))
    return "\n".join(best) + "\n"


def header(what: str) -> str:
    cpu = os.environ.get("NUMBA_CPU_NAME") or "host"
    return (f"// {what}\n"
            f"// numba {numba.__version__}, llvmlite "
            f"{__import__('llvmlite').__version__}, {platform.machine()}, "
            f"target CPU {cpu} (QEMU_CPU={os.environ.get('QEMU_CPU', '-')})\n"
            "// written by tools/aarch64_asm_samples.py (the hottest basic block of "
            "inspect_asm); do not edit\n")


@numba.njit(fastmath={"contract"})
def _recurrence(x, y):  # pragma: no cover - jitted
    s = np.float32(0.0)
    for i in range(x.shape[0]):
        s = s * x[i] + y[i]
    return s


def main(out: Path) -> None:
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import prepare
    from convbench.kernels.asm import dispatcher_asm
    from convbench.kernels.base import Variant
    from convbench.spec.descriptor import parse_descriptor

    out.mkdir(parents=True, exist_ok=True)
    problem = parse_descriptor("mb1ic16ih8oc32oh8kh3ph1")
    x, w = make_inputs(problem)
    variant = Variant.of("nchwc", "nchwxc", {"ic_bn": 16, "oc_bn": 16, "reg_n": 6,
                                             "unroll_ker": False})
    run = prepare(problem, variant, x, w)
    run.prepared.run(run.x, run.y)
    (out / "aarch64_nchwc_6x16.s").write_text(
        header(f"convbench nchwc tile kernel, {variant.id}, on {problem}")
        + hottest_block(dispatcher_asm(run.prepared.kernel)))
    v = np.ones(8, np.float32)
    _recurrence(v, v)
    (out / "aarch64_scalar_recurrence.s").write_text(
        header("s = s * x[i] + y[i] over float32 arrays, fastmath={'contract'}")
        + hottest_block(dispatcher_asm(_recurrence)))
    print(f"wrote {out}/aarch64_nchwc_6x16.s and aarch64_scalar_recurrence.s")


if __name__ == "__main__":
    if platform.machine() != "aarch64" or len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} OUT_DIR, on aarch64 (tools/arm64.sh --exec ...); "
              f"this is {platform.machine()}", file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1]))
