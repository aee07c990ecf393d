"""tools/cache_model_table.py: the runs of several cache models side by side, read from
real results directories (written by the results store) through the guarded loader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from convbench.results.store import STATUS_COMPLETE, ResultsStore

TOOL = Path(__file__).resolve().parents[1] / "tools" / "cache_model_table.py"


def _row(kc: int, model: str, d1mr: int, dlmr: int) -> dict:
    variant = f"indirect/nhwc/KC={kc}/MC=20/MR=5/NR=64"
    # d1mr, dlmr in thousands of misses per call, of 400k data references
    counts = {"sim_ir": 2.5e6, "sim_dr": 3e5, "sim_dw": 1e5, "sim_d1mr": 1e3 * d1mr,
              "sim_d1mw": 0.0, "sim_dlmr": 1e3 * dlmr, "sim_dlmw": 0.0}
    return {"case_id": f"conv|{variant}|t1|vauto", "suite": "s", "layer": "conv",
            "variant": variant, "algorithm": "indirect", "layout": "nhwc",
            "params": json.dumps({"KC": kc, "MC": 20, "MR": 5, "NR": 64}, sort_keys=True),
            "threads": 1, "vector_width": "auto", "cache": "warm", "status": "ok",
            "reason": "", "median_s": 1e-3, "descriptor": "mb1ic4ih6oc4oh6kh3ph1",
            "cache_model": model,
            "ctr_source": "simulated (callgrind cache-sim)", **counts,
            "l1d_miss_rate": d1mr / 400, "llc_miss_rate": dlmr / d1mr,
            "sim_ll_global_miss_rate": dlmr / 400}


def _run_dir(path: Path, rows: list[dict]) -> Path:
    store = ResultsStore.create(path, "s", "name: s\n", [r["case_id"] for r in rows],
                                {"cpu_model": "test"}, {})
    for row in rows:
        store.add(row, [])
    store.set_status(STATUS_COMPLETE)
    store.close()
    return path


def _tool(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_models_side_by_side_per_layer_and_setting(tmp_path: Path) -> None:
    a72 = _run_dir(tmp_path / "a72", [_row(64, "cortex-a72", 40, 10),
                                      _row(4608, "cortex-a72", 80, 60)])
    spr = _run_dir(tmp_path / "spr", [_row(64, "sapphire-rapids", 20, 2),
                                      _row(4608, "sapphire-rapids", 40, 4)])
    done = _tool(a72, spr)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("| layer | setting | instructions (M) | D1 cortex-a72 | LL cortex-a72 "
                        "| LL misses cortex-a72 | D1 sapphire-rapids | LL sapphire-rapids "
                        "| LL misses sapphire-rapids |")
    # only the parameter that differs names the setting; rates as the rows recorded them
    assert lines[2] == ("| conv | KC=64 | 2.50 | 10.00% | 25.00% | 10.0k | 5.00% | 10.00% "
                        "| 2.0k |")
    assert lines[3] == ("| conv | KC=4608 | 2.50 | 20.00% | 75.00% | 60.0k | 10.00% | 10.00% "
                        "| 4.0k |")
    long = _tool(a72, spr, "--long", "--csv")
    assert long.returncode == 0, long.stderr
    assert len(long.stdout.splitlines()) == 1 + 4
    assert "conv,KC=4608,cortex-a72,2500000.0,400000.0,80000.0,60000.0," in long.stdout


def test_one_model_twice_or_no_counts_is_one_line_and_exit_2(tmp_path: Path) -> None:
    a72 = _run_dir(tmp_path / "a72", [_row(64, "cortex-a72", 40, 10)])
    again = _run_dir(tmp_path / "again", [_row(64, "cortex-a72", 40, 10)])
    plain = _row(64, "host", 40, 10)
    for key in [k for k in plain if k.startswith("sim_")]:
        del plain[key]
    timed = _run_dir(tmp_path / "timed", [plain])
    for args, words in (((a72, again), "in two of the directories"),
                        ((timed,), "no simulated counts"),
                        ((tmp_path / "missing",), "no such results directory")):
        done = _tool(*args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
