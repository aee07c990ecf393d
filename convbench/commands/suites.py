"""``convbench suites``: list the shipped suites."""

from __future__ import annotations

import click


@click.command("suites")
def command() -> None:
    """List the shipped suites with their layer counts and conv GFLOPs."""
    from convbench.spec.suite import load_suite, shipped_suites

    rows = [("suite", "layers", "convs", "GFLOP", "description")]
    for path in shipped_suites():
        s = load_suite(path)
        first = s.description.splitlines()[0] if s.description else ""
        rows.append((s.name, str(len(s.layers)), str(sum(la.count for la in s.layers)),
                     f"{s.total_flops / 1e9:.2f}", first[:70]))
    from convbench.textable import format_table

    click.echo(format_table(rows))
