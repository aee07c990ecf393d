"""Open the report in headless Chromium: it renders, takes a screenshot, logs no console
errors, and the inline sort script sorts.  Needs Debian's ``chromium`` package
(``apt-get install -y chromium``); skipped with that reason where it is missing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from convbench.report.build import build_report
from tests.report_cases import MACHINE, sample_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--window-size=1400,2000")
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] \"(.*)\", source: (\S+)")


def _chromium(page: Path, tmp: Path, screenshot: Path) -> list[tuple[str, str]]:
    """Load ``page``, write a screenshot, return the page's console messages."""
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}",
                           f"--screenshot={screenshot}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return CONSOLE.findall(done.stderr)


def _probed(page: Path, tmp: Path, tag: str, script: str) -> tuple[Any, list[tuple[str, str]]]:
    """Load a copy of ``page`` with ``script`` (JavaScript that logs ``TAG json``) before
    ``</body>``; the one logged value, decoded, and every console message."""
    copy = page.parent / f"{tag.lower()}.html"
    copy.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    messages = _chromium(copy, tmp, tmp / f"{tag.lower()}.png")
    logged = [m for m, _ in messages if m.startswith(f"{tag} ")]
    assert len(logged) == 1, messages
    return json.loads(logged[0].removeprefix(f"{tag} ")), messages


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    runs = [sample_run(root / "before", machine=MACHINE),
            sample_run(root / "after", scale=0.8, noise=0.3)]
    return build_report(runs, root / "report")


def test_page_renders_without_console_errors(page, tmp_path):
    shot = tmp_path / "page.png"
    messages = _chromium(page, tmp_path, shot)
    assert messages == [], f"console messages: {messages}"
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG"
    image = matplotlib.image.imread(shot)
    assert image.shape[:2] == (2000, 1400)
    assert image[..., :3].std() > 0.05  # not a blank page


def test_clicking_a_header_sorts_its_table(page, tmp_path):
    # a copy of the page with a script that clicks median_s and logs the column
    probe = """
    var t = document.getElementById("best-0"), heads = t.tHead.rows[0].cells, col = -1;
    for (var i = 0; i < heads.length; i++) { if (heads[i].textContent === "median_s") col = i; }
    var column = function () {
      return Array.prototype.map.call(t.tBodies[0].rows,
                                      function (r) { return r.cells[col].textContent; });
    };
    heads[col].click();
    var up = column();
    heads[col].click();
    var down = column();
    console.log("SORTCHECK " + JSON.stringify([up, down]));
    """
    (up, down), messages = _probed(page, tmp_path, "SORTCHECK", probe)
    assert len(messages) == 1, messages
    # cells read "900 µs", "1.062 ms": sorted by the time they show, not by the digits
    from convbench.report.units import parse

    values = [parse(v) for v in up]
    assert values == sorted(values) and len(values) == 16
    assert [parse(v) for v in down] == sorted(values, reverse=True)


def _best_plan_seconds(run: Path) -> dict[int, float]:
    """From results.parquet alone: per thread count, the sum over layers of the fastest ok
    median time x the layer's count (what the headline calls the best plan)."""
    import pandas as pd

    frame = pd.read_parquet(run / "results.parquet")
    ok = frame[frame["status"] == "ok"]
    fastest = ok.groupby(["threads", "layer"])["median_s"].min().reset_index()
    counts = frame.drop_duplicates("layer").set_index("layer")["layer_count"].fillna(1)
    fastest["total"] = fastest["median_s"] * fastest["layer"].map(counts)
    return {int(t): float(s) for t, s in fastest.groupby("threads")["total"].sum().items()}


def test_headline_comes_first_and_holds_the_best_plan(page, tmp_path):
    from convbench.report import units

    probe = """
    var first = document.querySelector("section");
    var cells = Array.prototype.map.call(
      document.querySelectorAll("#headline tr"),
      function (r) { return Array.prototype.map.call(r.cells, function (c) {
        return c.textContent; }); });
    var env = document.getElementById("environment");
    console.log("HEADCHECK " + JSON.stringify({first: first.id, rows: cells,
      last: document.querySelector("section:last-of-type").id,
      envShown: env.querySelector("details").open}));
    """
    seen, _ = _probed(page, tmp_path, "HEADCHECK", probe)
    assert seen["first"] == "headline" and seen["last"] == "environment"
    assert seen["envShown"] is False            # folded until clicked
    header, *rows = seen["rows"]
    network = dict(zip(header, next(r for r in rows if r[0].startswith("network time")),
                       strict=True))
    for run in ("before", "after"):
        for threads, total in _best_plan_seconds(page.parent.parent / run).items():
            column = f"{run}, {threads} thread{'s' if threads > 1 else ''}"
            assert network[column].startswith(units.seconds(total) + " ("), (column, network)


def test_no_table_scrolls_sideways_at_1400_px(page, tmp_path):
    """Runs side by side fit the 1400 px window: every table's block is as wide as its
    table, runs that do not fit in a row move below, headers and variant ids wrap; so
    neither the page nor any scroll box is wider than what it shows."""
    probe = """
    var wide = [];
    document.querySelectorAll("div.scroll").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        wide.push(box.firstChild.id + " " + box.scrollWidth + ">" + box.clientWidth);
      }
    });
    var doc = document.documentElement;
    console.log("WIDECHECK " + JSON.stringify({page: [doc.scrollWidth, doc.clientWidth],
                                               boxes: document.querySelectorAll(
                                                 "div.scroll").length, wide: wide}));
    """
    seen, _ = _probed(page, tmp_path, "WIDECHECK", probe)
    assert seen["boxes"] > 10 and seen["wide"] == [], seen
    assert seen["page"][0] <= seen["page"][1], seen
