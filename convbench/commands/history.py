"""``convbench history ROOT``: every run under ROOT as series, and the steps in them."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("history")
@click.argument("root", type=click.Path(path_type=Path, file_okay=False))
@click.option("--engine", type=click.Choice(["auto", "duckdb", "pandas"]), default="auto",
              show_default=True, help="Read the Parquet files with DuckDB (pip install "
                                      "'convbench[history]') or pandas; auto: DuckDB when "
                                      "installed.")
@click.option("--penalty", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Step penalty in noise widths x ln(runs) [default: 4, "
                   "convbench/history/steps.py says why].")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the whole history table (one row per case per run) here.")
def command(root: Path, engine: str, penalty: float | None, csv_path: Path | None) -> int:
    """Read every complete results directory under ROOT (farm hosts included) as one table:
    per case, host fingerprint and cache mode, the reference-normalised median in run order
    (runs labelled by --label or their git commit), and report the steps found in each
    series.  Exit 0 whether or not steps were found."""
    import time

    from convbench.history import steps, table, trends
    from convbench.history.runs import find_runs
    from convbench.textable import format_table

    started = time.perf_counter()
    runs = find_runs(root)
    frame = table.history_table(runs, engine)
    read_s = time.perf_counter() - started
    penalty = steps.PENALTY if penalty is None else penalty
    found = trends.find_steps(frame, penalty)
    n_series = sum(1 for _ in trends.series(frame))
    hosts = frame["fingerprint"].nunique()
    click.echo(f"{root}: {len(runs)} runs ({runs[0].label} .. {runs[-1].label}), {hosts} "
               f"host(s), {n_series} series; read with {table.engine_for(engine)} in "
               f"{read_s:.2f} s")
    if csv_path is not None:
        from convbench.report.text import write_csv

        write_csv(frame, csv_path)
    if found.empty:
        click.echo(f"no step in {n_series} series (penalty {penalty:g} noise widths x "
                   "ln(runs))")
        return 0
    rows = [("host", "cache", "layer", "variant", "t", "v", "run", "label", "before",
             "after", "ratio")]
    rows += [(r.fingerprint, r.cache, r.layer, r.variant, str(r.threads), r.vector_width,
              str(r.run), r.label, f"{r.before:.4g}", f"{r.after:.4g}", f"{r.ratio:.3f}")
             for r in found.itertuples(index=False)]
    click.echo(format_table(rows, right=(6, 8, 9, 10)))
    click.echo(f"{len(found)} step(s) in {n_series} series; before/after: the level's "
               "median of value / in-run reference; ratio > 1: slower")
    return 0
