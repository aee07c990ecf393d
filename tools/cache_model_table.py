"""Tabulates simulated cache counts by cache model: layer x variant x model -> miss rates.

Owns one job: read the results directories of ``convbench run --counters sim
--cache-model NAME`` runs (one per model, or several models mixed) and print one table
that sets the models side by side, for comparing tile settings across caches (issue 21,
item 4).  The counts are per kernel call, as the runs recorded them (with D1mr/D1mw the D1
read/write misses, DLmr/DLmw the LL's, Dr/Dw the data reads/writes):

- D1 miss rate = (D1mr + D1mw) / (Dr + Dw)          (the rows' ``l1d_miss_rate``)
- LL miss rate = (DLmr + DLmw) / (D1mr + D1mw)      (``llc_miss_rate``: of the D1 misses)
- LL global    = (DLmr + DLmw) / (Dr + Dw)          (``sim_ll_global_miss_rate``)

Instructions (Ir) do not depend on the cache model; the wide table shows one figure per
row and says when the runs' figures for it differ.

Usage: python tools/cache_model_table.py RESULTS_DIR... [--long] [--csv]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from convbench.errors import ConvbenchError
from convbench.report.text import markdown_table
from convbench.results.store import load

COUNTS = ["sim_ir", "sim_dr", "sim_dw", "sim_d1mr", "sim_d1mw", "sim_dlmr", "sim_dlmw"]


def counted_rows(paths: list[Path]) -> pd.DataFrame:
    """The ok rows with simulated counts of every directory, with ``setting``: the
    parameters that tell the variants of one algorithm apart (``KC=64 MC=20``)."""
    tables = []
    for path in paths:
        table = load(path).table
        if "sim_ir" not in table:
            raise ConvbenchError(f"{path}: no simulated counts (run with --counters sim)")
        tables.append(table[(table["status"] == "ok") & table["sim_ir"].notna()])
    rows = pd.concat(tables, ignore_index=True)
    twice = rows.duplicated(["case_id", "cache_model"])
    if twice.any():
        first = rows[twice].iloc[0]
        raise ConvbenchError(f"{first['case_id']} under {first['cache_model']} is in two of "
                             f"the directories: pass each model's run once")
    params = [json.loads(p) for p in rows["params"]]
    varying = sorted({k for p in params for k in p
                      if len({json.dumps(q.get(k)) for q in params}) > 1})
    rows["setting"] = [" ".join(f"{k}={p.get(k)}" for k in varying) or variant
                       for p, variant in zip(params, rows["variant"], strict=True)]
    rows["d1_misses"] = rows["sim_d1mr"] + rows["sim_d1mw"]
    rows["ll_misses"] = rows["sim_dlmr"] + rows["sim_dlmw"]
    rows["data_refs"] = rows["sim_dr"] + rows["sim_dw"]
    return rows


def long_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per layer, setting and model, every figure per call."""
    out = rows[["layer", "setting", "cache_model", "sim_ir", "data_refs", "d1_misses",
                "ll_misses", "l1d_miss_rate", "llc_miss_rate", "sim_ll_global_miss_rate"]]
    return out.rename(columns={"cache_model": "model", "sim_ir": "instructions",
                               "l1d_miss_rate": "D1 miss rate",
                               "llc_miss_rate": "LL miss rate",
                               "sim_ll_global_miss_rate": "LL global"})


def wide_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per layer and setting: instructions, then per model the D1 and LL miss
    rates and the LL misses per call."""
    models = list(dict.fromkeys(rows["cache_model"]))
    out = []
    for (layer, setting), group in rows.groupby(["layer", "setting"], sort=False):
        ir = group["sim_ir"]
        spread = (ir.max() - ir.min()) / ir.min()
        line = {"layer": layer, "setting": setting,
                "instructions (M)": f"{ir.iloc[0] / 1e6:.2f}"
                + (f" (runs differ by {spread:.1e})" if spread else "")}
        by_model = group.set_index("cache_model")
        for model in models:
            has = model in by_model.index
            line[f"D1 {model}"] = _pct(by_model.at[model, "l1d_miss_rate"]) if has else ""
            line[f"LL {model}"] = _pct(by_model.at[model, "llc_miss_rate"]) if has else ""
            # the LL rate's denominator is the D1 misses, which the setting moves too
            line[f"LL misses {model}"] = (f"{by_model.at[model, 'll_misses'] / 1e3:.1f}k"
                                          if has else "")
        out.append(line)
    return pd.DataFrame(out)


def _pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results directories")
    parser.add_argument("--long", action="store_true",
                        help="one row per layer, setting and model with the miss counts")
    parser.add_argument("--csv", action="store_true", help="CSV instead of Markdown")
    args = parser.parse_args(argv)
    try:
        rows = counted_rows(args.results)
    except ConvbenchError as exc:
        print(f"cache_model_table: {exc}", file=sys.stderr)
        return 2
    table = long_table(rows) if args.long else wide_table(rows)
    sys.stdout.write(table.to_csv(index=False) if args.csv else markdown_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
