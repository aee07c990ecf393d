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
@click.option("--records", type=click.Path(path_type=Path),
              help="Tuning records (convbench tune): on each tensor shape, time the "
                   "transforms between nchw, nhwc and the layouts their variants read or "
                   "write there (joined over the shapes a pool links): what convbench plan "
                   "can ask for.")
@click.option("--within", type=click.FloatRange(min=1.0), metavar="F",
              help="With --records: only the layouts of variants whose median is within F x "
                   "of their layer's fastest (e.g. 1.1; the plan then leaves the others out, "
                   "saying so).")
@click.option("--min-time", type=float, help="Override timing.min_time (s per value).")
@click.option("--values", "n_values", type=click.IntRange(min=3),
              help="Override timing.values.")
@click.option("--processes", type=click.IntRange(min=1), help="Override timing.processes.")
@click.option("--cpus", metavar="LIST", help="CPUs the workers are pinned to (as for run).")
def command(suite: str, output: Path | None, threads: str | None, layouts: str | None,
            records: Path | None, within: float | None, min_time: float | None,
            n_values: int | None, processes: int | None, cpus: str | None) -> int:
    """Time every transform between the layouts in use on every conv input and output
    tensor shape of SUITE, round-robin per shape with the in-run reference, after checking
    each against numpy's transpose; and every glue op of SUITE's network (relu, pools, add)
    in each of those layouts, checked against the float64 reference op.  Writes
    transforms.parquet and glue.parquet, what convbench plan adds to the convs' times."""
    from convbench.commands.run import _cpu_list, _thread_list
    from convbench.errors import ConvbenchError
    from convbench.harness import transform_run
    from convbench.kernels import transforms
    from convbench.spec.suite import load_suite

    loaded = load_suite(suite)
    if layouts and records:
        raise ConvbenchError("give the layouts as --layouts or --records, not both")
    if within is not None and not records:
        raise ConvbenchError("--within picks among tuning records: give --records FILE")
    chosen = tuple(w.strip() for w in layouts.split(",")) if layouts else ()
    by_shape = None
    if records:
        chosen = transform_run.record_layouts(records, within)
        by_shape = transform_run.shape_layouts(loaded, records, within)
        pairs = sum(len(here) * (len(here) - 1) for here in by_shape.values())
        every = len(by_shape) * len(chosen) * (len(chosen) - 1)
        click.echo(f"layouts: {', '.join(chosen)}; {pairs} transforms on {len(by_shape)} "
                   f"tensor shapes, each shape's pairs among the layouts read or written "
                   f"there (every pair on every shape: {every})")
    for layout in chosen:
        try:
            transforms.block_of(layout, 1)
        except ValueError as exc:
            raise ConvbenchError(f"--layouts: {exc}") from None
    timing = transform_run.with_timing(loaded.sweep.timing, {
        "min_time": min_time, "values": n_values, "processes": processes})
    measured = transform_run.measure(loaded, _thread_list(threads), chosen, timing,
                                     cpus=_cpu_list(cpus), by_shape=by_shape)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    directory = output or Path("results") / f"{loaded.name}-transforms-{stamp}"
    transform_run.write(measured, directory)
    frame, glue = measured.transforms, measured.glue
    ok = frame[frame.status == "ok"]
    shapes = len(ok[list(transform_run.SHAPE_COLUMNS)].drop_duplicates())
    medians = ", ".join(f"{mode} {ok[ok.cache == mode].median_s.median() * 1e6:.1f} us"
                        for mode in sorted(set(ok.cache)))
    click.echo(f"{len(ok)} transforms timed on {shapes} tensor shapes x "
               f"{frame.cache.nunique()} cache modes ({len(frame) - len(ok)} not timed); "
               f"median of medians {medians or '-'}")
    glue_ok = glue[glue.status == "ok"]
    if len(glue):
        keys = len(glue_ok[list(transform_run.GLUE_KEY_COLUMNS)].drop_duplicates())
        click.echo(f"{len(glue_ok)} glue ops timed ({keys} distinct ops of the network x "
                   f"{glue.layout.nunique()} layouts x {glue.cache.nunique()} cache modes; "
                   f"{len(glue) - len(glue_ok)} not timed)")
    else:
        click.echo("no glue ops timed: the suite has no network graph")
    click.echo(f"transforms: {directory / transform_run.TRANSFORMS_FILE}")
    if len(glue):
        click.echo(f"glue: {directory / transform_run.GLUE_FILE}")
    failed = len(ok) < len(frame) or len(glue_ok) < len(glue)
    return 1 if failed else 0
