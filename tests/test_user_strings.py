"""Hostile layer names from a suite reach every output defused (issue 16, items 9 and 11).

A layer name is what a suite's author typed: two ``$`` (matplotlib mathtext), a formula
(a spreadsheet runs it), an escape sequence (a terminal obeys it), a Markdown link or image
(a viewer follows or loads it), HTML, a table pipe.  Each output here is checked for what
would act, not for one exact spelling of the escape.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from convbench.report.build import build_report
from convbench.report.summary import run_summary
from convbench.results.load import load_results
from tests.results_factory import write_results

# a$\frac$b and $x^$ are mathtext that fails to parse: the report crashed on them (item 9)
NAMES = ("a$x$b", "a$\\frac$b", "$x^$", '=HYPERLINK("http://x")', "\x1b[31mred",
         "[link](javascript:alert(1))", "![i](http://e/x.png)", "a|b",
         "<img src=x onerror=alert(1)>", "@SUM(1+1)", "\x1b[2J")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cases(scale: float) -> list[dict]:
    cases = []
    for i, name in enumerate(NAMES):
        for algorithm, layout, median in (("direct", "nchw", 4e-3), ("im2col", "nhwc", 2e-3)):
            cases.append(dict(layer=name, algorithm=algorithm, layout=layout,
                              median=median * scale * (1 + i / 10),
                              params={"gemm": "$x$"} if algorithm == "im2col" else {}))
    cases.append(dict(layer=NAMES[2], algorithm="winograd", layout="nchw", median=0,
                      status="fail", reason="\x1b[2Jcleared [x](javascript:1)"))
    return cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("hostile")
    return [write_results(root / "before$", _cases(1.0)),
            write_results(root / "=after", _cases(0.9), seed=1)]


def test_html_report_shows_every_name_as_text(runs, tmp_path):
    page = build_report(runs, tmp_path / "html", "html").read_text()
    # booleans, not the page: pytest's diff of a page of inlined PNGs takes minutes
    raw = ("<img src=x" in page, "\x1b" in page, "<script>alert" in page)
    assert raw == (False, False, False)
    assert ("&lt;img src=x onerror=alert(1)&gt;" in page) is True


def test_markdown_report_has_no_link_image_html_or_escape(runs, tmp_path):
    text = build_report(runs, tmp_path / "md", "md").read_text()
    assert ("\x1b" in text) is False
    assert not re.search(r"(?<!\\)\]\(javascript", text)   # no [..](javascript:..) link
    assert "![i]" not in text and "<img" not in text
    # the only images are the figures, each a PNG file next to the report
    for target in re.findall(r"!\[[^\]]*\]\(([^)]*)\)", text):
        assert (tmp_path / "md" / target).is_file() and target.endswith(".png")
    for table in re.split(r"\n\n", text):
        rows = [r for r in table.splitlines() if r.startswith("|")]
        cells = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
        assert len(cells) <= 1, f"a pipe broke a row: {rows}"


def test_csv_report_defuses_formulas(runs, tmp_path):
    out = build_report(runs, tmp_path / "csv", "csv")
    seen = 0
    for path in out.glob("*.csv"):
        with path.open(newline="") as f:
            for row in csv.reader(f):
                for cell in row:
                    assert not cell.startswith(FORMULA_START), (path.name, cell)
                    seen += "HYPERLINK" in cell
    assert seen, "the formula layer should appear in the CSV files"


def test_terminal_outputs_hold_no_escape_sequence(runs, tmp_path, cli):
    summary = run_summary(load_results(runs[0]).table)
    assert "\x1b" not in summary and "\\x1b[31mred" in summary
    code, out, err = cli("compare", *runs)
    assert code in (0, 1), err
    assert "\x1b" not in out + err
    code, out, err = cli("compare", *runs, "--format", "md", "--junit", tmp_path / "j.xml")
    assert code in (0, 1), err
    assert "\x1b" not in out and not re.search(r"(?<!\\)\]\(javascript", out)
    names = {c.get("name") for c in ElementTree.parse(tmp_path / "j.xml").iter("testcase")}
    assert any("HYPERLINK" in n for n in names)


def test_cli_report_succeeds_on_dollar_names(runs, tmp_path, cli):
    for fmt in ("html", "md", "csv"):
        code, out, err = cli("report", *runs, "--format", fmt, "-o", tmp_path / fmt)
        assert code == 0, err
        assert "\x1b" not in out + err
