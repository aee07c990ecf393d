"""harness.threads: one thread count for numba and every BLAS/OpenMP pool, set in a fresh
process as a worker sets it."""

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from convbench.harness.threads import use_threads
use_threads(int(sys.argv[1]))
import numba, threadpoolctl
pools = threadpoolctl.threadpool_info()
print(json.dumps({"numba": numba.get_num_threads(),
                  "pools": sorted({lib["num_threads"] for lib in pools}),
                  "apis": sorted({lib["internal_api"] for lib in pools})}))
"""


@pytest.mark.parametrize("count", [1, 2])
def test_use_threads_sets_numba_and_every_blas_pool(count):
    done = subprocess.run([sys.executable, "-c", PROBE, str(count)], capture_output=True,
                          text=True, check=True, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["numba"] == count
    assert seen["pools"] == [count]
    assert "openblas" in seen["apis"]   # numpy's BLAS was loaded and limited, not skipped
