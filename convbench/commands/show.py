"""``convbench show SUITE``: a suite's layer table with FLOPs, counts and network total, and
a summary of its network graph when it has one."""

from __future__ import annotations

import click

from convbench.spec.network import Network


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
    if s.graph is not None:
        for line in network_lines(s.graph):
            click.echo(line)


def network_lines(graph: Network, first: int = 6) -> list[str]:
    """A few lines on the suite's graph: ops by kind, conv occurrences, the shapes chain."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in graph.kinds().items())
    occurrences = graph.occurrences()
    head = ", ".join(f"{op.name}({', '.join(op.inputs)})" for op in graph.ops[:first])
    more = f", ... ({len(graph.ops) - first} more)" if len(graph.ops) > first else ""
    return [
        f"network: {len(graph.ops)} ops ({kinds}); {sum(occurrences.values())} conv "
        f"occurrences of {len(occurrences)} layers, each layer run count times",
        f"  shapes chain: input {graph.shape('input')} -> {graph.output} "
        f"{graph.shape(graph.output)} (mb, c, h, w)",
        f"  first ops, op(inputs): {head}{more}",
    ]
