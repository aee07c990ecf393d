"""Synthetic runs for the report tests (schema-conformant, via results_factory)."""

from __future__ import annotations

from pathlib import Path

from tests.results_factory import write_results

EVIL = "<script>alert(1)</script>"
LAYERS = (("conv1", 2 * 10**8, 1), (EVIL, 4 * 10**8, 3))


def sample_cases(scale: float = 1.0, counters: bool = True, noise: float = 0.0
                 ) -> list[dict]:
    """Two layers (one with a hostile name) x direct, im2col (tile grid), blocked (2
    numeric params), a library baseline, 1 and 2 threads, plus a failure and a skip."""
    cases = []
    for li, (layer, flops, count) in enumerate(LAYERS):
        base = dict(layer=layer, flops=flops, layer_count=count,
                    compulsory_bytes=(li + 1) * 8 * 10**6 if li else 2 * 10**6)
        for threads in (1, 2):
            f = scale * (1 + li) / threads ** 0.9
            cases.append(dict(base, algorithm="direct", layout="nchw", median=40e-3 * f,
                              threads=threads))
            cases.append(dict(base, algorithm="direct", layout="nhwc", median=30e-3 * f,
                              threads=threads))
            cases.append(dict(base, algorithm="onednn", layout="nhwc", median=2e-3 * f,
                              threads=threads, baseline=True))
            for mr in (4, 8):
                for nr in (16, 32):
                    cases.append(dict(base, algorithm="blocked", layout="nchw16c",
                                      params={"ic_bn": mr, "oc_bn": nr},
                                      median=(3 + mr / 4 + nr / 32) * 1e-3 * f,
                                      threads=threads))
            cases.append(dict(base, algorithm="im2col", layout="nhwc",
                              params={"gemm": "blas"}, median=5e-3 * f, threads=threads))
        cases.append(dict(base, algorithm="im2col", layout="nchw", params={"gemm": "own"},
                          median=0, status="fail",
                          reason="max error 3.1e-2 > bound <b>1e-4</b>"))
        cases.append(dict(base, algorithm="winograd", layout="nchw", median=0,
                          status="skip", reason="stride 2 & 1x1 kernel: F(2x2,3x3) needs 3x3"))
    for i, case in enumerate(cases):  # deterministic case-to-case differences, +-noise
        case["median"] *= 1 + noise * ((i * 37 % 11) / 5 - 1)
    if counters:
        for i, case in enumerate(cases):
            if case.get("status", "ok") == "ok":
                case["extra"] = {"ipc": 1.0 + (i % 5) / 4, "l1d_miss_rate": float("nan"),
                                 "l1d_miss_rate_reason": "perf: <not supported> in VM"}
    return cases


def sample_run(directory: Path, scale: float = 1.0, host: str = "testhost",
               counters: bool = True, machine: dict | None = None, noise: float = 0.0
               ) -> Path:
    return write_results(directory, sample_cases(scale, counters, noise), host=host,
                         machine=machine)


MACHINE = {"clock_ghz": 3.6, "peak_gflops": {"1": {"256": 90.0, "512": 115.0},
                                              "2": {"256": 180.0, "512": 230.0}},
           "bandwidth_curve": {"1": [[16 << 10, 200.0], [1 << 20, 100.0], [16 << 20, 60.0],
                                     [128 << 20, 25.0]],
                               "2": [[16 << 10, 400.0], [1 << 20, 200.0], [16 << 20, 110.0],
                                     [128 << 20, 30.0]]},
           "bandwidth_gbs": {"L1": {"1": 200.0, "2": 400.0}, "L2": {"1": 100.0, "2": 200.0},
                             "L3": {"1": 60.0, "2": 110.0}, "DRAM": {"1": 25.0, "2": 30.0}}}
