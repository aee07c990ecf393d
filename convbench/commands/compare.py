"""``convbench compare BASELINE CURRENT``: the CI regression gate (exit 0 / 1 / 2)."""

from __future__ import annotations

import json
from pathlib import Path

import click


def _threshold(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    from convbench.compare.thresholds import parse_threshold

    return parse_threshold(value, f"--{param.name.replace('_', '-')}")


@click.command("compare")
@click.argument("runs", nargs=-1, metavar="[BASELINE] CURRENT")
@click.option("--baseline", "baseline_option", metavar="DIR|FILE|history:ROOT",
              help="The baseline, given as an option instead of the first argument. "
                   "history:ROOT gates against the last stable level of CURRENT's host in "
                   "the runs under ROOT (see convbench history).")
@click.option("--threshold", callback=_threshold,
              help="Minimum timing change that counts, e.g. 0.05 or 5%  [default: 5%]")
@click.option("--thresholds", "thresholds_file", type=click.Path(),
              help="YAML/JSON file of thresholds per suite, layer and variant (globs).")
@click.option("--instruction-threshold", callback=_threshold,
              help="Minimum change of simulated instructions per call  [default: 1%]")
@click.option("--alpha", type=click.FloatRange(0.0001, 0.5), default=0.01, show_default=True,
              help="False-alarm level of the per-variant test; the CI has level 1 - alpha.")
@click.option("--fail-on", type=click.Choice(["time", "instructions", "either"]),
              default="either", show_default=True, help="Which slowdowns fail the build.")
@click.option("--instructions-column",
              help="Column of instructions per call to compare  [default: the first of "
                   "sim_instructions, ctr_Ir, ctr_instructions present in both runs]")
@click.option("--raw", is_flag=True,
              help="Compare raw times even where both runs timed the in-run reference.")
@click.option("--confirm", is_flag=True,
              help="Re-measure variants flagged slower from the current tree; only "
                   "regressions that hold fail.")
@click.option("--format", "fmt", type=click.Choice(["text", "md", "json"]), default="text",
              show_default=True, help="Output on stdout.")
@click.option("--junit", type=click.Path(), help="Also write JUnit XML to this file.")
def command(runs: tuple[str, ...], baseline_option: str | None, threshold: float | None,
            thresholds_file: str | None,
            instruction_threshold: float | None, alpha: float, fail_on: str,
            instructions_column: str | None, raw: bool, confirm: bool, fmt: str,
            junit: str | None) -> int:
    """Compare CURRENT with BASELINE (results directories or pyperf JSON files).

    BASELINE history:ROOT is the last stable level of CURRENT's host in the runs under
    ROOT (convbench history).  A farm run's directory (run --scheduler) is compared host
    by host: two farms pair
    their hosts by name, a farm against one directory compares each host with it.

    Each variant is "slower", "faster" or "no significant change": a change counts when a
    Mann-Whitney U test and the bootstrap CI of the median ratio find it significant AND it
    is at least the threshold.  Exit 0: no regression; 1: regression; 2: usage or input
    error.
    """
    from convbench.compare import report
    from convbench.compare.confirm import confirm as confirm_flagged
    from convbench.compare.gate import compare_runs
    from convbench.compare.thresholds import Thresholds
    from convbench.errors import ConvbenchError
    from convbench.farm.layout import pairs

    if len(runs) != (1 if baseline_option else 2):
        raise ConvbenchError("give BASELINE and CURRENT, or --baseline BASELINE and CURRENT")
    baseline, current = (baseline_option, runs[0]) if baseline_option else runs
    thresholds = Thresholds.load(thresholds_file, time=threshold,
                                 instructions=instruction_threshold)
    formatter = {"text": report.format_text, "md": report.format_markdown,
                 "json": report.format_json}[fmt]
    # a farm directory is compared host by host (convbench.farm.layout.pairs)
    hosts = pairs(baseline, Path(current))
    outputs, failed = {}, False
    for host, base_path, cur_path in hosts:
        comparison = compare_runs(base_path, cur_path, thresholds=thresholds, alpha=alpha,
                                  instruction_column=instructions_column,
                                  use_reference=not raw)
        if fail_on == "instructions" and comparison.instruction_column is None:
            raise ConvbenchError("--fail-on instructions, but the runs do not both carry "
                                 "simulated instruction counts")
        if confirm:
            comparison = confirm_flagged(comparison)
        outputs[host] = formatter(comparison, fail_on)
        if junit:
            report.write_junit(comparison, fail_on,
                               junit if not host else f"{junit}.{host}.xml")
        failed = failed or bool(comparison.regressions(fail_on))
    if list(outputs) == [""]:
        click.echo(outputs[""])
    elif fmt == "json":
        click.echo(json.dumps({h: json.loads(text) for h, text in outputs.items()},
                              indent=2))
    else:
        for host, text in outputs.items():
            click.echo(f"== host {host} ==\n{text}")
    return 1 if failed else 0
