"""Packed GEMM: odd shapes against float64, blocking choices, vectorised micro-kernels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench import host
from convbench.kernels.asm import dispatcher_asm, fp_profile, hot_block_spills
from convbench.kernels.gemm import (
    BLOCKING_PARAMS,
    MR_CHOICES,
    NR_CHOICES,
    REGISTERS,
    Blocking,
    block_panels,
    blocking_from,
    blocking_unused,
    micro_kernels,
    sgemm,
    tile_unfit,
)
from convbench.kernels.reference import EPS32, TOLERANCE_C
from tests.kernels.gemm_family_support import check_variant, conv_problems

BLOCKINGS = [
    Blocking(),                               # the default 5 x 64 tile
    Blocking(MR=8, NR=48, MC=96),
    Blocking(MR=4, NR=64, MC=12, KC=7, NC=128),   # tiny blocks: many KC, MC and NC edges
    Blocking(MR=6, NR=48, MC=30, KC=100, NC=96),
]


def within_bound(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """The reference's tolerance rule applied to a GEMM: sqrt(K)-scaled float32 error."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = TOLERANCE_C * EPS32 * np.sqrt(max(a.shape[1], 1)) * (np.abs(a64) @ np.abs(b64))
    return bool(np.all(np.abs(c - a64 @ b64) <= bound + 1e-30))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 140), k=st.integers(1, 300),
       which=st.integers(0, len(BLOCKINGS) - 1), seed=st.integers(0, 2**16))
def test_sgemm_matches_float64_on_odd_shapes(m, n, k, which, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = sgemm(a, b, blocking=BLOCKINGS[which])
    assert within_bound(c, a, b)


def test_accumulate_adds_to_c_and_k0_zeroes_it():
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (9, 33)).astype(np.float32)
    b = rng.uniform(-1, 1, (33, 50)).astype(np.float32)
    c = np.ones((9, 50), np.float32)
    sgemm(a, b, c, accumulate=True)
    assert within_bound(c - 1, a, b)
    sgemm(a[:, :0], b[:0], c)
    assert not c.any()


def test_a_missing_reduction_term_fails_the_same_bound():
    """The check is sharp: dropping the last k (a classic edge bug) is caught."""
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (13, 200)).astype(np.float32)
    b = rng.uniform(-1, 1, (200, 61)).astype(np.float32)
    broken = sgemm(a[:, :-1], b[:-1])
    assert not within_bound(broken, a, b)


def test_rejects_mismatched_or_strided_operands():
    a = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="inner"):
        sgemm(a, np.zeros((6, 3), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        sgemm(a, np.zeros((5, 6), np.float32), np.zeros((6, 4), np.float32).T)


@pytest.mark.skipif(host.detect_cpu().arch != "x86_64", reason="reads x86 assembly")
@pytest.mark.parametrize("nr", NR_CHOICES)
def test_widest_micro_tile_per_nr_is_packed_and_never_spills(nr):
    """BRIEF.md: numba silently falls back to scalar code; here the assembly of the widest
    MR that fits this host's registers at each NR must show MR x (NR / lanes) packed FMAs
    in its loop, no scalar FMA and no vector read or written on the stack there (the
    numba-loop micro-kernel spilled 2 x 48 and went to xmm at 6 x 16 on the AVX2 host)."""
    mr = max(m for m in MR_CHOICES if tile_unfit(m, nr) is None)
    rng = np.random.default_rng(nr)
    a = rng.standard_normal((2 * mr + 1, 37)).astype(np.float32)
    b = rng.standard_normal((37, nr + 3)).astype(np.float32)
    c = sgemm(a, b, blocking=Blocking(MR=mr, NR=nr))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    asm = dispatcher_asm(micro_kernels(mr, nr).macro)
    profile = fp_profile(asm)
    assert profile.vectorised and profile.scalar_fma == 0, profile
    fmas, stack = hot_block_spills(asm)
    assert fmas >= mr * REGISTERS.vectors(nr) and stack == 0, (mr, nr, fmas, stack)


def test_blocking_params_map_to_blocking_and_only_tune_own():
    defaults = {p.name: p.default for p in BLOCKING_PARAMS}
    assert blocking_from(defaults) == Blocking()
    assert blocking_from({"KC": 64}).KC == 64
    assert blocking_unused(defaults) is None
    assert "KC" in blocking_unused({"KC": 64})


@settings(max_examples=12, deadline=None)
@given(problem=conv_problems(), layout=st.sampled_from(["nchw", "nhwc"]))
def test_im2col_own_gemm_matches_reference(problem, layout):
    assert check_variant(problem, "im2col", layout, {"gemm": "own"}) == "ok"


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_im2col_own_gemm_grouped_and_pointwise(layout):
    from convbench.spec.problem import ConvProblem
    grouped = ConvProblem.make(g=3, mb=2, ic=9, oc=12, ih=7, kh=3, ph=1, sh=2)
    pointwise = ConvProblem.make(ic=19, oc=53, ih=9, iw=5, kh=1)
    for problem in (grouped, pointwise):
        assert check_variant(problem, "im2col", layout, {"gemm": "own"}) == "ok"


_TILE_SCRIPT = """
import sys, numpy as np
from convbench.kernels.gemm import Blocking, sgemm
rng = np.random.default_rng(0)
a = rng.standard_normal((37, 70), dtype=np.float32)
b = rng.standard_normal((70, 130), dtype=np.float32)
for mr in map(int, sys.argv[1].split(",")):
    for nr in (48, 64):
        c = sgemm(a, b, blocking=Blocking(MR=mr, NR=nr, MC=4 * mr, KC=32, NC=2 * nr))
        assert np.abs(c - a @ b).max() < 1e-3, f"{mr}x{nr} computed a wrong product"
"""


def test_tiles_cached_by_different_processes_stay_apart(tmp_path):
    """Two tiles compiled into numba's cache by two processes, then loaded together: each
    must run its own code (same-named cached symbols once made 6x48 give wrong sums)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for tiles in ("4", "5", "6,8", "4,5,6,8"):   # the grouping that first showed it
        proc = subprocess.run([sys.executable, "-c", _TILE_SCRIPT, tiles], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize(("panels", "mr", "mc", "per_block"), [
    (33, 6, 100, 11),     # 14 x 14 = 196 rows: 16 + 16 + 1 panels before, 11 + 11 + 11 now
    (131, 6, 100, 15),    # 28 x 28 = 784 rows: nine blocks, 15 x 8 + 11
    (523, 6, 100, 16),    # 56 x 56: 33 blocks of 16 (one of 11), as before
    (9, 6, 100, 9),       # 7 x 7: one block
    (10, 6, 4, 1),        # MC below MR: one panel per block
])
def test_block_panels_even_out_the_mc_blocks(panels, mr, mc, per_block):
    assert block_panels(panels, mr, mc) == per_block


@settings(max_examples=200, deadline=None)
@given(panels=st.integers(1, 2000), mr=st.sampled_from(MR_CHOICES), mc=st.integers(1, 512))
def test_block_panels_keep_the_fewest_blocks_of_at_most_mc_rows(panels, mr, mc):
    most = max(1, mc // mr)
    per = block_panels(panels, mr, mc)
    blocks = -(-panels // per)
    assert per <= most                        # a block still fits MC rows (L2)
    assert blocks == -(-panels // most)       # no more blocks (tasks) than before
    last = panels - (blocks - 1) * per
    assert 0 < last <= per and per - last < blocks   # within a panel a block of the rest
