"""``convbench show SUITE``: a suite's layer table with FLOPs, counts and network total."""

from __future__ import annotations

import click


@click.command("show")
@click.argument("suite")
def command(suite: str) -> None:
    """Print SUITE's layers (a path or a shipped suite's name) with FLOPs and counts."""
    from convbench.spec.suite import load_suite
    from convbench.textable import format_table

    s = load_suite(suite)
    rows = [("#", "layer", "descriptor", "count", "MFLOP", "x count", "AI flop/B")]
    for i, layer in enumerate(s.layers):
        p = layer.problem
        rows.append((str(i), p.name, str(p.replace(name="")), str(layer.count),
                     f"{p.flops / 1e6:.1f}", f"{layer.count * p.flops / 1e6:.1f}",
                     f"{p.arithmetic_intensity:.1f}"))
    click.echo(f"{s.name}: {s.description.splitlines()[0]}")
    if s.network:
        click.echo(f"network: {s.network}")
    click.echo(format_table(rows, right=(0, 3, 4, 5, 6)))
    total = f"total: {len(s.layers)} distinct layers, {sum(la.count for la in s.layers)} convs, "
    total += f"{s.total_macs / 1e9:.3f} GMAC ({s.total_flops / 1e9:.3f} GFLOP)"
    if s.reference:
        dev = (s.total_macs - s.reference.macs) / s.reference.macs
        total += f"; reference {s.reference.macs / 1e9:.3f} GMAC ({dev:+.1%}), "
        total += s.reference.source
    click.echo(total)
