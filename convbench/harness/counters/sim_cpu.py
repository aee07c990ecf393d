"""The CPU that numba compiles for under valgrind, so that a simulated counting pass can
load kernels compiled ahead, natively, instead of compiling them under the simulation.

Valgrind shows a program its own CPU (on the Zen 3 host LLVM reads "haswell" there, with
AVX2 and FMA but not the host's clwb, sha or vaes), and numba keys its cache by the CPU
name and features it compiles for.  So a kernel compiled natively was never found under
valgrind: the first counting worker of every group compiled under the simulation (~30 s
for one small kernel, alone on that host) and was replaced by one that loaded what it had
built (harness/compiled.py).  With ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` set to
what LLVM reads under valgrind, native compile-only workers build exactly that code and
the counting workers find it in the cache.

:func:`simulated_cpu` asks once per host, valgrind, Python and llvmlite (a few seconds
under ``valgrind --tool=none``: the CPU a program sees is valgrind's core's, whatever the
tool) and keeps the answer under :func:`convbench.host.cache_dir`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from convbench import host
from convbench.results.store import write_json

_PROBE = ("from llvmlite import binding as b; "
          "print(b.get_host_cpu_name()); print(b.get_host_cpu_features().flatten())")
_PROBE_TIMEOUT_S = 120


def _cache_file() -> Path:
    import llvmlite

    from convbench.harness.counters.sim import valgrind_version

    cpu = host.detect_cpu()
    key = "\n".join((str(valgrind_version()), sys.executable, llvmlite.__version__,
                     cpu.model_name, " ".join(cpu.flags)))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return host.cache_dir() / f"sim-cpu-{digest}.json"


def simulated_cpu() -> tuple[str, str] | None:
    """(CPU name, features) as LLVM reads them under valgrind here; None without valgrind
    or when the probe fails (the counting pass then compiles under valgrind, as before)."""
    exe = shutil.which("valgrind")
    if exe is None:
        return None
    path = _cache_file()
    with contextlib.suppress(OSError, ValueError, KeyError):
        known = json.loads(path.read_text())
        return known["name"], known["features"]
    try:
        done = subprocess.run([exe, "-q", "--tool=none", sys.executable, "-c", _PROBE],
                              capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) != 2 or not all(lines):
        return None
    name, features = lines
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {"name": name, "features": features})
    return name, features


def compile_env(cpu: tuple[str, str]) -> dict[str, str]:
    """The environment that makes numba compile for ``cpu``, natively or under valgrind."""
    name, features = cpu
    return {"NUMBA_CPU_NAME": name, "NUMBA_CPU_FEATURES": features}


def compile_width(cpu: tuple[str, str] | None) -> str:
    """A counting pass's compile width: the simulated CPU's name and a digest of its
    features, or "" (LLVM's default under valgrind) when it is not known."""
    if cpu is None:
        return ""
    name, features = cpu
    return f"{host.SIM_WIDTH_PREFIX}{name}-{hashlib.sha256(features.encode()).hexdigest()[:8]}"
