"""``convbench check``: run every applicable variant against the reference."""

from __future__ import annotations

import time

import click

from convbench.status import Status


def _problems(targets: tuple[str, ...]):
    """Each target is a suite (path or shipped name) or a benchdnn descriptor."""
    from pathlib import Path

    from convbench.spec.descriptor import parse_descriptor
    from convbench.spec.suite import exists, load_suite, resolve_suite_path

    problems = []
    for target in targets:
        path = resolve_suite_path(target)
        if path.suffix in (".yaml", ".yml") or exists(Path(target)):
            problems.extend(layer.problem for layer in load_suite(path).layers)
        else:
            p = parse_descriptor(target)
            problems.append(p if p.name else p.replace(name=str(p)))
    return problems


@click.command("check")
@click.argument("targets", nargs=-1, required=True)
@click.option("-a", "--algorithm", "algorithms", multiple=True,
              help="Only these algorithms (repeatable).")
@click.option("-l", "--layout", "layouts", multiple=True, help="Only these layouts.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--show-skips/--hide-skips", default=False, show_default=True,
              help="List variants that do not apply, with their reason.")
@click.option("--variant", "variant_id", metavar="ID",
              help="Only this variant, as results name it (e.g. im2col/nhwc/gemm=blas): "
                   "what the reproducer lines of run and check use.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Threads given to numba and BLAS.")
@click.option("--vector-width", "vector_width", default="auto", show_default=True,
              help="Vector width of the numba kernels (auto; 128 on aarch64; 256, 512 on "
                   "x86).")
@click.option("--defaults", is_flag=True,
              help="One variant per algorithm and layout: every parameter at its default "
                   "(gemm keeps both blas and own: two codes, not two tunings).")
@click.option("--asm", "profile", is_flag=True,
              help="Also read each variant's compiled code: packed FMAs by vector width "
                   "(the static vector profile; cached code is disassembled with objdump, "
                   "compiled once more where objdump is missing).")
def command(targets: tuple[str, ...], algorithms: tuple[str, ...], layouts: tuple[str, ...],
            seed: int, show_skips: bool, variant_id: str | None, threads: int,
            vector_width: str, defaults: bool, profile: bool) -> int:
    """Verify kernels on TARGETS (suites or benchdnn descriptors) against the reference.

    Exit code 1 when any variant fails or raises, 0 when all pass.  Each failing variant
    ends with a command that reproduces it alone.
    """
    _apply_settings(threads, vector_width)  # before anything imports numba
    from convbench.errors import ConvbenchError
    from convbench.harness.check import check_problems
    from convbench.kernels.base import Variant
    from convbench.textable import format_table

    try:
        variant = Variant.parse(variant_id) if variant_id else None
    except ValueError as exc:
        raise ConvbenchError(f"--variant: {exc}") from None
    problems = _problems(targets)
    lw = max([len("layer")] + [len(p.name) for p in problems])
    vw = 34
    aw = 44 if profile else 0   # the vector profile's column, only with --asm
    asm_head = f"{'vector profile':<{aw}}  " if profile else ""
    click.echo(f"{'layer':<{lw}}  {'variant':<{vw}}  status  max abs err  max rel err  "
               f"err/bound  seconds  {asm_head}reason")

    def show(row) -> None:
        if row.status == Status.SKIP and not show_skips:
            return
        status = row.status if row.ok else row.status.upper()
        click.echo(f"{row.layer:<{lw}}  {row.variant:<{vw}}  {status:<6}  {row.max_abs:11.2e}"
                   f"  {row.max_rel:11.2e}  {row.bound_ratio:9.3f}  {row.seconds:7.2f}  "
                   f"{f'{row.asm:<{aw}}  ' if profile else ''}{row.reason}".rstrip())

    t0 = time.perf_counter()
    rows = check_problems(problems, algorithms or None, layouts or None,
                          params=default_params() if defaults else None, seed=seed,
                          on_row=show, variant=variant, threads=threads,
                          vector_width=vector_width, profile=profile)
    elapsed = time.perf_counter() - t0
    ran = [r for r in rows if r.status != Status.SKIP]
    bad = [r for r in rows if not r.ok]
    summary = [("algorithm", "variants", "failed", "skipped", "worst err/bound", "worst abs",
                *(("vectorised",) if profile else ()))]
    for alg in dict.fromkeys(r.algorithm for r in rows):
        mine = [r for r in rows if r.algorithm == alg]
        checked = [r for r in mine if r.status in (Status.OK, Status.FAIL)]
        # with --asm: how many of the variants that ran have packed FMAs in their code
        packed = (f"{sum(r.asm.startswith('vectorised') for r in checked)}/{len(checked)}",)
        summary.append((alg, str(len(mine)), str(sum(not r.ok for r in mine)),
                        str(sum(r.status == Status.SKIP for r in mine)),
                        f"{max((r.bound_ratio for r in checked), default=float('nan')):.3f}",
                        f"{max((r.max_abs for r in checked), default=float('nan')):.2e}",
                        *(packed if profile else ())))
    click.echo("")
    click.echo(format_table(summary, right=(1, 2, 3, 4, 5, 6)))
    click.echo(f"\n{len(problems)} problems, {len(ran)} variants run, {len(bad)} failed, "
               f"{len(rows) - len(ran)} skipped, {elapsed:.1f} s")
    if bad:
        click.echo("reproduce a case alone:")
        for row in bad:
            click.echo(f"  {row.identity.reproducer()}    # {row.status}")
    return 1 if bad else 0


def default_params() -> dict[str, dict[str, tuple]]:
    """Parameter domains of ``--defaults``: each knob at its default, the GEMM backend at
    both (BLAS and the own GEMM are different code, which a check must run)."""
    from convbench.kernels import registry
    from convbench.kernels.gemm import GEMM_BACKEND

    return {name: {p.name: p.domain if p is GEMM_BACKEND else (p.default,)
                   for p in alg.params}
            for name, alg in registry.algorithms().items()}


def _apply_settings(threads: int, vector_width: str) -> None:
    """Threads for numba and BLAS; the vector width before numba is first imported (it
    reads NUMBA_CPU_FEATURES once)."""
    import os
    import sys

    from convbench.errors import ConvbenchError
    from convbench.harness.worker import FEATURES_ENV, apply_vector_width
    from convbench.host import width_unsupported
    from convbench.spec.suite import VECTOR_WIDTHS

    if threads > (os.cpu_count() or 1):
        raise ConvbenchError(f"--threads {threads}: this machine has {os.cpu_count()} cores")
    if vector_width not in VECTOR_WIDTHS:
        raise ConvbenchError(f"--vector-width: expected one of {', '.join(VECTOR_WIDTHS)}, "
                             f"got {vector_width!r}")
    unsupported = width_unsupported(vector_width)
    if unsupported:
        raise ConvbenchError(f"--vector-width: {unsupported}")
    before = os.environ.get(FEATURES_ENV)
    apply_vector_width(vector_width)
    if "numba" in sys.modules and os.environ.get(FEATURES_ENV) != before:
        raise ConvbenchError("--vector-width: numba is already loaded in this process; run "
                             "`convbench check` as a command of its own")
    from convbench.harness.threads import use_threads

    use_threads(threads)
