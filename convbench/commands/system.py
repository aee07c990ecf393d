"""``convbench system``: the host's state that moves benchmark numbers, with advice."""

from __future__ import annotations

import click


@click.command("system")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--window", type=click.FloatRange(min=0.1, max=60), default=None,
              help="Seconds over which CPU use and steal are measured (default 2).")
def command(as_json: bool, window: float | None) -> None:
    """Check the frequency governor, turbo, ASLR, SMT siblings, isolated CPUs, load, CPU use
    by others and hypervisor steal (measured now), perf_event_paranoid, the NMI watchdog and
    numba's threading layer: each with its value, a verdict (ok / warning / unknown) and
    advice.  `convbench run` records the same checks in environment.json."""
    from convbench.harness import system

    checks = system.check_all(window_s=window or system.COMMAND_WINDOW_S)
    if as_json:
        import json

        click.echo(json.dumps(system.to_json(checks), indent=1))
    else:
        click.echo(system.format_checks(checks))
