"""README.md's five-minute tour, run as written: every ``$ convbench ...`` line of the
tour's console blocks, in order, in one scratch directory; each must exit 0 and print every
line the README shows under it.

A shown line matches with its numbers, variant ids (anything with a "/"), time units and
rule lines (``-----``) as wildcards, "faster" and "slower" as either (the sign of a
ratio near 1), and any run of spaces as any whitespace: those differ from host to host and
run to run; the other words do not.  ``...`` marks left-out lines.  Runs
get ``-q`` (no progress bar); the smoke suite's timing is already the shortest.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOUR = "## Five-minute tour"
NUMBER = r"~?[-+]?\d[\d.]*(?:e[-+]?\d+)?%?x?"   # ~: a ratio not resolved (summary.py)


def tour_steps(readme: str) -> list[tuple[str, list[str]]]:
    """(command, lines shown after it) for every ``$ `` line of the tour's console blocks."""
    section = readme.split(TOUR, 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif line.strip() and line.strip() != "...":
                steps[-1][1].append(line)
    return steps


def _token(word: str) -> str:
    if re.fullmatch(r"-+", word):
        return r"-+"
    if "/" in word and not word.startswith(("results", "reports")):
        return r"\S+"                              # a variant id: the fastest one varies
    if word in ("us", "ms", "s"):
        return r"(?:us|ms|s)"
    if re.fullmatch(NUMBER, word):
        return NUMBER
    if word in ("faster", "slower"):
        return r"(?:faster|slower)"                 # "own 1.41x slower": a number's sign
    return re.escape(word)


def line_pattern(line: str) -> re.Pattern[str]:
    """A shown line as a regular expression (see the module docstring)."""
    words = []
    for word in line.split():
        # "(28.59" and "slower)": punctuation around a number stays literal
        head, core, tail = re.fullmatch(r"([(\[]*)(.*?)([)\],:;]*)", word).groups()
        words.append(re.escape(head) + _token(core) + re.escape(tail))
    return re.compile(r"\s+".join(words))


def test_tour_patterns_read_numbers_and_variants_as_wildcards():
    shown = ("network total at 1 thread(s), best plan (fastest variant per layer x count) "
             "over 3/3 layers: 144.4 us (28.59 GFLOP/s)")
    printed = shown.replace("144.4 us", "1.2 ms").replace("28.59", "30.01")
    assert line_pattern(shown).search(printed)
    assert not line_pattern(shown).search(printed.replace("best plan", "worst plan"))
    row = "1  conv1x1   1  im2col/nhwc/gemm=blas   20.68 us    19.41  onnxruntime/nchw8c  0.92"
    assert line_pattern(row).search("1 conv1x1 1 direct/nchw 31 us 12.00 xnnpack/nhwc 1.05")
    own = "own kernels alone 206.8 us, libraries alone 147 us: own 1.41x slower"
    assert line_pattern(own).search(own.replace("1.41x slower", "1.02x faster"))
    assert not line_pattern(own).search(own.replace("slower", "behind"))


@pytest.mark.serial   # its compare judges two real runs
def test_the_tour_runs_as_written(tmp_path):
    steps = tour_steps((ROOT / "README.md").read_text())
    commands = [command for command, _ in steps]
    assert [c.split()[:2] for c in commands] == [
        ["convbench", "run"], ["convbench", "report"], ["convbench", "check"],
        ["convbench", "run"], ["convbench", "compare"]], commands
    for command, shown in steps:
        args = command.split()[1:]
        if args[0] == "run":
            args.append("-q")
        done = subprocess.run([sys.executable, "-m", "convbench", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
        missing = [line for line in shown if not line_pattern(line).search(done.stdout)]
        if missing:
            pytest.fail(f"{command}: README lines not printed:\n" + "\n".join(missing)
                        + f"\n--- printed:\n{done.stdout[-4000:]}")
