"""pyperf.json: the measured cases as a pyperf BenchmarkSuite.

One benchmark per ok case, named readably (``layer/algorithm/layout/params/t1/vauto``), with
one run per worker process holding its values in seconds per call (a pyperf run is one
process's values).  ``python -m pyperf stats|show|compare_to`` read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from convbench.identity import CaseKey


def benchmark_name(row: Mapping[str, Any]) -> str:
    return CaseKey.from_row(dict(row)).pyperf_name


def build_suite(rows: Iterable[Mapping[str, Any]], values: Mapping[str, Mapping[int, list[float]]],
                cpu_model: str) -> Any:
    """A ``pyperf.BenchmarkSuite`` of the ok rows (None when there is none yet)."""
    import pyperf

    benchmarks = []
    for row in rows:
        case_values = values.get(row["case_id"], {})
        if row["status"] != "ok" or not case_values:
            continue
        metadata = {"name": benchmark_name(row), "unit": "second", "loops": int(row["loops"]),
                    "threads": int(row["threads"]), "vector_width": str(row["vector_width"]),
                    "flops": int(row["flops"]), "layer": str(row["layer"]),
                    "variant": str(row["variant"]), "descriptor": str(row["descriptor"])}
        if isinstance(row.get("kernel_version"), str) and row["kernel_version"]:
            metadata["kernel_version"] = row["kernel_version"]
        if isinstance(row.get("cpus"), str) and row["cpus"]:
            metadata["cpu_affinity"] = row["cpus"]   # pyperf's key, the same cpulist form
        if cpu_model:
            metadata["cpu_model_name"] = cpu_model
        runs = [pyperf.Run(list(case_values[p]), warmups=None, metadata=metadata,
                           collect_metadata=False) for p in sorted(case_values)]
        benchmarks.append(pyperf.Benchmark(runs))
    return pyperf.BenchmarkSuite(benchmarks) if benchmarks else None


def write(path: Path, rows: Iterable[Mapping[str, Any]], values: Mapping[str, Mapping[int, list[float]]],
          cpu_model: str) -> bool:
    """Write ``path`` (caller makes it atomic); False when there is nothing to write."""
    suite = build_suite(rows, values, cpu_model)
    if suite is None:
        return False
    suite.dump(str(path), replace=True)
    return True
