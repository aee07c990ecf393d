"""``convbench transforms``: time the layout transforms a suite's network may pay."""

from __future__ import annotations

import time
from pathlib import Path

import click


@click.command("transforms")
@click.argument("suite")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Directory for transforms.parquet, a run's results directory or a new "
                   "one (default results/<suite>-transforms-<UTC timestamp>).")
@click.option("--threads", metavar="N[,N...]", help="Override sweep.threads.")
@click.option("--layouts", metavar="L[,L...]",
              help="Layouts to convert between (default: nchw, nhwc and every layout a "
                   "variant of the suite's sweep reads or writes).")
@click.option("--min-time", type=float, help="Override timing.min_time (s per value).")
@click.option("--values", "n_values", type=click.IntRange(min=3),
              help="Override timing.values.")
@click.option("--processes", type=click.IntRange(min=1), help="Override timing.processes.")
@click.option("--cpus", metavar="LIST", help="CPUs the workers are pinned to (as for run).")
def command(suite: str, output: Path | None, threads: str | None, layouts: str | None,
            min_time: float | None, n_values: int | None, processes: int | None,
            cpus: str | None) -> int:
    """Time every transform between the layouts in use on every conv input and output
    tensor shape of SUITE, round-robin per shape with the in-run reference, after checking
    each against numpy's transpose; writes transforms.parquet."""
    from convbench.commands.run import _cpu_list, _thread_list
    from convbench.errors import ConvbenchError
    from convbench.harness import transform_run
    from convbench.kernels import transforms
    from convbench.spec.suite import load_suite

    loaded = load_suite(suite)
    chosen = tuple(w.strip() for w in layouts.split(",")) if layouts else ()
    for layout in chosen:
        try:
            transforms.block_of(layout, 1)
        except ValueError as exc:
            raise ConvbenchError(f"--layouts: {exc}") from None
    timing = transform_run.with_timing(loaded.sweep.timing, {
        "min_time": min_time, "values": n_values, "processes": processes})
    frame = transform_run.measure(loaded, _thread_list(threads), chosen, timing,
                                  cpus=_cpu_list(cpus))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    directory = output or Path("results") / f"{loaded.name}-transforms-{stamp}"
    path = transform_run.write(frame, directory)
    ok = frame[frame.status == "ok"]
    shapes = len(ok[list(transform_run.SHAPE_COLUMNS)].drop_duplicates())
    click.echo(f"{len(ok)} transforms timed on {shapes} tensor shapes "
               f"({len(frame) - len(ok)} not timed); median of medians "
               f"{ok.median_s.median() * 1e6:.1f} us")
    click.echo(f"transforms: {path}")
    return 1 if len(ok) < len(frame) else 0
