"""``convbench plan``: the global layout plan of a suite's network from measured costs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click


@click.command("plan")
@click.argument("suite")
@click.option("--records", type=click.Path(path_type=Path),
              help="Tuning records (JSON lines of convbench tune): conv costs.")
@click.option("--results", "results_dir", type=click.Path(path_type=Path),
              help="A run's results directory: conv costs where no --records are given.")
@click.option("--transforms", "transforms_dir", type=click.Path(path_type=Path),
              required=True,
              help="Directory holding transforms.parquet and glue.parquet (convbench "
                   "transforms SUITE).")
@click.option("--threads", type=click.IntRange(min=1),
              help="Thread count to plan for (default: the only one measured).")
@click.option("--cache", help="Cache mode to plan for (default: the only one measured).")
@click.option("--vector-width", help="Only this vector width's measurements.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write plan.json here.")
@click.option("-v", "--verbose", is_flag=True, help="Say why each transform is paid.")
def command(suite: str, records: Path | None, results_dir: Path | None,
            transforms_dir: Path, threads: int | None, cache: str | None,
            vector_width: str | None, output: Path | None, verbose: bool) -> int:
    """Choose a variant for every conv of SUITE's network so that conv times plus the
    glue ops and layout transforms between them are smallest (an exact dynamic program),
    and compare with the best all-NCHW, all-NHWC and all-NCHW[x]c (one block x for the
    whole network) plans, the local plans (each conv its own fastest variant, transforms
    where layouts disagree; glue free or in NCHW) and the per-layer bound."""
    from convbench.errors import ConvbenchError
    from convbench.harness import transform_run
    from convbench.network import executor
    from convbench.plan import costs, layouts, report
    from convbench.spec.suite import load_suite

    if (records is None) == (results_dir is None):
        raise ConvbenchError("give the conv costs as --records FILE or --results DIR")
    loaded = load_suite(suite)
    graph = getattr(loaded, "graph", None)
    if graph is None:
        raise ConvbenchError(f"suite {loaded.name} has no network graph: a plan needs the "
                             "order of its ops and which tensors they read")
    measured = costs.read_records(records) if records else costs.read_results(results_dir)
    table = costs.cost_table(measured, threads, cache, vector_width)
    transform_seconds = costs.TransformTable.from_frame(transform_run.load(transforms_dir),
                                                        table.threads, table.cache)
    shapes = {op.layer: (tuple(graph.shape(op.inputs[0])), tuple(graph.shape(op.name)))
              for op in graph.ops if op.kind == "conv"}
    candidates, left_out = costs.with_timed_layouts(table.costs, transform_seconds, shapes)
    table = dataclasses.replace(table, costs=costs.with_epilogues(candidates, graph))
    # said before planning: a layer left with no candidate fails the plan, and this says why
    click.echo(f"{loaded.name}: plan at {table.threads} thread(s), cache {table.cache}")
    untimed = sorted({layout for _, missing in left_out for layout in missing})
    if left_out:
        click.echo(f"{len(left_out)} candidate(s) left out: they read or write "
                   f"{', '.join(untimed)} on a tensor shape {transforms_dir} has no transform "
                   "timings of that layout for (convbench transforms --layouts, or a larger "
                   "--within)")
    glue_frame = transform_run.load_glue(transforms_dir)
    glue = (None if glue_frame is None
            else costs.GlueTable.from_frame(glue_frame, graph, table.threads, table.cache))
    sites = executor.fusion_sites(graph)   # glue a conv's stores may run: charged nothing
    best = layouts.optimal(graph, table.costs, transform_seconds, glue, sites=sites)
    alternatives: dict[str, layouts.Plan | str] = {"optimal": best}
    for layout in ("nchw", "nhwc"):
        alternatives[f"all-{layout}"] = layouts.one_layout(graph, table.costs,
                                                           transform_seconds, layout, glue,
                                                           sites=sites)
    blocked, blocks = layouts.one_block(graph, table.costs, transform_seconds, glue, sites)
    block = None   # the best block's layout (one_block labels each plan all-<layout>)
    if isinstance(blocked, layouts.Plan):
        block = blocked.label.removeprefix("all-")
        blocked = dataclasses.replace(blocked, label=f"all-nchwxc ({block}, the best block)")
    alternatives["all-nchwxc"] = blocked
    alternatives["local-best"] = layouts.local_best(graph, table.costs, transform_seconds, glue,
                                                    sites=sites)
    alternatives["local-best-nchw-glue"] = layouts.local_best(graph, table.costs,
                                                              transform_seconds, glue, "nchw",
                                                              sites)
    alternatives["per-layer bound"] = layouts.per_layer_bound(graph, table.costs, glue, sites)
    if glue is None:
        click.echo(f"glue ops (relu, pools, add) counted as free: {transforms_dir} has no "
                   f"{transform_run.GLUE_FILE} (measure with convbench transforms SUITE)")
    click.echo(report.plan_table(best))
    click.echo("")
    click.echo(report.alternatives_table(alternatives))
    if blocks:
        click.echo("all-nchwxc per block: " + "; ".join(report.block_text(lay, p)
                                                        for lay, p in blocks.items()))
    if verbose:
        click.echo("")
        click.echo("\n".join(report.explanations(best)))
    short = _short_round_costs(measured, alternatives, table)
    if short:
        click.echo(f"{short} conv cost(s) of this plan and its alternatives come from short "
                   "tuning rounds (rankings, not figures): convbench tune "
                   f"{suite} --records {records} --confirm PLAN measures them at the "
                   "suite's timing; then plan again")
    estimated = [{"shape": list(s), "from_layout": a, "to_layout": b}
                 for s, a, b in sorted(transform_seconds.estimated)]
    if estimated:
        click.echo(f"{len(estimated)} transform(s) on tensor shapes not measured were "
                   "scaled from the nearest measured shape (listed in plan.json)")
    if output is not None:
        document = report.plan_json(best, alternatives, suite=loaded.name, hosts=table.hosts,
                                    threads=table.threads, cache=table.cache,
                                    estimated=estimated, reference_s=table.reference_s,
                                    left_out={"candidates": len(left_out),
                                              "layouts": untimed},
                                    **_suite_source(loaded))
        document["alternatives"]["all-nchwxc"]["blocks"] = {
            lay: report.block_json(p) for lay, p in blocks.items()}
        document["alternatives"]["all-nchwxc"]["layout"] = block
        output.write_text(json.dumps(document, indent=1) + "\n")
        click.echo(f"plan: {output}")
    return 0


def _short_round_costs(measured: list, alternatives: dict, table: object) -> int:
    """How many (layer, variant) the plans run at a cost from a tune's round before the
    final one (``convbench tune --confirm`` measures them; :mod:`convbench.tune.confirm`)."""
    short = {(m.layer, m.variant) for m in measured
             if not m.final and m.threads == table.threads and m.cache == table.cache}
    used = {(step.layer, step.candidate.variant_id)
            for plan in alternatives.values() if not isinstance(plan, str)
            for step in plan.steps if step.candidate is not None}
    return len(used & short)


def _suite_source(loaded: object) -> dict[str, str | None]:
    """The suite's path and text for plan.json (None where the suite has no file)."""
    path = getattr(loaded, "path", None)
    if path is None:
        return {"suite_path": None, "suite_text": None}
    return {"suite_path": str(Path(path).resolve()), "suite_text": Path(path).read_text()}
