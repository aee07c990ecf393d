"""``--confirm``: measure the variants flagged slower again, from the current tree.

Noisy CI runners flag different variants on every run; a regression fails the build only
when a fresh measurement (made by ``convbench run`` on the current run's suite copy,
interleaved with the in-run reference as every run is) says "slower" against the same
baseline again.  Each flagged variant is marked confirmed or dropped.

The run machinery is reached through one small interface, :func:`remeasure`, which runs
:func:`run_command` in a subprocess; if ``convbench run``'s options change, only
:func:`run_command` has to follow.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from convbench import stats
from convbench.compare import decision
from convbench.compare.gate import Comparison, decide_pair, with_confirmation
from convbench.compare.match import load_pair
from convbench.errors import ConvbenchError
from convbench.results import schema

Remeasure = Callable[[Path, Sequence[str]], Path]


def run_available() -> bool:
    """Whether this tree has a ``convbench run`` command (``run --help`` exits 0)."""
    proc = subprocess.run([sys.executable, "-m", "convbench", "run", "--help"],
                          capture_output=True, check=False)
    return proc.returncode == 0


def run_command(suite: Path, case_ids: Sequence[str], output: Path) -> list[str]:
    """The ``convbench run`` command line that measures only ``case_ids`` of ``suite``."""
    cmd = [sys.executable, "-m", "convbench", "run", str(suite), "--output", str(output)]
    for case_id in case_ids:
        cmd += ["--only", f"case={case_id}"]
    return cmd


def remeasure(results_dir: Path, case_ids: Sequence[str], output: Path | None = None) -> Path:
    """Run ``case_ids`` again from the current tree using ``results_dir``'s suite copy;
    return the new results directory."""
    suite = Path(results_dir) / schema.SUITE_COPY
    if not suite.is_file():
        raise ConvbenchError(f"{results_dir}: no {schema.SUITE_COPY} to re-measure from; "
                             "--confirm needs a results directory written by convbench run")
    output = output or Path(tempfile.mkdtemp(prefix="convbench-confirm-")) / "run"
    proc = subprocess.run(run_command(suite, case_ids, output), capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ConvbenchError(f"re-measuring for --confirm failed (exit {proc.returncode}): "
                             + " / ".join(tail))
    return output


def confirm(comparison: Comparison, remeasure: Remeasure = remeasure,
            resamples: int = stats.BOOTSTRAP_RESAMPLES) -> Comparison:
    """Re-measure the variants whose timing verdict is "slower" and attach the outcome.

    A variant is confirmed when the re-measurement, compared with the same baseline by the
    same rule, is "slower" again; otherwise the flag is dropped (and no longer fails).
    """
    if comparison.kind != "results":
        raise ConvbenchError("--confirm needs results directories (a pyperf file has no "
                             "suite to re-measure from)")
    flagged = [i for i, r in enumerate(comparison.results)
               if r.time is not None and r.time.verdict == decision.SLOWER]
    if not flagged:
        return comparison
    case_ids = [comparison.results[i].current.case_id for i in flagged]
    rerun = remeasure(comparison.current, case_ids)
    base_side, new_side = load_pair(comparison.baseline, rerun)
    comparison.confirmed_run = Path(rerun)
    for i in flagged:
        old = comparison.results[i]
        new = new_side.samples.get(old.current.key)
        if new is None:
            raise ConvbenchError(f"re-measurement in {rerun} has no {old.current.case_id}")
        redo = decide_pair(base_side.samples[old.baseline.key], new,
                           thresholds=comparison.thresholds, alpha=comparison.alpha,
                           instruction_column=None,
                           use_reference=old.time.basis == "ref-normalised",
                           resamples=resamples)
        if redo.time is None:  # the re-measurement did not produce values
            raise ConvbenchError(f"re-measurement of {old.current.case_id} is "
                                 f"{new.status}: {new.reason}")
        comparison.results[i] = with_confirmation(old, redo.time)
    return comparison
