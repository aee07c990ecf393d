"""Every broken case ends `run` and `check` with a command that reproduces it alone; the
line, run as printed, fails the same way."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATA, ROOT, convbench_process

FAULTS = DATA / "fault_suite.yaml"
ENV = {**os.environ, "CONVBENCH_EXTRA_KERNELS": "tests.fault_kernels",
       # the printed line calls the `convbench` script of this interpreter's environment
       "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}


def _reproducers(output: str) -> dict[str, str]:
    """Printed reproducer lines by status."""
    lines = output[output.index("reproduce a case alone:"):].splitlines()[1:]
    return {m[2]: m[1] for m in (re.match(r"  (.*convbench check .*?)\s+# (\w+)$", line)
                                 for line in lines) if m}


def _run_as_printed(line: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_run_prints_a_reproducer_that_fails_alone(tmp_path):
    run = convbench_process("run", FAULTS, "-q", "--only", "algorithm=t_wrong", "--only",
                            "algorithm=t_good", "-o", tmp_path / "run", env=ENV)
    assert run.returncode == 1, run.stderr
    lines = _reproducers(run.stdout)
    assert set(lines) == {"fail"}, run.stdout      # the good kernel gets no line
    again = _run_as_printed(lines["fail"])
    assert again.returncode == 1, again.stderr
    assert re.search(r"t_wrong/nchw\s+FAIL .*the bound", again.stdout), again.stdout
    assert "1 variants run, 1 failed" in again.stdout


def test_check_prints_reproducers_that_fail_alone():
    check = convbench_process("check", FAULTS, "-a", "t_wrong", "-a", "t_raises", "-a",
                              "t_good", env=ENV)
    assert check.returncode == 1, check.stderr
    lines = _reproducers(check.stdout)
    assert set(lines) == {"fail", "error"}
    raised = _run_as_printed(lines["error"])
    assert raised.returncode == 1 and "ValueError: this kernel always raises" in raised.stdout
    assert "t_good" not in raised.stdout and "t_wrong" not in raised.stdout
