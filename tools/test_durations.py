"""Refresh ``tests/durations.json``: seconds per test file, read from a JUnit XML report.

    python -m pytest -q -n 2 --junitxml=/tmp/junit.xml
    python tools/test_durations.py /tmp/junit.xml

The file only orders the work of ``pytest -n 2`` (tests/parallel.py: the longest files
first, so the two workers end together); a stale or missing entry costs wall time, never a
result.  JUnit's per-test time is setup + call + teardown, without the time a test waited
for a serial test on the other worker.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "tests" / "durations.json"


def file_of(classname: str) -> str | None:
    """``tests.kernels.test_gemm`` or ``tests.test_x.TestY`` -> the test file's path."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (ROOT / path).is_file():
            return path
    return None


def durations(junit: Path) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = file_of(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time", 0.0))
    return {path: round(s, 1) for path, s in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="pytest --junitxml report of a whole run")
    parser.add_argument("-o", "--output", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    table = durations(args.junit)
    if not table:
        print(f"{args.junit}: no test cases of this checkout's files", file=sys.stderr)
        return 2
    args.output.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{args.output}: {len(table)} files, {sum(table.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
