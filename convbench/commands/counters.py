"""``convbench counters``: what this machine can count (perf events, paranoid, valgrind)."""

from __future__ import annotations

import click


@click.command("counters")
@click.option("--events", "events_", default="",
              help="Comma-separated overrides: role=event, fp:event*ops, or extra events.")
def command(events_: str) -> None:
    """List the counter backends available here and each event's support, with reasons."""
    from convbench.harness.counters import events, parse, perf, sim, sim_cpu
    from convbench.host import detect_cpu

    cpu = detect_cpu()
    overrides = [e for e in events_.split(",") if e.strip()]
    try:
        emap = events.with_overrides(events.host_event_map(), overrides)
    except ValueError as e:
        from convbench.errors import ConvbenchError

        raise ConvbenchError(str(e)) from e
    peak = events.host_peak_spec(cpu)
    click.echo(f"cpu: {cpu.vendor} family {cpu.family:#x} model {cpu.model:#x} "
               f"({cpu.model_name or 'no model name'})")
    click.echo(f"event map: {emap.family}; peak FP32 ops/cycle/core: "
               f"{peak.fp32_ops_per_cycle:g} ({peak.vector_bits}-bit, {peak.fma_units} FMA "
               f"units{f', {peak.datapath_bits}-bit datapath' if peak.datapath_bits else ''})")
    click.echo(f"perf_event_paranoid: {parse.read_paranoid()}")
    status = perf.probe(emap.events)
    roles = {ev: role for role, ev in emap.roles.items()}
    roles.update({ev: "fp" for ev in emap.fp_events})
    roles.update({ev: "software" for ev in events.SOFTWARE_EVENTS})
    width = max(len(e) for e in emap.events)
    click.echo("perf events:")
    for ev in emap.events:
        why = status.get(ev, "")
        click.echo(f"  {ev:<{width}}  {roles.get(ev, 'extra'):<12}  "
                   f"{'counts' if not why else 'missing: ' + why}")
    for role, why in emap.missing.items():
        click.echo(f"  ({role}: {why})")
    usable = [e for e, why in status.items() if not why]
    click.echo(f"backend perf: {'available' if usable else 'unavailable'} "
               f"({len(usable)}/{len(status)} events count)")
    version = sim.valgrind_version()
    geometry = ", ".join(f"{k} {v}" for k, v in sim.geometry().items())
    click.echo(f"backend sim: {'available, ' + version if version else 'unavailable: no valgrind'}"
               f"; cache geometry (size,assoc,line) {geometry or 'unknown'}")
    if version:
        # what a counting pass's kernels are compiled for (numba sees valgrind's CPU)
        cpu = sim_cpu.simulated_cpu()
        click.echo("sim compiles for: " + (f"{cpu[0]} ({sim_cpu.compile_width(cpu)})" if cpu
                                          else "unknown (the probe under valgrind failed)"))
