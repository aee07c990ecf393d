"""``convbench report``: an HTML (or Markdown, or CSV) report of one or several runs."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("results", nargs=-1, required=True,
                type=click.Path(path_type=Path, file_okay=False))
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False),
              help="Output directory [default: reports/<run names>/].")
@click.option("--format", "fmt", type=click.Choice(["html", "md", "csv"]), default="html",
              show_default=True, help="index.html with PNGs, report.md with PNGs, or CSVs.")
@click.option("--history", type=click.Path(path_type=Path, file_okay=False),
              help="Add a trend section: the steps convbench history finds in the runs "
                   "under this root, with a figure of the series they are in.")
def command(results: tuple[Path, ...], output: Path | None, fmt: str,
            history: Path | None) -> int:
    """Report on RESULTS directories written by `convbench run`; several are shown side by
    side (two hosts, before/after a change), joined on each case's identity."""
    from convbench.report.build import build_report

    path = build_report(list(results), output, fmt, history)
    click.echo(f"wrote {path}")
    return 0
