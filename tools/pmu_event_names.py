"""Writes the perf event-name lists under tests/data/pmu_events/ from a Linux source tree.

Owns one job: turn perf's per-core JSON event files
(``tools/perf/pmu-events/arch/<arch>/<vendor?>/<core>/*.json``) into sorted, lower-case
name lists, one per core, that tests/test_event_names.py checks convbench's event maps
against.  Only names are kept (facts); no description or code leaves the Linux tree.

Usage: python tools/pmu_event_names.py LINUX_TREE [OUT_DIR] [--note "how the tree was got"]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ARCH = Path("tools/perf/pmu-events/arch")

# output file -> (directory under ARCH, the cores convbench names that perf maps to it)
CORES = {
    "neoverse-n1": ("arm64/arm/neoverse-n1", "Neoverse N1 (CPU part 0xd0c)"),
    "neoverse-v1": ("arm64/arm/neoverse-v1", "Neoverse V1 (CPU part 0xd40)"),
    "neoverse-n2-v2": ("arm64/arm/neoverse-n2-v2",
                       "Neoverse N2 (0xd49) and V2 (0xd4f): one directory in perf's "
                       "arm64/mapfile.csv"),
    "cortex-a57-a72": ("arm64/arm/cortex-a57-a72",
                       "Cortex-A72 (0xd08; shares perf's directory with Cortex-A57)"),
    "cortex-a76": ("arm64/arm/cortex-a76", "Cortex-A76 (CPU part 0xd0b)"),
    "cortex-a77": ("arm64/arm/cortex-a77", "Cortex-A77 (CPU part 0xd0d)"),
    "cortex-a78": ("arm64/arm/cortex-a78", "Cortex-A78 (CPU part 0xd41)"),
    "sapphirerapids": ("x86/sapphirerapids", "Intel Sapphire Rapids"),
    "skylake": ("x86/skylake", "Intel Skylake client (no AVX-512)"),
    "graniterapids": ("x86/graniterapids", "Intel Granite Rapids"),
    "amdzen4": ("x86/amdzen4", "AMD Zen 4"),
}

# No list for Cortex-A53: perf's cortex-a53 files name only its IMPLEMENTATION DEFINED
# events (and a few others), not the architectural ones (CPU_CYCLES, L1D_CACHE...), which
# perf then finds in the kernel driver's sysfs names; a missing name proves nothing there.

# The same names as read from torvalds/linux with the research tools (path in the core's
# directory, commit of the stored version): the files that define the events convbench maps.
TORVALDS_READS = {
    "neoverse-n1": [("general.json", "0604aa87b098740f2e517a584552591cbf2209d7"),
                    ("retired.json", "c05b27c866726024374de013d8be1b7724a8dd90"),
                    ("l1d_cache.json", "c05b27c866726024374de013d8be1b7724a8dd90"),
                    ("spec_operation.json", "6757641d3982d745a57d1d982656045e8d7b29ac")],
    "neoverse-v1": [("general.json", "c05b27c866726024374de013d8be1b7724a8dd90"),
                    ("retired.json", "6b93f350e55f3f2ee071dd41109d936abfba8ebf"),
                    ("ll_cache.json", "c05b27c866726024374de013d8be1b7724a8dd90"),
                    ("fp_operation.json", "c05b27c866726024374de013d8be1b7724a8dd90")],
    "neoverse-n2-v2": [("general.json", "4473949074c35072f598bd525ae51d5455f05745"),
                       ("retired.json", "6867849aac964c47532897b4f843dfb2311216db"),
                       ("ll_cache.json", "7685b334d1e4927cc73b62c65293ba65748d9c52"),
                       ("fp_operation.json", "254a142007114cad7b0a901215c1558e4315d46f")],
    "cortex-a57-a72": [("bus.json", "313267e59070c83824a94d72d710471d5e24575c"),
                       ("instruction.json", "dd7ce6547aeec06fc67a6ac36c958f4a9d352f37")],
    "cortex-a76": [("bus.json", "9c3a985f88fa4de82bf4bda906095ce6444e9039"),
                   ("cache.json", "6757641d3982d745a57d1d982656045e8d7b29ac"),
                   ("instruction.json", "c05b27c866726024374de013d8be1b7724a8dd90")],
    "sapphirerapids": [("floating-point.json", "12c6385eebb8b24814055b257eaeaa9f931faccf")],
    "graniterapids": [("floating-point.json", "0e08908841999354e86e85a38d3ad268a59924b2")],
    "amdzen4": [("floating-point.json", "4515dda146c17d2d088578cc39136f8d046d1b94")],
}
# perf's arm64/mapfile.csv (which directory serves which CPU part), torvalds/linux at
# e80b500370e71b8cd7dd64be4080cee0a3e5068f: 0xd0b cortex-a76, 0xd0c neoverse-n1,
# 0xd49 and 0xd4f neoverse-n2-v2, 0xd08 cortex-a57-a72 (the same in 6.12.117).

# the Unit of a core PMU on hybrid Intel parts; any other Unit is an uncore PMU
CORE_UNITS = ("cpu", "cpu_core", "cpu_atom")

# where perf's jevents.py looks up an ArchStdEvent on arm64: the common events, then the
# recommended ones; sbsa.json holds standard metrics, which are not events
ARM_STD_EVENTS = ("arm64/common-and-microarch.json", "arm64/recommended.json")
ARM_STD_METRICS = ("arm64/sbsa.json",)


def _entries(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    # counter.json / metricgroups.json are objects describing counters or groups
    return data if isinstance(data, list) else []


def _names_in(files: list[Path]) -> set[str]:
    return {e["EventName"].lower() for f in files for e in _entries(f) if "EventName" in e}


def core_event_names(tree: Path, core_dir: str) -> tuple[list[str], list[str]]:
    """The sorted core-PMU event names of one directory, and the JSON files read.

    Left out: metrics (``MetricName``) and events of a ``Unit`` that is no core's (uncore
    PMUs such as Intel's CHA or AMD's L3PMC, which perf cannot attach to one process, so a
    per-process map must not name them).
    """
    arch = tree / ARCH
    std = _names_in([arch / p for p in ARM_STD_EVENTS])
    std_metrics = {e.get("MetricName", "").lower()
                   for p in ARM_STD_METRICS for e in _entries(arch / p)}
    files = sorted((arch / core_dir).glob("*.json"))
    names: set[str] = set()
    for f in files:
        for e in _entries(f):
            if "MetricName" in e or e.get("Unit", "cpu") not in CORE_UNITS:
                continue
            if "EventName" in e:
                names.add(e["EventName"].lower())
            elif "ArchStdEvent" in e:
                name = e["ArchStdEvent"].lower()
                if name in std:
                    names.add(name)
                elif name not in std_metrics:
                    raise ValueError(f"{f}: ArchStdEvent {name} is in no standard list")
    return sorted(names), [str(f.relative_to(tree)) for f in files]


def linux_version(tree: Path) -> str:
    fields = dict(line.split(" = ", 1) for line in (tree / "Makefile").read_text().splitlines()
                  if line.split(" = ", 1)[0] in ("VERSION", "PATCHLEVEL", "SUBLEVEL"))
    return f"{fields['VERSION']}.{fields['PATCHLEVEL']}.{fields['SUBLEVEL']}"


def write_lists(tree: Path, out: Path, source_note: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    version = linux_version(tree)
    for stem, (core_dir, cores) in CORES.items():
        names, files = core_event_names(tree, core_dir)
        header = [f"# perf's core-PMU event names for {cores}, lower-case, sorted.",
                  f"# Source: Linux {version}{source_note}, {ARCH}/{core_dir}/*.json:",
                  *(f"#   {Path(f).name}" for f in files)]
        if core_dir.startswith("arm64"):
            header.append("# ArchStdEvent names resolved in " +
                          " and ".join(f"{ARCH}/{p}" for p in ARM_STD_EVENTS) + ".")
        header.append("# Left out: metrics, and events of uncore PMUs (a Unit that is no core's).")
        reads = TORVALDS_READS.get(stem, [])
        if reads:
            header.append("# The same names in torvalds/linux (path in that directory @ commit):")
            header += [f"#   {name} @ {commit}" for name, commit in reads]
        (out / f"{stem}.txt").write_text("\n".join(header + names) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="a Linux source tree")
    parser.add_argument("out", type=Path, nargs="?", default=Path("tests/data/pmu_events"))
    parser.add_argument("--note", default="", help="e.g. ' (Debian linux-source-6.12 ...)'")
    args = parser.parse_args()
    write_lists(args.tree, args.out, args.note)
