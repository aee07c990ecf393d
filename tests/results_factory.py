"""Builds results directories in the documented format for tests of report and compare.

The values are synthetic but the files follow convbench.results.schema exactly; end-to-end
tests use real ``convbench run`` output instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from convbench import stats
from convbench.results import record, schema


def write_results(directory: Path, cases: list[dict], *, n_values: int = 10, seed: int = 0,
                  host: str = "testhost", status: str = "complete",
                  machine: dict | None = None, created: str = "2026-11-23T00:00:00Z",
                  label: str | None = None) -> Path:
    """Write a results directory; each case gives layer, algorithm, layout, median (s) and
    optionally threads, vector_width, params, spread (relative), flops, status, reason,
    layer_count, reference (the in-run reference's median, 1 ms unless given) and extra
    columns.  Statistics and derived figures (GFLOP/s, peak share
    against ``machine``'s limits) come from the record builder a real run uses.  ``created``
    and ``label`` are the manifest's (run order and name in ``convbench history``)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    rows, values = [], []
    for case in cases:
        params = case.get("params", {})
        variant = "/".join([case["algorithm"], case["layout"]]
                           + [f"{k}={v}" for k, v in sorted(params.items())])
        threads, width = case.get("threads", 1), case.get("vector_width", "auto")
        case_id = f"{case['layer']}|{variant}|t{threads}|v{width}"
        flops = case.get("flops", 2 * 10**8)
        st = case.get("status", "ok")
        row = {c: None for c in schema.COLUMNS}
        row.update(case_id=case_id, suite="test", layer=case["layer"], variant=variant,
                   algorithm=case["algorithm"], layout=case["layout"],
                   params=json.dumps(params, sort_keys=True), threads=threads,
                   vector_width=width, baseline=case.get("baseline", False),
                   descriptor=case.get("descriptor", "mb1ic64ih56oc64oh56kh3ph1"),
                   kernel_version=case.get("kernel_version", "0123456789ab"),
                   layer_count=case.get("layer_count", 1), flops=flops,
                   compulsory_bytes=case.get("compulsory_bytes", 10**6), status=st,
                   reason=case.get("reason", ""), max_abs_err=1e-6, max_rel_err=1e-5,
                   err_bound_ratio=0.1, compile_s=0.5, prepare_s=1e-3, workspace_bytes=0,
                   packed_weight_bytes=0, info="{}", loops=10, n_values=0)
        if st == "ok":
            med = case["median"]
            vals = med * (1 + case.get("spread", 0.02) * rng.standard_normal(n_values))
            refs = case.get("reference", 1e-3) * (1 + 0.01 * rng.standard_normal(n_values))
            row.update(stats.summarize(vals), n_values=n_values,
                       **stats.ratio_summary(vals, refs))
            row.update(record.derived(flops, row["compulsory_bytes"], row["median_s"],
                                      threads, width, machine))
            row.update(processes=1, process_spread=float("nan"),
                       compile_width=width if width != "auto" else "llvm-default")
            values += [{"case_id": case_id, "process": 0, "round": i, "value": v,
                        "ref_value": r, "loops": 10}
                       for i, (v, r) in enumerate(zip(vals, refs, strict=True))]
        row.update(case.get("extra", {}))
        rows.append(row)
    table = pd.DataFrame(rows)
    for col, (dtype, _) in schema.COLUMNS.items():
        if dtype in ("int64", "float64"):
            table[col] = pd.to_numeric(table[col]).astype("float64" if dtype == "float64"
                                                          else "Int64")
    table.to_parquet(directory / schema.RESULTS_PARQUET)
    table.to_csv(directory / schema.RESULTS_CSV, index=False)
    pd.DataFrame(values, columns=list(schema.VALUE_COLUMNS)).to_parquet(
        directory / schema.VALUES_PARQUET)
    (directory / schema.MANIFEST).write_text(json.dumps({
        "format_version": schema.FORMAT_VERSION, "suite": "test", "status": status,
        "created": created, "planned": [r["case_id"] for r in rows],
        "options": {"label": label} if label else {}}))
    environment = {"host": host, "cpu_model": "Test CPU", "cores": 2}
    if machine is not None:
        environment["machine"] = machine
    (directory / schema.ENVIRONMENT_JSON).write_text(json.dumps(environment))
    return directory
