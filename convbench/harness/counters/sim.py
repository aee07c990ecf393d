"""Simulated cache profile: callgrind's cache simulation of the counted region.

For machines whose PMU is hidden.  The worker runs under valgrind (the runner puts
:func:`worker_prefix` before its command, in a pass apart from timing), with
``--instr-atstart=no`` so nothing is simulated until a region starts.  ``region()`` calls
callgrind's client requests through a tiny C helper compiled at first use with the system
``cc``: START_INSTRUMENTATION + ZERO_STATS on entry, DUMP_STATS_AT + STOP_INSTRUMENTATION on
exit.  Each dump is its own file; ``read`` sums the dumps since the last read (the main
output file's totals after instrumentation toggles are wrong, BRIEF.md).

Determinism: counts repeat exactly only with ASLR off and a fixed hash seed, so the prefix
runs ``setarch -R`` and sets ``PYTHONHASHSEED=0``.  The cache geometry is the host's from
sysfs unless given (``i1``/``d1``/``ll`` as "size,assoc,line" in bytes).

Repeatable run to run on one host: a ``parallel=True`` numba kernel compiled inside a
worker runs other machine code than the same kernel loaded from numba's cache (370k vs 300k
Ir per call on one kernel), so a worker that compiled measures nothing and is replaced
(:mod:`convbench.harness.compiled`); the allocator's state before the region moves counts
by tens of instructions and a few D1 misses (a JSON text one character longer made and
freed before the region: 307359 vs 307410 Ir, 203 vs 213 D1mw per call, Zen 3), so a
restarted worker gets the very same job, every simulated worker a callgrind directory of
its own (the runner's), and a counting worker makes no text whose length varies run to
run before a region: no clock reading in its messages (worker.py), no pid in its dump
names; every worker starts in a folder of its own (harness/supervise.py), since the
folder a run was started from was first on its sys.path and an entry added there between
two runs (a results/ folder) moved the counts.  Counts still move by ~0.1-0.3% with what
differs between environments before the region (a longer cache path, say): identical on
one host and setup, close but not identical across them.

Columns per call: ``sim_ir``, ``sim_dr``, ``sim_dw``, ``sim_d1mr``, ``sim_d1mw``,
``sim_dlmr``, ``sim_dlmw``; ``l1d_miss_rate`` = D1 misses / (Dr + Dw); ``llc_miss_rate`` =
LL data misses / D1 misses (misses at the LL over the references that reach it, as with
perf); ``sim_ll_global_miss_rate`` = LL data misses / (Dr + Dw) (cachegrind's "LLd miss
rate").  ``ctr_source`` says "simulated" on every such row.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import math
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from convbench import host
from convbench.harness.counters.metrics import Metrics

ENV_DIR = "CONVBENCH_SIM_DIR"
# A directory the runner copies each simulated worker's callgrind dumps into before it
# deletes them (one folder per worker), for callgrind_annotate or a diff of two runs.
KEEP_ENV = "CONVBENCH_SIM_KEEP"
SOURCE = "simulated (callgrind cache-sim)"
# callgrind's output file in a worker's own directory; each region's dump is OUT_FILE.N
OUT_FILE = "callgrind.out"
_HELPER_C = r"""
#include <valgrind/callgrind.h>
int cb_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
void cb_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void cb_zero(void) { CALLGRIND_ZERO_STATS; }
void cb_stop(void) { CALLGRIND_DUMP_STATS_AT("convbench-region"); CALLGRIND_STOP_INSTRUMENTATION; }
"""
_NOT_SIMULATED = ("ipc", "fma_utilization", "counted_gflops", "dram_bandwidth_gbs")


# -- cache geometry ------------------------------------------------------------------
def _host_caches() -> dict[str, str]:
    """{"I1"|"D1"|"LL": "size,assoc,line"} of this host (LL: the highest unified level)."""
    found: dict[str, str] = {}
    for cache in host.caches():  # by level, so the last unified one is the LL
        if not (cache.ways and cache.line_bytes):
            continue
        geometry = (f"{_power_of_two_sets(cache.size_bytes, cache.ways, cache.line_bytes)},"
                    f"{cache.ways},{cache.line_bytes}")
        if cache.level == 1 and cache.kind in ("Data", "Instruction"):
            found["D1" if cache.kind == "Data" else "I1"] = geometry
        elif cache.kind == "Unified":
            found["LL"] = geometry
    return found


def _power_of_two_sets(size: int, assoc: int, line: int) -> int:
    """Largest size <= ``size`` with a power-of-two set count (callgrind requires it)."""
    sets = max(size // (assoc * line), 1)
    return (1 << (sets.bit_length() - 1)) * assoc * line


def geometry(i1: str | None = None, d1: str | None = None, ll: str | None = None
             ) -> dict[str, str]:
    """Cache geometry for callgrind: the user's where given, else the host's."""
    here = _host_caches()
    given = {"I1": i1, "D1": d1, "LL": ll}
    return {k: v for k in ("I1", "D1", "LL") if (v := given[k] or here.get(k))}


def worker_prefix(out_dir: str | None = None, i1: str | None = None, d1: str | None = None,
                  ll: str | None = None, **_: str) -> list[str]:
    """The command prefix that runs a worker under callgrind, deterministically."""
    out_dir = out_dir or tempfile.mkdtemp(prefix="convbench-sim-")
    os.makedirs(out_dir, exist_ok=True)
    cache = [f"--{k}={v}" for k, v in geometry(i1, d1, ll).items()]
    # Build the client-request helper here, in the unsimulated parent, so the simulated
    # worker only ever loads it.  A worker that compiled it (cc through subprocess, file
    # writes) left its heap in another state than one that loaded it, and the region's
    # counts moved with it: 53619.0 vs 53624.5 Ir and 794 vs 796 D1mr per call on the 1x1
    # im2col child (only _PyObject_Free and friends differed), so the first sim run on a
    # machine with an empty ~/.cache/convbench never matched the second (issue 15, item 5).
    # A failure here is reported by the worker's session, with its reason.
    with contextlib.suppress(RuntimeError, OSError, subprocess.CalledProcessError):
        build_helper()
    prime_first_use()
    # Idle OpenMP/BLAS threads spin by default and their instructions would land in the
    # region in varying numbers: make them sleep so counts repeat.
    return ["env", "PYTHONHASHSEED=0", "OMP_WAIT_POLICY=PASSIVE", f"{ENV_DIR}={out_dir}",
            "setarch", platform.machine(), "-R",
            "valgrind", "-q", "--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no",
            *cache, f"--callgrind-out-file={out_dir}/{OUT_FILE}"]


_primed = False


def prime_first_use() -> None:
    """Do here, once per process and unsimulated, the file writes that a worker on a fresh
    checkout would otherwise do inside the simulation before its region.

    The first Python process to import a module writes its ``.pyc``; the first to import a
    kernel module lets numba's cache locator create that package's ``__pycache__`` folder.
    Either leaves the interpreter's heap in another state than the next process's, which
    only reads, and the region's counts move with it: on a fresh clone the first
    simulated 1x1 im2col call counted 53378.5 Ir and every later one 53384.5 (AMD host), and
    the lent Intel machine gave 47551.5 vs 47574.5, all of the difference in ld.so and the
    allocator (issue 15, item 5).  Compiling the package and importing the kernels here
    makes the first simulated worker's history the same as every later one's.
    """
    global _primed
    if _primed:
        return
    import compileall

    import convbench
    from convbench.kernels import registry

    # compileall writes only stale or missing .pyc files; a read-only install fails quietly
    # here and in the workers alike, so they still agree.
    compileall.compile_dir(os.path.dirname(convbench.__file__), quiet=2)
    registry.algorithms()
    _primed = True


# -- the client-request helper -------------------------------------------------------
def build_helper() -> Path:
    """Compile (once per helper source) the callgrind client-request helper; its path."""
    import hashlib

    tag = hashlib.sha256(_HELPER_C.encode()).hexdigest()[:12]
    lib = host.cache_dir() / f"cb_callgrind_{tag}.so"
    if not lib.exists():
        if not Path("/usr/include/valgrind/callgrind.h").exists():
            raise RuntimeError("valgrind/callgrind.h missing: install valgrind "
                               "(apt-get install valgrind)")
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError("no C compiler (cc) to build the callgrind helper")
        lib.parent.mkdir(parents=True, exist_ok=True)
        src = lib.with_suffix(".c")
        src.write_text(_HELPER_C)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(tmp), str(src)],
                       check=True, capture_output=True)
        os.replace(tmp, lib)   # atomic: concurrent workers never load a partial file
    return lib


def helper_library() -> ctypes.CDLL:
    """Load the callgrind client-request helper (built first if missing)."""
    return ctypes.CDLL(str(build_helper()))


# -- dump files ----------------------------------------------------------------------
def parse_dump(text: str) -> dict[str, int]:
    """Event totals of one callgrind output file (``events:`` names, ``summary:`` values)."""
    names: list[str] = []
    found: dict[str, list[int]] = {}
    for line in text.splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith(("summary:", "totals:")):
            key, _, values = line.partition(":")
            found.setdefault(key, [int(v) for v in values.split()])
    # the header's summary is the dump's total; "totals:" (sum of cost lines) is a fallback
    totals = found.get("summary") or found.get("totals") or []
    totals += [0] * (len(names) - len(totals))
    return dict(zip(names, totals, strict=True))


def sim_columns(totals: dict[str, int], calls: int) -> Metrics:
    """Per-call simulated counts and miss rates (see the module docstring)."""
    per = {k: v / calls for k, v in totals.items()}
    out: Metrics = {"ctr_source": SOURCE}
    for key in ("Ir", "Dr", "Dw", "D1mr", "D1mw", "DLmr", "DLmw", "I1mr", "ILmr"):
        out["sim_" + key.lower()] = per.get(key, math.nan)
    refs = per.get("Dr", 0) + per.get("Dw", 0)
    d1 = per.get("D1mr", 0) + per.get("D1mw", 0)
    ll = per.get("DLmr", 0) + per.get("DLmw", 0)

    def rate(name: str, num: float, den: float, what: str) -> None:
        out[name] = num / den if den else math.nan
        if not den:
            out[name + "_reason"] = f"no {what} in the region"

    rate("l1d_miss_rate", d1, refs, "data references")
    rate("llc_miss_rate", ll, d1, "D1 misses")
    rate("sim_ll_global_miss_rate", ll, refs, "data references")
    for name in _NOT_SIMULATED:
        out[name] = math.nan
        out[name + "_reason"] = "not simulated (callgrind models caches, not time)"
    return out


class SimSession:
    """Region counting under callgrind; ``failure`` says why nothing can be counted."""

    kind = "sim"

    def __init__(self) -> None:
        self.failure = ""
        self.dir = os.environ.get(ENV_DIR, "")
        self._seen: set[str] = set()
        self._lib: ctypes.CDLL | None = None
        try:
            self._lib = helper_library()
        except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
            self.failure = f"callgrind helper unavailable: {e}"
            return
        if not self._lib.cb_on_valgrind():
            self.failure = "the worker is not running under valgrind (see sim.worker_prefix)"
        elif not self.dir:
            self.failure = f"{ENV_DIR} not set: callgrind's output directory is unknown"
        else:
            self._seen = set(self._dumps())

    def _dumps(self) -> list[str]:
        # The directory is this worker's own (runner.run_process), so no pid in the names
        # (callgrind.out.N): the names read after one region are text made before the next,
        # and their length varied with the pid's digits.
        return glob.glob(os.path.join(self.dir, OUT_FILE + ".*"))

    @contextlib.contextmanager
    def region(self, prepare: Callable[[], None] | None = None) -> Iterator[None]:
        """Count the body.  ``prepare`` runs simulated but uncounted (instrumentation on,
        statistics zeroed after it): an eviction must move the simulated caches too."""
        if self.failure or self._lib is None:
            if prepare is not None:
                prepare()
            yield
            return
        self._lib.cb_start()
        if prepare is not None:
            prepare()
            self._lib.cb_zero()
        try:
            yield
        finally:
            self._lib.cb_stop()

    def read(self, calls: int) -> Metrics:
        """Per-call figures of the regions since the last read (summed over their dumps)."""
        if self.failure:
            out = sim_columns({}, max(calls, 1))
            for key in [k for k in out if k.startswith("sim_") or k.endswith("_rate")]:
                if not key.endswith("_reason"):
                    out[key] = math.nan
                    out[key + "_reason"] = self.failure
            return out
        totals: dict[str, int] = {}
        for path in sorted(set(self._dumps()) - self._seen):
            self._seen.add(path)
            for k, v in parse_dump(Path(path).read_text()).items():
                totals[k] = totals.get(k, 0) + v
        return sim_columns(totals, calls)

    def close(self) -> None:
        pass


def open_session(**_: str) -> SimSession:
    return SimSession()


def valgrind_version() -> str | None:
    exe = shutil.which("valgrind")
    if exe is None:
        return None
    done = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return done.stdout.strip() or None
