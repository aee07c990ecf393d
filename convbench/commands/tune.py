"""``convbench tune``: search each layer's variants by successive halving, write tuning records."""

from __future__ import annotations

from pathlib import Path

import click

from convbench.commands.run import _thread_list, _word_list


@click.command("tune")
@click.argument("suite")
@click.option("--budget", "budget_s", type=click.FloatRange(min=0),
              help="Seconds to spend: no new round starts once they are spent; what is "
                   "measured stays in the records and --resume continues.")
@click.option("--records", "records_path", type=click.Path(path_type=Path),
              help="Tuning records file, JSON lines (default tuning/<suite>-<host>.jsonl).")
@click.option("--resume", is_flag=True,
              help="Continue the records file: layers whose final round is recorded are "
                   "skipped, a layer tuned part way goes on from its recorded rounds.")
@click.option("--cache", "cache_modes", metavar="MODE[,MODE...]", default="auto",
              show_default=True,
              help="Cache modes to tune in (auto, warm, cold-weights, cold): a tuned variant "
                   "applies to runs in the same mode.  auto: cold-weights, the state a "
                   "network pass leaves each layer in (README: Cache modes).")
@click.option("--threads", "threads", metavar="N[,N...]",
              help="Override sweep.threads, e.g. --threads 1,2.")
@click.option("--vector-widths", "vector_widths", metavar="W[,W...]",
              help="Override sweep.vector_widths (auto, 256, 512).")
@click.option("--only", multiple=True, metavar="KEY=GLOB[,KEY=GLOB]",
              help="Keep candidates matching every KEY=GLOB of one --only (as for run).")
@click.option("--exclude", multiple=True, metavar="KEY=GLOB[,KEY=GLOB]",
              help="Drop candidates matching every KEY=GLOB of one --exclude (as for run).")
@click.option("--exhaustive", is_flag=True,
              help="No halving: measure every candidate once at the suite's timing (the "
                   "full grid, to check what the halving finds against; slow).")
@click.option("--transfer", is_flag=True,
              help="Rank each layer's candidates by what the round 0s of other layers "
                   "(same kernel size, threads and cache mode) measured, and measure only "
                   "the best-ranked: the whole halving within a fifth of the candidate "
                   "count.  A layer with no such evidence gets the full halving.")
@click.option("--prior", "prior_paths", multiple=True,
              type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="Tuning records of other layers or networks on this host to rank by "
                   "(implies --transfer; records of the layer being tuned are not used).")
@click.option("--confirm", "confirm_plan",
              type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A plan.json of convbench plan: measure at the suite's timing the conv "
                   "variants it and its alternatives run whose cost came from a short "
                   "round, and their neighbours one tile, order or bool away, into "
                   "--records (then plan again).  Its threads and cache mode are used.")
@click.option("--cold-bytes", type=click.IntRange(min=1 << 20),
              help="Bytes streamed to evict the caches in cold modes (as for run).")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def command(suite: str, budget_s: float | None, records_path: Path | None, resume: bool,
            cache_modes: str, threads: str | None, vector_widths: str | None,
            only: tuple[str, ...], exclude: tuple[str, ...], exhaustive: bool,
            transfer: bool, prior_paths: tuple[Path, ...], confirm_plan: Path | None,
            cold_bytes: int | None, seed: int, quiet: bool) -> int:
    """Find each layer's fastest variant of SUITE's sweep with few measurements.

    Per layer group (thread count, vector width, cache mode) the candidates -- the
    sweep's variants, or an algorithm's own tuning space (nchwc: NeoCPU's blocks among
    the factors of the layer's channels) -- are measured briefly, the best third kept and
    measured longer, until one or two remain for a final round at the suite's timing.
    Every measurement is a `convbench run` one (verified, then timed with the in-run
    reference); each is appended to the records as it arrives.  `convbench run SUITE
    --records FILE` then measures only each layer's tuned variant and the baselines.
    """
    from convbench.errors import ConvbenchError
    from convbench.harness import options as run_options
    from convbench.spec.suite import CACHE_MODES, VECTOR_WIDTHS
    from convbench.tune.cache_choice import AUTO
    from convbench.tune.session import tune_suite

    modes = _word_list(cache_modes, "--cache", (AUTO, *CACHE_MODES))
    if AUTO in modes and len(modes) > 1:
        raise ConvbenchError(f"--cache: auto chooses one mode per thread count; not beside "
                             f"{', '.join(m for m in modes if m != AUTO)}")
    options = run_options.RunOptions(
        only=only, exclude=exclude, seed=seed, threads=_thread_list(threads),
        vector_widths=_word_list(vector_widths, "--vector-widths", VECTOR_WIDTHS),
        cache=() if modes == (AUTO,) else modes, cold_bytes=cold_bytes)
    if exhaustive and (transfer or prior_paths):
        raise ConvbenchError("--exhaustive measures every candidate: not with --transfer "
                             "or --prior")
    if confirm_plan and (exhaustive or transfer or prior_paths or resume):
        raise ConvbenchError("--confirm measures a plan's variants in tuned records: not "
                             "with --exhaustive, --transfer, --prior or --resume")
    outcome = tune_suite(suite, options, records_path, resume=resume, budget_s=budget_s,
                         quiet=quiet, exhaustive=exhaustive, transfer=transfer,
                         prior_paths=prior_paths, cache_auto=modes == (AUTO,),
                         confirm_plan=confirm_plan)
    click.echo(f"records: {outcome.path}")
    if outcome.budget_spent or outcome.interrupted:
        why = "budget spent" if outcome.budget_spent else "interrupted"
        click.echo(f"{why}: {len(outcome.left)} layer group(s) not tuned "
                   f"({', '.join(outcome.left[:3])}{', ...' if len(outcome.left) > 3 else ''});"
                   f" continue with: convbench tune {suite} --records {outcome.path} --resume"
                   " (and the same options)",
                   err=True)
    return 130 if outcome.interrupted else 0
