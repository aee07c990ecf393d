"""``convbench machine``: measure this host's peak FLOP/s, clock and bandwidth; store them."""

from __future__ import annotations

from pathlib import Path

import click

from convbench.errors import ConvbenchError


def _threads(text: str | None) -> list[int]:
    import os

    if not text:
        return list(range(1, (os.cpu_count() or 1) + 1))
    try:
        threads = sorted({int(t) for t in text.split(",")})
    except ValueError:
        raise ConvbenchError(f"--threads {text!r}: expected a comma-separated list of "
                             "integers, e.g. 1,2") from None
    if threads[0] < 1:
        raise ConvbenchError(f"--threads {text!r}: thread counts must be >= 1")
    return threads


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB" if nbytes >= 1000 << 10 else f"{nbytes / 1024:.3g} KiB"


def format_limits(limits: dict) -> str:
    """The limits as terminal tables: peak per width and bandwidth plateaus per level, by
    threads; then the triad bandwidth curve over working-set sizes."""
    from convbench.machine.bandwidth import LEVELS
    from convbench.machine.peak import WIDTHS
    from convbench.textable import format_table

    threads = sorted(limits["peak_gflops"], key=int)
    right = tuple(range(1, len(threads) + 1))
    header = tuple(f"{t} thread{'s' if t != '1' else ''}" for t in threads)
    rows = [("figure", *header)]
    for width in WIDTHS:
        rows.append((f"peak FP32 {width}-bit GFLOP/s",
                     *(f"{limits['peak_gflops'][t].get(width, float('nan')):.1f}"
                       for t in threads)))
    for level in LEVELS:
        by_t = limits["bandwidth_gbs"].get(level, {})
        rows.append((f"triad {level} GB/s", *(f"{by_t.get(t, float('nan')):.1f}"
                                              for t in threads)))
    curve = limits.get("bandwidth_curve_measured", limits.get("bandwidth_curve", {}))
    sizes = sorted({p[0] for points in curve.values() for p in points})
    by_size = {t: dict(map(tuple, curve.get(t, []))) for t in threads}
    curve_rows = [("working set per thread", *(f"GB/s {h}" for h in header))]
    curve_rows += [(_size(size), *(f"{by_size[t].get(size, float('nan')):.1f}"
                                   for t in threads)) for size in sizes]
    clock = limits["clock_ghz"]
    lines = [format_table(rows, right=right), "",
             f"clock {clock:.2f} GHz (measured); "
             + ", ".join(f"{w}-bit {limits['peak_gflops'][threads[0]][w] / clock:.1f} "
                         f"flop/cycle" for w in WIDTHS if w in limits["peak_gflops"][threads[0]])
             + f" on {threads[0]} thread"]
    if sizes:
        lines += ["", "triad bandwidth curve as measured (a layer's memory bound is read at "
                  "its footprint off its upper envelope):", format_table(curve_rows, right=right)]
    if "seconds" in limits:
        lines += ["", f"measured in {limits['seconds']:.1f} s ({limits.get('profile', '')} "
                  "profile)"]
    lines += [f"note: {n}" for n in limits.get("notes", [])]
    return "\n".join(lines)


@click.command("machine")
@click.option("--quick", is_flag=True, help="Shorter measurements (noisier; for smoke tests).")
@click.option("--threads", "threads_text", metavar="N,N...",
              help="Thread counts to measure [default: 1..number of CPUs].")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the limits to this JSON file instead of the per-host cache.")
def command(quick: bool, threads_text: str | None, output: Path | None) -> int:
    """Measure this host's FP32 peak (FMA, 256/512-bit), clock and triad bandwidth.

    The figures are stored per host (under ~/.cache/convbench/machine/) and recorded by
    `convbench run`, so results get a share of peak and a place on the roofline.
    """
    from convbench.machine import store
    from convbench.machine.measure import measure_machine

    threads = _threads(threads_text)
    limits = measure_machine(threads, quick=quick,
                             progress=lambda what: click.echo(f"measuring {what} ...",
                                                              err=True))
    path = store.save(limits, output)
    click.echo(f"host {limits['host']['hostname']} ({limits['host']['cpu_model']}, "
               f"{limits['host']['cpus']} CPUs){' [--quick]' if quick else ''}")
    click.echo(format_limits(limits))
    click.echo(f"\nstored in {path}")
    return 0
