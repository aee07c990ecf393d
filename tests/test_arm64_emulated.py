"""convbench on aarch64 under qemu-user emulation (tools/arm64.sh): the kernels pass the
check there and numba's code for them is NEON code.

It runs only where tools/arm64.sh has built its cached root (it needs root, about 9
minutes and a network to build) and only when the emulated check fits the time budget;
otherwise it is skipped with the reason.  CI has no cached root, so there it skips; the
README gives the figures of a full emulated run.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "arm64.sh"
ROOT = Path(os.environ.get("CONVBENCH_ARM64_ROOT", "/var/cache/convbench-arm64"))
READY = ROOT / ".convbench" / "pip"               # written once the venv is installed
LAST = ROOT / ".convbench" / "test-seconds"       # how long this test's check took
# The emulated check may take this long (seconds; CONVBENCH_ARM64_BUDGET_S): CI gives the
# whole suite about 10 minutes, and a cold numba compile under emulation is 10-50x slower.
BUDGET_S = float(os.environ.get("CONVBENCH_ARM64_BUDGET_S", "300"))
# One small 3x3 layer, the algorithms whose register tiles were sized for 4 lanes, each at
# its defaults, with the static vector profile.
COMMAND = ["check", "mb1ic16ih8oc32oh8kh3ph1", "--defaults", "--asm",
           "-a", "direct", "-a", "nchwc", "-a", "indirect"]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "tools/arm64.sh needs root (chroot and mounts)"
    if not READY.exists():
        return (f"no cached aarch64 root at {ROOT}: build it with `tools/arm64.sh --setup` "
                f"(as root, ~9 minutes and a network; CONVBENCH_ARM64_ROOT moves it)")
    if LAST.exists() and float(LAST.read_text()) > BUDGET_S:
        return (f"the emulated check took {float(LAST.read_text()):.0f} s last time, over "
                f"the {BUDGET_S:.0f} s budget (CONVBENCH_ARM64_BUDGET_S)")
    return None


def _root_in_use() -> bool:
    """Whether another tools/arm64.sh holds the root (it locks ROOT.lock while it runs)."""
    with open(f"{ROOT}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
    return False


@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_kernels_pass_and_vectorise_on_emulated_aarch64():
    if _root_in_use():
        pytest.skip(f"another tools/arm64.sh is using {ROOT} now")
    t0 = time.perf_counter()
    done = subprocess.run([str(SCRIPT), *COMMAND], capture_output=True, text=True,
                          timeout=2 * BUDGET_S, check=False)
    out = done.stdout
    if "-- total:" in out:   # the check ran (not refused before setup): its time counts
        LAST.write_text(f"{time.perf_counter() - t0:.1f}\n")
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    assert "as neoverse-n1" in out and ", 0 failed," in out
    rows = [line.split() for line in out.splitlines() if line.startswith("mb1ic16ih8oc32")]
    ran = {r[1].split("/")[0] for r in rows if r[2] == "ok"}
    assert ran == {"direct", "nchwc", "indirect"}, out
    # the 4-lane NCHW[x]c default tile (6 x 16) is NEON code: 24 fmla v.4s, no scalar FP
    (nchwc,) = [" ".join(r) for r in rows if r[1].startswith("nchwc/")]
    assert "oc_bn=16/reg_n=6" in nchwc and "vectorised: 24 x 128-bit FMA" in nchwc, nchwc
    assert "scalar FP" not in nchwc, nchwc
