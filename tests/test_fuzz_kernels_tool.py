"""tools/fuzz_kernels.py: a long fuzz campaign's driver, run here on kernels of the test's
own that fuse right, claim a fusion they never do, and answer wrong: it must name the
wrong ones with the seed that reproduces them, and exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "fuzz_kernels.py"

KERNELS = '''
import numpy as np
from convbench.kernels.base import Algorithm, Prepared
from convbench.kernels.reference import conv2d_reference


class Kernel(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem, w, how):
        self.problem, self.w, self.how = problem, w, how
        self.add, self.act = False, None

    def fuse_activation(self, kind):
        self.act = kind
        return True

    def fuse_residual(self):
        self.add = True
        return True

    def run(self, x, y):
        out = conv2d_reference(self.problem, x, self.w) + (y if self.add else 0)
        if self.act == "relu6" or (self.act == "relu" and self.how != "forgets_relu"):
            out = np.clip(out, 0, 6 if self.act == "relu6" else None)
        y[...] = 0.0 if self.how == "wrong" else out


ALGORITHMS = [Algorithm(name=f"t_{how}", title=how, source="test", layouts=("nchw",),
                        build=lambda p, w, layout, params, how=how: Kernel(p, w, how))
              for how in ("fuses", "forgets_relu", "wrong")]
'''


def _fuzz(tmp_path: Path, algorithms: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "fusing_kernels.py").write_text(KERNELS)
    env = {**os.environ, "CONVBENCH_EXTRA_KERNELS": "fusing_kernels",
           "CONVBENCH_EXTRA_KERNELS_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, str(TOOL), "--algorithms", algorithms,
                           "--problems", "2", "--seed", "7", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_right_kernels_pass_with_every_epilogue(tmp_path: Path) -> None:
    done = _fuzz(tmp_path, "t_fuses", "--fused")
    assert done.returncode == 0, done.stdout + done.stderr
    # two problems, one variant each: the plain check and the four epilogues
    assert done.stdout.strip().splitlines()[-1] == "2 problems, 10 checks at 1 thread(s), 0 failed"


def test_wrong_answers_and_a_forgotten_relu_are_named_with_their_seed(tmp_path: Path) -> None:
    done = _fuzz(tmp_path, "t_fuses,t_forgets_relu,t_wrong", "--fused")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert failed and all(line.startswith(("FAIL seed=7 ", "FAIL seed=8 ")) for line in failed)
    assert not [line for line in failed if "t_fuses/" in line]
    forgot = [line for line in failed if "t_forgets_relu/" in line]
    # relu alone and after an add; relu6 and the add alone are right
    assert {line.split(" on ")[0].split(" ", 3)[3] for line in forgot} == {
        "add=False act=relu", "add=True act=relu"}
    assert any("t_wrong/nchw on" in line for line in failed)   # the plain check


def test_without_fused_only_the_plain_check_runs(tmp_path: Path) -> None:
    done = _fuzz(tmp_path, "t_forgets_relu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "2 problems, 2 checks at 1 thread(s), 0 failed"
