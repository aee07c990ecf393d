"""`convbench run --counters sim` gives the same simulated counts twice (the deterministic
gate of `convbench compare` relies on it)."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from convbench.harness import supervise
from convbench.harness.counters import sim
from convbench.harness.plan import build_plan
from convbench.spec.suite import load_suite

TINY = Path(__file__).parent / "data" / "tiny_suite.yaml"


# Its counts differed in three clean-clone CI runs (307482 vs 307516 Ir, 542 vs 539
# D1mr), twice beside another test and once alone: the counting worker sent a clock
# reading before the region, and a float's repr is 15 to 18 characters (the test below).
# On a mismatch it says which functions counted differently and how the workers started.
def test_two_sim_runs_count_the_same_the_first_from_an_empty_numba_cache(sim_runs):
    """The first run compiles every kernel (numba's cache is empty), ahead of timing in a
    compile-only worker (harness/precompile.py), and ahead of the counting pass for the CPU
    valgrind shows (counters/sim_cpu.py): no worker compiles, timing or counting, so none
    is restarted (harness/compiled.py); a run from an empty cache and a later one count
    the same, and the later one compiles nothing (the runs: conftest's ``sim_runs``)."""
    runs, folder = sim_runs
    for run in runs:
        assert run["returncode"] == 0, run["stderr"]
    tables = [pd.read_parquet(folder / name / "results.parquet") for name in "ab"]
    envs = [json.loads((folder / n / "environment.json").read_text()) for n in "ab"]
    first = envs[0]
    assert first["compiled_ahead"]["cases"] == 1, first     # compiled before any timing
    assert first["compiled_ahead_for_counts"]["cases"] == 1, first   # and before counting
    assert "restarted_after_compile" not in first, first    # every worker loaded
    assert first["workers"]["t1/vauto"]["compile_width"].startswith("sim-"), first
    assert "restarted_after_compile" not in envs[1], envs[1]    # everything loaded
    assert "compiled_ahead" not in envs[1], envs[1]             # and the stamps said so
    assert "compiled_ahead_for_counts" not in envs[1], envs[1]
    cols = ["sim_ir", "sim_dr", "sim_dw", "sim_d1mr", "sim_d1mw", "sim_dlmr", "sim_dlmw"]
    a, b = (t.set_index("case_id")[cols] for t in tables)
    assert len(a) == 1 and a.notna().all().all()
    try:
        pd.testing.assert_frame_equal(a, b)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_dump_difference(folder)}") from None
    gate = subprocess.run([sys.executable, "-m", "convbench", "compare", str(folder / "a"),
                           str(folder / "b"), "--fail-on", "instructions"],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 0, gate.stdout + gate.stderr


def _self_ir(dump: Path) -> Counter[str]:
    """Ir per function of one callgrind dump, its own instructions only (a cost line right
    after ``calls=`` is the callee's inclusive cost); they add up to the dump's ``totals:``."""
    names: dict[str, str] = {}
    costs: Counter[str] = Counter()
    fn, skip = "", False
    for line in dump.read_text().splitlines():
        if line.startswith(("fn=", "cfn=")):
            ref, _, name = line.partition("=")[2].partition(" ")
            if name:
                names[ref] = name
            if line.startswith("fn="):
                fn = names.get(ref, ref)
                if fn.startswith("0x"):   # numba's code has no symbol: where it was loaded
                    fn = "(jitted code, no symbol)"
        elif line.startswith("calls="):
            skip = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            fields = line.split()
            if not skip and len(fields) > 1:
                costs[fn] += int(fields[1])
            skip = False
    return costs


def _dump_difference(folder: Path) -> str:
    """How the two runs' counting workers differed: their command lines and the functions
    whose own Ir differ most (what a session needs to find the cause of a mismatch)."""
    lines = []
    per_run = []
    for name in ("a", "b"):
        dumps = sorted((folder / f"keep-{name}").rglob(f"{sim.OUT_FILE}.*"))
        per_run.append(sum((_self_ir(d) for d in dumps), Counter()))
        for d in dumps[:1]:
            cmd = next((x for x in d.read_text().splitlines() if x.startswith("cmd:")), "")
            lines.append(f"run {name}: {cmd}")
    diff = {fn: per_run[1][fn] - per_run[0][fn] for fn in per_run[0].keys() | per_run[1].keys()
            if per_run[1][fn] != per_run[0][fn]}
    for fn, d in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:15]:
        lines.append(f"  {d:+d} Ir in {fn} (b - a)")
    return "\n".join(lines)


def test_a_counting_worker_says_the_same_every_run(monkeypatch):
    """What a counting worker sends before a region is text it made there, and a text of
    another length moves the region's simulated counts (counters/sim.py): no clock reading
    or other run-to-run difference goes into its messages.  Run unsimulated (its counts
    then say why they are missing, the same each time); the first run may compile."""
    monkeypatch.setenv("PYTHONHASHSEED", "0")   # as under sim.worker_prefix
    plan = build_plan(load_suite(TINY), only=["layer=conv3x3"])
    job = supervise.job_for(plan.runnable, plan.timing, "sim", seed=0, count_only=True,
                            restart_if_compiled=False)
    said = []
    for _ in range(3):
        lines: list[str] = []
        end = supervise.WorkerProcess(job, plan.timing.timeout).run(
            lambda m: lines.append(m.encode()))   # noqa: B023 - run returns before the next
        assert end.status is None and len(end.finished) == len(job.cases) == 4, end
        said.append(lines)
    assert any('"type": "counts"' in line for line in said[2])
    for i, (one, other) in enumerate(zip(said[1], said[2], strict=True)):
        assert one == other, f"message {i} differs:\n{one}\n{other}"
