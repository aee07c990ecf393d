"""Writes N synthetic runs under a root from one real results directory, for timing
``convbench history`` (issue 20's benchmark: the query over 100 results directories).

Each copy is the source directory with its own creation time and label, and every ok
case's times scaled by one log-normal factor per case and run (1% by default), with an
optional step (``--step 1.1 --step-at 60``: every case 10% slower from run 60 on).  The
files keep the source's format; only the timing columns and values change.

Usage: python tools/synthetic_history.py SOURCE_RESULTS_DIR ROOT [--runs 100]
           [--noise 0.01] [--step 1.0] [--step-at N] [--seed 0]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

TIME_COLUMNS = ("median_s", "mean_s", "stdev_s", "min_s", "max_s", "iqr_s", "ci_low_s",
                "ci_high_s", "ref_ratio", "ref_ratio_ci_low", "ref_ratio_ci_high")
COPIED = ("environment.json", "suite.yaml", "pyperf.json", "results.csv")


def write_run(source: Path, target: Path, run: int, factors: dict[str, float]) -> None:
    target.mkdir(parents=True)
    for name in COPIED:
        if (source / name).is_file():
            shutil.copy(source / name, target / name)
    table = pd.read_parquet(source / "results.parquet")
    scale = table["case_id"].map(factors).fillna(1.0).astype(float)
    for col in TIME_COLUMNS:
        table[col] = table[col] * scale
    table["gflops"] = table["gflops"] / scale
    table.to_parquet(target / "results.parquet", index=False)
    values = pd.read_parquet(source / "values.parquet")
    values["value"] = values["value"] * values["case_id"].map(factors).fillna(1.0)
    values.to_parquet(target / "values.parquet", index=False)
    manifest = json.loads((source / "manifest.json").read_text())
    created = datetime.datetime(2026, 1, 1) + datetime.timedelta(hours=run)
    manifest["created"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest["options"] = {**manifest.get("options", {}), "label": f"run-{run:03d}"}
    (target / "manifest.json").write_text(json.dumps(manifest, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--step", type=float, default=1.0)
    parser.add_argument("--step-at", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = pd.read_parquet(args.source / "results.parquet", columns=["case_id"])["case_id"]
    for run in range(1, args.runs + 1):
        step = args.step if args.step_at and run >= args.step_at else 1.0
        factors = {cid: step * float(np.exp(rng.normal(0.0, args.noise))) for cid in cases}
        write_run(args.source, args.root / f"run-{run:03d}", run, factors)
    print(f"wrote {args.runs} runs under {args.root}")


if __name__ == "__main__":
    main()
