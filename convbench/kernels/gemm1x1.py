"""1x1 convolution as a GEMM on the NCHW input where it lies, pixels in the vector lanes.

A pointwise layer (1x1, stride 1, unpadded) in NCHW is, per image, one GEMM
Y (OC x P) = W (OC x IC) @ X (IC x P), P = H x W: seed 000's NCHW mapping, A the filter
and B the input.  Here B is the input itself, neither unfolded nor packed: an MR x NR
register tile (BLIS's names: MR rows of C, NR columns) holds MR output channels of NR
neighbouring pixels and, per input channel, loads NR contiguous pixels of X's row and
broadcasts MR weights (A, packed once in build: MR channels interleaved per k), MR x NR /
lanes packed FMAs.  Every tile sums the whole reduction (IC) in registers and is written
once; the plane's last P mod NR pixels have a tile of their own, compiled in.

Why pixels in the lanes: the kernels with output channels in the lanes (nchwc, indirect,
the libraries' NCHW16c) fill them only where OC is a multiple of the vector.  On a zmm
host MobileNet V2's 24-channel projections pad to 32 (a quarter of the FMAs idle); the
pixels of a 56 x 56 plane fill every lane at any OC.  Zen 5 host, `convbench run
mobilenet_v2` with the libraries, warm, 1 / 2 threads, best of each side: block_1_project
(96 -> 24) 66.8 / 36.3 us against nchwc's 84.5 / 46.2 and ONNX Runtime's NCHW16c 89.1 /
50.1 (0.88 of peak at 1 thread against nchwc's 0.70); block_2_project (144 -> 24) 94.2 /
50.6 against 120.6 / 63.0 and 128.0 / 67.0; block_2_expand (24 -> 144, a short reduction)
99.4 / 54.1 against 105.6 / 57.1.  On smaller planes nchwc stays ahead: this kernel ran
at 0.94-0.99 of its speed at 28 x 28 and 0.51-0.92 at 14 x 14 and 7 x 7 (a 7 x 7 plane is
one tile of 48 pixels and a tail tile of 1, whose FMAs carry one lane each), and at 0.93 /
0.83 on the 16-channel expanded_conv_project (112 x 112).

Order: per image, the MR-channel panels go in runs whose packed weights fit the L2 budget
(:func:`convbench.kernels.nchwc.ocb_chunk`), each run sweeping the pixel tiles with the
panels innermost, so a tile's K x NR input is read from memory once a run and stays in L1
/ L2 while the run's panels read it.  The parallel loop runs over (run, tile, panel): a
thread takes a contiguous share of a run's tiles.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numba
import numpy as np

from convbench import host
from convbench.kernels import epilogue
from convbench.kernels._numba_support import cached_closure, closure_mode, launched_build
from convbench.kernels.base import ACTIVATIONS, Algorithm, Ints, Param, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights
from convbench.kernels.nchwc import ocb_chunk
from convbench.kernels.register_tile import MIN_CHAINS, tile_fma, tile_store, tile_zero
from convbench.spec.problem import ConvProblem

REGISTERS = host.register_file()
LANES = REGISTERS.lanes
# The grid: rows (output channels) that divide the networks' narrow layers (16, 24, 32,
# 96, 144 channels: 4, 6 or 8) by two to four registers of pixels; 8 x 64 does not fit
# 32 zmm and is skipped with the reason.  Where it won in `convbench run mobilenet_v2`
# (Zen 5 host, block_1_project, block_2_project, block_2_expand; 1 and 2 threads, warm
# and cold-weights) the fastest tile was 6 x 64, 8 x 48 or 4 x 64.
MR_GRID = (4, 6, 8)
NR_GRID = (2 * LANES, 3 * LANES, 4 * LANES)
DEFAULT_MR, DEFAULT_NR = 6, 3 * LANES
MR_BOUND, NR_BOUND = 32, 8 * LANES


@cache
def _kernel(mr: int, nr: int, tail: int, act: int = epilogue.NONE, add: bool = False,
            parallel: bool = True):
    """The kernel with the MR x NR tile, the width ``tail`` of the tile for the plane's
    last P mod NR pixels (0: none) and the epilogue compiled in; ``parallel`` False: its
    serial build, for one thread (_numba_support.launched_build)."""
    MR, NR, TAIL, ACT, ADD = mr, nr, tail, act, add
    TAIL_NR = tail if tail else 1   # no tail: never called, and nothing extra compiled

    def conv(x, wp, y, run_len):  # pragma: no cover - jitted
        n_mb, ic_len = x.shape[0], x.shape[1]
        oc_len = y.shape[1]
        plane = x.shape[2] * x.shape[3]
        panels = wp.shape[0]
        full = plane // NR
        tiles = full + (TAIL > 0)
        runs = -(-panels // run_len)
        w_panel = ic_len * MR
        for job in numba.prange(n_mb * runs * tiles * run_len):
            n, rest = job // (runs * tiles * run_len), job % (runs * tiles * run_len)
            run, within = rest // (tiles * run_len), rest % (tiles * run_len)
            tile, panel = within // run_len, run * run_len + within % run_len
            if panel >= panels:
                continue   # the last run's share past the panels
            x0 = n * ic_len * plane + tile * NR
            y0 = (n * oc_len + panel * MR) * plane + tile * NR
            w0 = panel * w_panel
            rows = min(MR, oc_len - panel * MR)
            if tile < full:
                acc = tile_zero(MR, NR)
                for k in range(ic_len):
                    tile_fma(acc, wp, w0 + k * MR, 1, x, x0 + k * plane, MR, NR)
                tile_store(acc, y, y0, plane, rows, MR, NR, ADD, ACT)
            else:
                edge = tile_zero(MR, TAIL_NR)
                for k in range(ic_len):
                    tile_fma(edge, wp, w0 + k * MR, 1, x, x0 + k * plane, MR, TAIL_NR)
                tile_store(edge, y, y0, plane, rows, MR, TAIL_NR, ADD, ACT)

    key = f"m{mr}_n{nr}_t{tail}" + epilogue.key_suffix(act, add)
    return cached_closure(closure_mode(key, parallel), parallel=parallel, fastmath=True)(conv)


def pack_weights(w: np.ndarray, mr: int) -> np.ndarray:
    """(OC, IC, 1, 1) weights as (panels, IC, MR): panel q holds output channels q * MR ..
    q * MR + MR - 1 interleaved per input channel, the last panel zero padded."""
    oc, ic = w.shape[:2]
    panels = -(-oc // mr)
    padded = np.zeros((panels * mr, ic), np.float32)
    padded[:oc] = w.reshape(oc, ic)
    return packed_weights(padded.reshape(panels, mr, ic).transpose(0, 2, 1))


class Gemm1x1NCHW(epilogue.CompiledIn, Prepared):
    """NCHW in, NCHW out; no workspace: the input is B as it lies."""

    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, mr: int, nr: int):
        refused = _applies(problem, "nchw", {"MR": mr, "NR": nr})
        if refused:
            raise ValueError(refused)
        self.p = problem
        self.mr, self.nr = mr, nr
        self.wp = pack_weights(np.asarray(w, np.float32), mr)
        self.packed_weight_bytes = self.wp.nbytes
        self.run_len = ocb_chunk(self.wp)   # panels a run: as nchwc's output blocks
        self.tail = (problem.oh * problem.ow) % nr
        self.kernel = self._compiled()

    def _compiled(self):
        return launched_build(lambda parallel: _kernel(self.mr, self.nr, self.tail, self.act,
                                                       self.add, parallel))

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        # the kernel reads and writes through flat offsets
        for name, a, shape in (("x", x, p.input_shape), ("y", y, p.output_shape)):
            if not (a.flags.c_contiguous and a.dtype == np.float32 and a.shape == shape):
                raise ValueError(f"{name} must be a C-contiguous float32 NCHW array of "
                                 f"shape {shape}")
        self.kernel(x, self.wp, y, self.run_len)

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernel,)

    def info(self) -> dict[str, ParamValue]:
        return {"panels": int(self.wp.shape[0]), "panels_per_run": self.run_len,
                "tail_pixels": self.tail}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]) -> str | None:
    if not problem.is_pointwise or problem.g != 1:
        return "a GEMM on the input as it lies: 1x1, stride 1, unpadded, groups 1 only"
    mr, nr = int(params.get("MR", DEFAULT_MR)), int(params.get("NR", DEFAULT_NR))
    return REGISTERS.tile_unfit(mr, nr)


def work_ratio(problem: ConvProblem, params: Mapping[str, ParamValue]) -> float:
    """Multiply-adds computed per one needed: output channels zero padded to whole MR
    panels (the pixels are not: the plane's tail has a tile of its own)."""
    mr = int(params["MR"])
    return -(-problem.oc // mr) * mr / problem.oc


def tuning_space(problem: ConvProblem) -> list[dict[str, ParamValue]]:
    """What ``convbench tune`` measures for a layer: every MR x NR that fits the register
    file with at least :data:`MIN_CHAINS` accumulators, NR whole registers up to eight,
    MR up to 16 -- the tiles whose MR divides OC first, then by fewer padded rows, then
    more accumulators.  A layer the kernel does not run gets the default alone, which the
    tuner counts as not applicable with :func:`_applies`'s reason."""
    default: dict[str, ParamValue] = {"MR": DEFAULT_MR, "NR": DEFAULT_NR}
    if not problem.is_pointwise or problem.g != 1:
        return [default]
    tiles = [{"MR": mr, "NR": k * LANES} for k in range(1, 9) for mr in range(1, 17)
             if REGISTERS.tile_unfit(mr, k * LANES) is None
             and REGISTERS.tile_accumulators(mr, k * LANES) >= MIN_CHAINS]
    tiles.sort(key=lambda c: (work_ratio(problem, c),
                              -REGISTERS.tile_accumulators(int(c["MR"]), int(c["NR"]))))
    return tiles or [default]


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return Gemm1x1NCHW(problem, w, int(params["MR"]), int(params["NR"]))


ALGORITHMS = [
    Algorithm(
        name="gemm1x1",
        title="1x1 GEMM on the NCHW input in place (pixels in the lanes)",
        source="seed 000 (im2col's NCHW GEMM: A the filter, B the input); BLIS's MR x NR "
               "register tile, B read unpacked",
        layouts=("nchw",),
        build=_build,
        epilogues=lambda problem, layout: ACTIVATIONS | {"add"},
        params=(
            Param("MR", MR_GRID, DEFAULT_MR, "output channels per register tile (rows)",
                  allowed=Ints(1, MR_BOUND)),
            Param("NR", NR_GRID, DEFAULT_NR, "pixels per register tile (vector lanes)",
                  allowed=Ints(1, NR_BOUND)),
        ),
        applies=_applies,
        tuning_space=tuning_space,
        work_ratio=work_ratio,
        notes="Pointwise layers (1x1, stride 1, unpadded, groups 1) only. Output channels "
              "zero padded to whole MR panels; the plane's tail has a tile of its own.",
    )
]
