"""``convbench run``: sweep a suite and write a results directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from convbench.farm.client import FarmRun


@click.command("run")
@click.argument("suite", required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Results directory (default results/<suite>-<UTC timestamp>).")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path),
              help="Finish a partial results directory: run only the cases it lacks.")
@click.option("--dry-run", is_flag=True, help="Print the plan's size and estimated duration.")
@click.option("--only", multiple=True, metavar="KEY=GLOB[,KEY=GLOB]",
              help="Keep cases matching every KEY=GLOB of one --only (repeat for "
                   "alternatives). Keys: layer, algorithm, layout, variant, threads, "
                   "vector_width. Example: --only 'layer=res2a*,algorithm=im2col'.")
@click.option("--exclude", multiple=True, metavar="KEY=GLOB[,KEY=GLOB]",
              help="Drop cases matching every KEY=GLOB of one --exclude (repeatable).")
@click.option("--counters", type=click.Choice(["none", "perf", "sim"]), default="none",
              show_default=True, help="Hardware (perf) or simulated (sim) counters per case.")
@click.option("--cache-model", "cache_model", metavar="NAME",
              help="With --counters sim: simulate a named core's caches (cortex-a72, "
                   "cortex-a76, neoverse-n1, neoverse-v1, apple-m1, zen4, sapphire-rapids) "
                   "instead of this host's; a model of this host's code's data traffic, "
                   "not a measurement of that core.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--min-time", type=float, help="Override timing.min_time (s per value).")
@click.option("--values", "n_values", type=click.IntRange(min=3),
              help="Override timing.values.")
@click.option("--warmups", type=click.IntRange(min=0), help="Override timing.warmups.")
@click.option("--timeout", type=float, help="Override timing.timeout (s per case).")
@click.option("--processes", "n_processes", type=click.IntRange(min=1),
              help="Override timing.processes (worker processes per group, values pooled; "
                   "the smoke suite uses 1, a CI gate wants 3).")
@click.option("--threads", "threads", metavar="N[,N...]",
              help="Override sweep.threads, e.g. --threads 1,2.")
@click.option("--vector-widths", "vector_widths", metavar="W[,W...]",
              help="Override sweep.vector_widths (auto, 256, 512), e.g. --vector-widths 512.")
@click.option("--cache", "cache_modes", metavar="MODE[,MODE...]",
              help="Override sweep.cache: warm, cold-weights, cold (e.g. --cache "
                   "warm,cold-weights). Cold modes evict before every call and time single "
                   "calls.")
@click.option("--cold-bytes", type=click.IntRange(min=1 << 20),
              help="Bytes streamed to evict the caches in cold modes (default: 2 x the "
                   "host's last-level cache plus private caches, from sysfs).")
@click.option("--cpus", "cpus", metavar="LIST",
              help="CPUs the workers are pinned to, e.g. 0,1 or 2-3: a worker with T threads "
                   "gets T of them, one per physical core first (default: from the CPUs this "
                   "process may use). Recorded per row and in environment.json.")
@click.option("--records", "records_path", type=click.Path(path_type=Path),
              help="Tuning records (convbench tune): each layer group with a record of this "
                   "host measures its tuned variant (plus the sweep's library baselines) "
                   "instead of the whole grid; groups without one run their full sweep.")
@click.option("--network", "network_plan", type=click.Path(path_type=Path),
              help="Run whole network passes instead of a sweep: the plan.json of convbench "
                   "plan (its suite inside), verified against a float64 pass and timed in "
                   "the same rounds as the best all-NCHW and all-NHWC plans and prepacked "
                   "oneDNN; writes network.parquet.  Takes -o, --threads, --cache "
                   "(warm, cold), --cpus, --seed, --cold-bytes, --profile, --ablate and the "
                   "timing overrides.")
@click.option("--profile", "profile_passes", type=click.IntRange(min=0), default=0,
              help="With --network: after the timing, time every op and its transforms on "
                   "their own inside our passes, over N passes per worker, beside the "
                   "plan's prediction for each (network_ops.parquet; a table of where the "
                   "pass runs over its prediction).")
@click.option("--ablate", is_flag=True,
              help="With --network: also time the plan's pass without fusing relus and "
                   "adds into the convs and without shared tensor storage, in the same rounds "
                   "(what each buys, measured).")
@click.option("--measure-machine/--no-measure-machine", default=None,
              help="On a host without stored machine limits (convbench machine), measure "
                   "them quickly (~20 s) before the run [default: yes, unless "
                   "CONVBENCH_MEASURE_MACHINE=0].")
@click.option("--scheduler", metavar="tcp://HOST:PORT",
              help="Run on a dask.distributed farm (pip install 'convbench[farm]'): each "
                   "worker group is one task on a worker started as `dask worker ADDR "
                   "--nthreads 1 --resources bench=1 --name $(hostname)`; one results "
                   "directory per host under DIR/hosts/.  Needs --every-host or --shard "
                   "(with --resume DIR: the scheduler to finish it on).")
@click.option("--every-host", "farm_mode", flag_value="every-host",
              help="With --scheduler: the whole plan on every connected host (compare "
                   "machines).")
@click.option("--shard", "farm_mode", flag_value="shard",
              help="With --scheduler: the plan's groups spread over identical hosts.")
@click.option("--lost-after", type=click.FloatRange(min=0), default=60.0,
              show_default=True,
              help="With --scheduler: seconds a host may stay disconnected before its "
                   "pending groups are recorded as lost (--resume runs them).")
@click.option("--label", metavar="TEXT",
              help="What `convbench history` calls this run [default: the git commit of "
                   "the convbench checkout, when there is one].")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (for CI).")
def command(suite: str | None, output: Path | None, resume_dir: Path | None, dry_run: bool,
            only: tuple[str, ...], exclude: tuple[str, ...], counters: str,
            cache_model: str | None, seed: int,
            min_time: float | None, n_values: int | None, warmups: int | None,
            timeout: float | None, n_processes: int | None, threads: str | None,
            vector_widths: str | None,
            cache_modes: str | None, cold_bytes: int | None, cpus: str | None,
            records_path: Path | None, network_plan: Path | None, profile_passes: int,
            ablate: bool, measure_machine: bool | None, scheduler: str | None,
            farm_mode: str | None, lost_after: float, label: str | None, quiet: bool) -> int:
    """Measure every variant of SUITE's sweep (a YAML path or a shipped suite's name).

    Each layer's variants are timed round-robin in a worker process together with an
    in-run sgemm reference; crashes, hangs and wrong answers are recorded per case.
    Results are written as cases finish; Ctrl-C leaves a partial directory that
    --resume completes.  Exit code 1 when any case failed, crashed, timed out or raised.
    """
    from convbench.errors import ConvbenchError
    from convbench.harness import options as run_options
    from convbench.harness import runner
    from convbench.harness.plan import format_duration
    from convbench.spec.suite import CACHE_MODES, VECTOR_WIDTHS

    if network_plan is not None:
        sweep_only = {"SUITE": suite, "--resume": resume_dir, "--dry-run": dry_run,
                      "--only": only, "--exclude": exclude, "--records": records_path,
                      "--vector-widths": vector_widths,
                      "--counters": counters if counters != "none" else None,
                      "--cache-model": cache_model}
        given = [name for name, value in sweep_only.items() if value]
        if given:
            raise ConvbenchError(f"--network runs the plan's passes: {', '.join(given)} "
                                 "belong to a sweep")
        return _run_network(network_plan, output, threads, cache_modes, cpus, seed,
                            cold_bytes, {"min_time": min_time, "values": n_values,
                                         "warmups": warmups, "timeout": timeout,
                                         "processes": n_processes}, profile_passes,
                            ablate)
    if profile_passes or ablate:
        flag = "--profile times the ops" if profile_passes else "--ablate varies the plan"
        raise ConvbenchError(f"{flag} of a network pass: give --network PLAN.json")
    if scheduler is not None or farm_mode is not None:
        if network_plan is not None or dry_run:
            raise ConvbenchError("--scheduler runs a sweep: not with --network or --dry-run")
        if scheduler is None:
            raise ConvbenchError(f"--{farm_mode} needs --scheduler tcp://HOST:PORT")
    if resume_dir is not None and scheduler is not None:
        if suite or output or farm_mode:
            raise ConvbenchError("--resume DIR --scheduler ADDR takes the farm directory "
                                 "alone (no SUITE, -o, --every-host, --shard)")
        from convbench.farm import client as farm_client

        return _finish_farm(farm_client.reopen(resume_dir, scheduler, quiet, lost_after))
    if resume_dir is not None:
        from convbench.farm.layout import is_farm

        if is_farm(resume_dir):
            raise ConvbenchError(f"{resume_dir} is a farm run: resume it with --scheduler "
                                 "tcp://HOST:PORT")
        if suite or output or cpus or records_path or cache_model:
            raise ConvbenchError("--resume takes the results directory alone (no SUITE, -o, "
                                 "--cpus, --records, --cache-model: it reuses the run's)")
        outcome = runner.resume(resume_dir, quiet)
    else:
        if not suite:
            raise ConvbenchError("give a SUITE to run, or --resume DIR")
        overrides = {k: v for k, v in (("min_time", min_time), ("values", n_values),
                                       ("warmups", warmups), ("timeout", timeout),
                                       ("processes", n_processes))
                     if v is not None}
        options = run_options.RunOptions(only=only, exclude=exclude, counters=counters,
                                    seed=seed, timing=overrides,
                                    threads=_thread_list(threads),
                                    vector_widths=_word_list(vector_widths,
                                                             "--vector-widths",
                                                             VECTOR_WIDTHS),
                                    cache=_word_list(cache_modes, "--cache", CACHE_MODES),
                                    cold_bytes=cold_bytes, cpus=_cpu_list(cpus),
                                    records=str(records_path.resolve()) if records_path
                                    else None, cache_model=cache_model, label=label)
        run_options.check_overrides(options)   # before a results directory exists
        run_options.check_cache_model(options)
        if dry_run:
            from convbench.spec.suite import load_suite
            from convbench.tune.apply import for_run

            plan, applied = for_run(run_options.make_plan(load_suite(suite), options),
                                    options.records)
            if applied is not None:
                click.echo(applied.line())
            groups = plan.groups(plan.runnable)
            click.echo(f"{len(plan.cases)} cases ({len(plan.runnable)} to measure, "
                       f"{len(plan.cases) - len(plan.runnable)} skipped) in {len(groups)} "
                       f"worker groups; estimated duration "
                       f"{format_duration(plan.estimate_seconds(cold_bytes=cold_bytes))} "
                       f"(an estimate: min_time "
                       f"{plan.timing.min_time:g} s x (calibration + {plan.timing.warmups} "
                       f"warmups + {plan.timing.values} values) per case plus compile and "
                       f"worker start allowances; kernels slower than min_time take longer)")
            return 0
        run_options.check_counters_available(counters)
        if scheduler is not None:
            if farm_mode is None:
                raise ConvbenchError("--scheduler needs --every-host (the whole plan on "
                                     "each host) or --shard (groups spread over the hosts)")
            from convbench.farm import client as farm_client

            return _finish_farm(farm_client.start(suite, output, options, scheduler,
                                                  farm_mode, quiet, measure_machine,
                                                  lost_after))
        outcome = runner.run_suite(suite, output, options, quiet, measure_machine)
    from convbench.report.summary import run_summary
    from convbench.results.store import to_frame
    from convbench.status import Status

    click.echo(run_summary(to_frame(outcome.rows), outcome.path))
    if outcome.interrupted:
        click.echo(f"interrupted; finish with: convbench run --resume {outcome.path}", err=True)
        return 130
    return 1 if any(Status.of(r["status"]).broken for r in outcome.rows) else 0


def _finish_farm(farm: FarmRun) -> int:
    """Run a started or reopened farm to its end; each host's summary, then the farm's."""
    from convbench.farm import client as farm_client
    from convbench.farm import layout
    from convbench.report.summary import run_summary
    from convbench.results.store import load
    from convbench.status import Status

    interrupted = farm_client.execute(farm)
    broken = False
    for name, host in layout.host_dirs(farm.path).items():
        table = load(host).table
        broken = broken or any(Status.of(s).broken for s in table["status"])
        click.echo(f"== {name} ==")
        click.echo(run_summary(table, host))
    lost = farm.meta["lost"]
    click.echo(f"farm: {farm.meta['mode']}, {len(farm.meta['tasks'])} groups run, "
               f"{len(lost)} lost; results: {farm.path}")
    if interrupted or lost or farm.meta["status"] != "complete":
        click.echo(f"finish with: convbench run --resume {farm.path} --scheduler "
                   f"{farm.meta['scheduler']}", err=True)
        return 130 if interrupted else 1
    return 1 if broken else 0


def _run_network(plan_path: Path, output: Path | None, threads: str | None,
                 cache_modes: str | None, cpus: str | None, seed: int,
                 cold_bytes: int | None, timing: dict, profile: int = 0,
                 ablate: bool = False) -> int:
    """``run --network``: measure the plan's passes into a results directory."""
    import time

    from convbench.harness import network_run, sysinfo
    from convbench.harness.affinity import resolve_pool
    from convbench.harness.transform_run import with_timing
    from convbench.network import planfile
    from convbench.status import Status

    plan = planfile.read_plan(plan_path)
    modes = _word_list(cache_modes, "--cache", network_run.CACHE_MODES) or \
        network_run.CACHE_MODES
    pool = _cpu_list(cpus)
    environment = sysinfo.collect(None, resolve_pool(pool))
    if environment["busy_warning"]:
        click.echo(f"convbench: warning: {environment['busy_warning']}", err=True)
    measured = network_run.measure(plan, plan_path, _thread_list(threads), modes,
                                   with_timing(plan.suite.sweep.timing, timing), seed, pool,
                                   cold_bytes, profile=profile, ablate=ablate)
    environment = sysinfo.finish(environment)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    directory = output or Path("results") / f"{plan.suite.name}-network-{stamp}"
    network_run.write(measured, directory, plan_path, environment)
    click.echo(network_run.summary_table(measured.frame))
    if len(measured.ops):
        click.echo("")
        click.echo(network_run.profile_table(measured.ops))
    click.echo(f"results: {directory}")
    return 1 if any(Status.of(s).broken for s in measured.frame.status) else 0


def _thread_list(text: str | None) -> tuple[int, ...]:
    from convbench.errors import ConvbenchError

    if not text:
        return ()
    try:
        threads = tuple(int(t) for t in text.split(","))
    except ValueError:
        threads = ()
    if not threads or min(threads) < 1:
        raise ConvbenchError(f"--threads: expected positive integers like 1,2, got {text!r}")
    return threads


def _cpu_list(text: str | None) -> tuple[int, ...]:
    from convbench.errors import ConvbenchError
    from convbench.harness.affinity import parse_cpu_list

    if text is None:
        return ()
    try:
        cpus = parse_cpu_list(text)
    except ValueError:
        cpus = ()
    if not cpus:
        raise ConvbenchError(f"--cpus: expected a CPU list like 0,1 or 2-3, got {text!r}")
    return cpus


def _word_list(text: str | None, option: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list of words from ``allowed`` (vector widths, cache modes)."""
    from convbench.errors import ConvbenchError

    if not text:
        return ()
    words = tuple(w.strip() for w in text.split(","))
    bad = [w for w in words if w not in allowed]
    if bad:
        raise ConvbenchError(f"{option}: expected {', '.join(allowed)}, got {', '.join(bad)}")
    return words
