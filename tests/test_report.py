"""`convbench report`: the page's tables match the data, every figure is a valid PNG, runs
side by side, escaping of suite strings, and clear errors for bad results directories."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from click.testing import CliRunner

from convbench.cli import cli
from convbench.report import aggregate, units
from convbench.report.build import build_report
from convbench.results.load import ResultsError, load_results
from tests.report_cases import EVIL, MACHINE, sample_run
from tests.test_network_pass import TUNE_REFERENCE_S

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Tables(HTMLParser):
    """Every <table> of a page as {id: rows of cell texts} plus the page's image sources
    and script bodies (a minimal reader: no lxml here)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self.scripts: list[str] = []
        self._table = self._row = self._cell = self._script = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id", str(len(self.tables))), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "script":
            self._script = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = self._row = None
        elif tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._script is not None:
            self._script.append(data)


def _parse(path: Path) -> _Tables:
    parser = _Tables()
    parser.feed(path.read_text())
    return parser


def _frame(rows: list[list[str]]) -> pd.DataFrame:
    return pd.DataFrame(rows[1:], columns=rows[0])


def _same(shown: str, value) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return shown == ""
    if isinstance(value, float | int) and not isinstance(value, bool):
        # cells read in human units (units.py): times to 4 digits, shares in whole percent
        # above 10%, ratios and GFLOP/s to 2 decimals
        return math.isclose(units.parse(shown), float(value), rel_tol=1e-3, abs_tol=0.005)
    return shown == str(value)


def _assert_table_matches(rows: list[list[str]], expected: pd.DataFrame) -> None:
    shown = _frame(rows)
    assert list(shown.columns) == list(expected.columns)
    assert len(shown) == len(expected)
    for (_, got), (_, want) in zip(shown.iterrows(), expected.iterrows(), strict=True):
        for col in expected.columns:
            assert _same(got[col], want[col]), (col, got[col], want[col])


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    before = sample_run(root / "before", machine=MACHINE)
    after = sample_run(root / "after", scale=0.8, host="other-host", noise=0.3)
    out = root / "report"
    result = CliRunner().invoke(cli, ["report", str(before), str(after), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return before, after, out


def test_single_run_default_output_and_tables_match_the_data(tmp_path, monkeypatch):
    run = sample_run(tmp_path / "smoke", machine=MACHINE)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["report", str(run)])
    assert result.exit_code == 0, result.output
    page = tmp_path / "reports" / "smoke" / "index.html"
    assert f"wrote {Path('reports/smoke/index.html')}" in result.output and page.is_file()
    parsed = _parse(page)
    table = load_results(run).table
    _assert_table_matches(parsed.tables["best-0"], aggregate.best_by_algorithm(table))
    _assert_table_matches(parsed.tables["network-0"], aggregate.network_totals(table))
    _assert_table_matches(parsed.tables["failures-0"], aggregate.failures(table))
    _assert_table_matches(parsed.tables["counters_missing-0"],
                          aggregate.missing_counters(table))
    assert "joined" not in parsed.tables


def test_best_variant_and_speedups_are_right(tmp_path):
    table = load_results(sample_run(tmp_path / "r")).table
    best = aggregate.best_by_algorithm(table).set_index(["layer", "threads", "algorithm"])
    ok = table[table["status"] == "ok"]
    for (layer, threads, alg), row in best.iterrows():
        mine = ok[(ok.layer == layer) & (ok.threads == threads) & (ok.algorithm == alg)]
        assert row["median_s"] == mine["median_s"].min()
        direct = ok[(ok.layer == layer) & (ok.threads == threads) & (ok.algorithm == "direct")]
        base = ok[(ok.layer == layer) & (ok.threads == threads) & ok.baseline.astype(bool)]
        assert row["speedup_vs_direct"] == pytest.approx(direct.median_s.min() / row.median_s)
        assert row["speedup_vs_baseline"] == pytest.approx(base.median_s.min() / row.median_s)
    assert set(best.xs("direct", level="algorithm")["variant"]) == {"direct/nhwc"}


def test_own_code_that_is_not_vectorised_is_named_in_the_summary_and_report(tmp_path):
    """A run's rows carry each case's static profile; an own case whose code is not
    vectorised is a warning in the closing summary and a table of the report (a library
    row and a vectorised one are not listed)."""
    from convbench.report.summary import run_summary
    from tests.results_factory import write_results

    vectorised = {"asm_vectorisation": "vectorised",
                  "asm_profile": "vectorised: 4 x 256-bit FMA"}
    scalar = {"asm_vectorisation": "not vectorised",
              "asm_profile": "not vectorised: 4 scalar FP"}
    run = write_results(tmp_path / "r", [
        {"layer": "conv1", "algorithm": "direct", "layout": "nchw", "median": 2e-3,
         "extra": scalar},
        {"layer": "conv1", "algorithm": "direct", "layout": "nhwc", "median": 1e-3,
         "extra": vectorised},
        {"layer": "conv1", "algorithm": "onednn", "layout": "nchw", "median": 1e-3,
         "baseline": True}])
    table = load_results(run).table
    found = aggregate.not_vectorised(table)
    assert list(found["variant"]) == ["direct/nchw"]
    assert list(found["asm_profile"]) == ["not vectorised: 4 scalar FP"]
    text = run_summary(table)
    assert "warning: 1 own case(s) ran code whose arithmetic is not vectorised" in text
    assert "  conv1 direct/nchw t1: not vectorised: 4 scalar FP" in text
    best = aggregate.best_by_algorithm(table).set_index("algorithm")
    assert best.loc["direct", "asm_profile"] == vectorised["asm_profile"]
    build_report([run], tmp_path / "out")
    _assert_table_matches(_parse(tmp_path / "out" / "index.html").tables["not_vectorised-0"],
                          found)
    assert aggregate.not_vectorised(load_results(sample_run(tmp_path / "old")).table).empty


def test_a_layer_group_timed_beside_other_work_is_named_with_its_rerun(tmp_path):
    """The in-run reference read 3x the run's median in one layer's group (other work on
    the CPUs while it ran): the summary names that group, at its thread count, with the
    command that times it again, and the report lists it; 1.5x (within a quiet run's
    spread at 2 threads) and a quiet run are not flagged."""
    from convbench.report.summary import run_summary
    from tests.results_factory import write_results

    def case(layer, algorithm, threads, reference, median=1e-3):
        return {"layer": layer, "algorithm": algorithm, "layout": "nchw", "median": median,
                "threads": threads, "reference": reference, "baseline": algorithm == "onednn"}

    cases = [case(layer, algorithm, threads, 1e-3)
             for layer in ("conv1", "conv2", "conv3", "conv4") for threads in (1, 2)
             for algorithm in ("direct", "onednn")]
    quiet = load_results(write_results(tmp_path / "quiet", cases)).table
    assert aggregate.disturbed_groups(quiet).empty
    assert "beside other work" not in run_summary(quiet)
    slowed = {("conv2", 2): 3e-3, ("conv3", 2): 1.5e-3, ("conv4", 1): 1.5e-3}
    cases = [{**c, "reference": slowed.get((c["layer"], c["threads"]), 1e-3)} for c in cases]
    table = load_results(write_results(tmp_path / "busy", cases)).table
    found = aggregate.disturbed_groups(table)
    assert list(zip(found["layer"], found["threads"], strict=True)) == [("conv2", 2)]
    # the run's median at 2 threads: of 1, 3, 1.5 and 1 ms, 1.25
    assert found["slowdown"].iloc[0] == pytest.approx(3.0 / 1.25, rel=0.05)
    text = run_summary(table)
    assert "warning: 1 layer group(s) ran beside other work" in text
    assert "  convbench run test --threads 2 --cache warm --only layer=conv2    # reference" in text
    build_report([tmp_path / "busy"], tmp_path / "out")
    _assert_table_matches(_parse(tmp_path / "out" / "index.html").tables["disturbed-0"], found)


def test_network_totals_are_count_weighted(tmp_path):
    table = load_results(sample_run(tmp_path / "r")).table
    totals = aggregate.network_totals(table).set_index(["threads", "plan"])
    ok = table[(table.status == "ok") & (table.threads == 1)]
    best = ok.groupby("layer").median_s.min()
    counts = table.drop_duplicates("layer").set_index("layer").layer_count
    assert totals.loc[(1, "best plan"), "network_s"] == pytest.approx((best * counts).sum())
    assert totals.loc[(1, "direct"), "layers"] == "2/2"


def test_sensitivity_finds_the_tile_parameters_and_threads(tmp_path):
    table = load_results(sample_run(tmp_path / "r")).table
    sens = aggregate.sensitivity(table).set_index(["algorithm", "parameter"])
    assert sens.loc[("blocked", "ic_bn"), "usual_best"] == "4"
    assert sens.loc[("blocked", "oc_bn"), "usual_best"] == "16"
    assert sens.loc[("blocked", "ic_bn"), "slowest_over_fastest"] > 1
    assert sens.loc[("direct", "threads"), "usual_best"] == "2"
    assert aggregate.numeric_params(table, "blocked") == ["ic_bn", "oc_bn"]
    assert aggregate.numeric_params(table, "im2col") == []


def test_two_runs_side_by_side_join_on_identity(two_runs):
    before, after, out = two_runs
    parsed = _parse(out / "index.html")
    tables = {"before": load_results(before).table, "after": load_results(after).table}
    joined = aggregate.join_runs(tables)
    _assert_table_matches(parsed.tables["joined"], joined)
    assert {"best-0", "best-1", "env", "headline"} <= set(parsed.tables)
    # one environment table, a column per run
    env = {row[0]: row[1:] for row in parsed.tables["env"][1:]}
    assert parsed.tables["env"][0] == ["key", "before", "after"]
    assert env["host"] == ["testhost", "other-host"]
    assert env["machine.peak_gflops.1.512"][0] == "115"
    assert parsed.tables["headline"][0] == ["", "before, 1 thread", "before, 2 threads",
                                            "after, 1 thread", "after, 2 threads"]
    ratio = joined["time ratio [after/before]"]
    assert ratio.notna().sum() == (tables["before"].status == "ok").sum()


def test_every_figure_exists_and_is_a_valid_png(two_runs):
    out = two_runs[2]
    parsed = _parse(out / "index.html")
    pngs = sorted(out.glob("*.png"))
    names = {p.name for p in pngs}
    assert {"gflops_by_layer_t1.png", "gflops_by_layer_t2.png", "roofline_t1.png",
            "roofline_t2.png", "network_best_plan.png", "run_ratio.png", "thread_scaling.png",
            "heatmap_blocked_0.png", "heatmap_blocked_1.png", "counters.png"} <= names
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_MAGIC, png
        image = matplotlib.image.imread(png)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    # every PNG is inlined in the page (self-contained), one <img> each
    assert len(parsed.images) == len(pngs)
    assert all(src.startswith("data:image/png;base64,") for src in parsed.images)


def test_hostile_strings_are_escaped_everywhere(two_runs):
    out = two_runs[2]
    text = (out / "index.html").read_text()
    assert EVIL not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;b&gt;1e-4&lt;/b&gt;" in text and "<b>" not in text
    parsed = _parse(out / "index.html")
    assert len(parsed.scripts) == 1 and "alert" not in parsed.scripts[0]
    layers = {row[0] for row in parsed.tables["best-0"][1:]}
    assert EVIL in layers  # shown as text, exactly


def test_roofline_without_machine_limits_says_so(two_runs):
    text = (two_runs[2] / "index.html").read_text()
    assert "No machine limits in after" in text


def test_markdown_and_csv_formats(tmp_path):
    run = sample_run(tmp_path / "r1")
    md = build_report([run], tmp_path / "md", "md")
    text = md.read_text()
    assert md.name == "report.md" and "## Best variant per algorithm" in text
    assert EVIL not in text and "&lt;script&gt;" in text
    assert "![GFLOP/s by layer" in text and (tmp_path / "md" / "roofline_t1.png").is_file()
    out = build_report([run, sample_run(tmp_path / "r2", scale=0.5)], tmp_path / "csv", "csv")
    best = pd.read_csv(out / "run1_best.csv")
    expected = aggregate.best_by_algorithm(load_results(run).table)
    assert list(best["variant"]) == list(expected["variant"])
    assert (out / "runs_joined.csv").is_file()


def test_peak_share_is_recorded_from_the_runs_machine_limits(tmp_path):
    filled = load_results(sample_run(tmp_path / "m", machine=MACHINE)).table
    row = filled[(filled.status == "ok") & (filled.threads == 2)].iloc[0]
    assert row["peak_share"] == pytest.approx(row["gflops"] / 230.0)
    table = load_results(sample_run(tmp_path / "r")).table
    assert table["peak_share"].isna().all()


def _report(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["report", *map(str, args)])
    message = str(result.exception) if isinstance(result.exception, ResultsError) else ""
    return result.exit_code, message + result.output


def test_missing_directory_is_a_clear_error(tmp_path):
    code, message = _report(tmp_path / "nope")
    assert code != 0 and "no such results directory" in message


def test_partial_directory_names_what_is_missing(tmp_path):
    run = sample_run(tmp_path / "r")
    (run / "values.parquet").unlink()
    code, message = _report(run)
    assert code != 0 and "missing values.parquet" in message


def test_unfinished_run_says_how_many_cases_are_missing(tmp_path):
    run = sample_run(tmp_path / "r")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="interrupted", planned=[*manifest["planned"], "extra|case"])
    (run / "manifest.json").write_text(json.dumps(manifest))
    code, message = _report(run)
    assert code != 0 and "'interrupted'" in message and "1 of" in message


def test_incompatible_version_is_a_clear_error(tmp_path):
    run = sample_run(tmp_path / "r")
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    code, message = _report(run)
    assert code != 0 and "format version 99" in message


def test_errors_reach_the_user_as_one_line(tmp_path, capsys):
    from convbench.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["report", str(tmp_path / "nope")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("convbench: error:") and len(err.strip().splitlines()) == 1


# -- the network pass (convbench run --network) -------------------------------------------

@pytest.fixture(scope="module")
def network_run(tmp_path_factory):
    """A real network pass of tests/data/net_suite.yaml (plan from test_network_pass's
    hand-written records; the passes themselves measured, warm only, 3 values, and
    profiled over 3 passes)."""
    from convbench.cli import main
    from tests.test_network_pass import _make_plan

    root = tmp_path_factory.mktemp("network")
    _make_plan(root)
    out = root / "net-results"
    with pytest.raises(SystemExit) as done:
        main(["run", "--network", str(root / "plan.json"), "-o", str(out), "--cache",
              "warm", "--values", "3", "--min-time", "0.001", "--warmups", "0",
              "--profile", "3"])
    assert done.value.code == 0
    return out


def test_network_pass_section_holds_the_measured_passes(network_run, tmp_path):
    report = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", str(network_run), "-o", str(report)])
    assert result.exit_code == 0, result.output
    page = (report / "index.html").read_text()
    parsed = _parse(report / "index.html")
    frame = pd.read_parquet(network_run / "network.parquet").set_index("pass")
    shown = _frame(parsed.tables["network-pass-0"]).set_index("pass")
    assert '<h2>Network pass</h2>' in page
    assert f"<h1>convbench report: {network_run.name}</h1>" in page
    for label in ("plan", "all-nchw", "all-nhwc", "all-nchwxc", "local-best",
                  "local-best-nchw-glue"):
        assert _same(shown.loc[label, "median_s"], frame.loc[label, "median_s"]), label
        assert _same(shown.loc[label, "predicted_s"], frame.loc[label, "predicted_s"])
        ratio = frame.loc["plan", "median_s"] / frame.loc[label, "median_s"]
        assert _same(shown.loc[label, "time ratio plan/pass"], ratio)
        error = frame.loc[label, "predicted_s"] / frame.loc[label, "median_s"] - 1
        assert _same(shown.loc[label, "prediction error"], error)
        # at run speed: the prediction x this run's reference / the records' (1 ms)
        reference_now = frame.loc[label, "median_s"] / frame.loc[label, "ref_ratio"]
        scaled = frame.loc[label, "predicted_s"] * reference_now / TUNE_REFERENCE_S
        assert _same(shown.loc[label, "prediction error at run speed"],
                     scaled / frame.loc[label, "median_s"] - 1)
    bound = shown.loc["per-layer-bound"]
    assert bound["median_s"] == "" and "computed bound" in bound["what"]
    assert "not a runnable plan" in bound["what"]
    assert _same(bound["predicted_s"], frame.loc["per-layer-bound", "predicted_s"])
    # which layers pay a transform, and why (plan.json's reasons)
    plan = json.loads((network_run / "plan.json").read_text())
    paying = [s for s in plan["ops"] if s["transforms"]]
    transforms = _frame(parsed.tables["network-transforms-0"])
    assert list(transforms["op"][:len(paying)]) == [s["op"] for s in paying]
    assert all(transforms["why"][:len(paying)] == [s["why"] for s in paying])
    assert any(src.startswith("data:image/png;base64,") for src in parsed.images)
    assert (report / "network_pass_0.png").read_bytes().startswith(PNG_MAGIC)
    # conv by conv inside the passes: ORT's node over the plan's conv, from the profile
    ops = pd.read_parquet(network_run / "network_ops.parquet")
    convs = ops[(ops.part == "op") & (ops.kind == "conv")].pivot_table(
        index="op", columns="pass", values="measured_s")
    in_pass = _frame(parsed.tables["network-in-pass-0"]).set_index("op")
    assert set(in_pass.index) == {"conv1", "conv2", "conv3"}
    for op in in_pass.index:
        assert _same(in_pass.loc[op, "library/plan"],
                     convs.loc[op, "onnxruntime"] / convs.loc[op, "plan"])
    assert "Conv by conv inside the passes" in page
    # the answer: a directory with a network pass and no sweep leads with the pass
    headline = _frame(parsed.tables["headline"])
    cell = headline.iloc[0, 1]
    assert "measured" in cell and units.seconds(frame.loc["plan", "median_s"]) in cell


def test_the_answer_prefers_the_measured_pass_over_the_sum_of_layers(network_run,
                                                                      tmp_path):
    import shutil

    run = sample_run(tmp_path / "both")
    for name in ("network.parquet", "plan.json"):
        shutil.copy(network_run / name, run / name)
    report = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", str(run), "-o", str(report)])
    assert result.exit_code == 0, result.output
    parsed = _parse(report / "index.html")
    headline = _frame(parsed.tables["headline"]).set_index("")
    measured = pd.read_parquet(network_run / "network.parquet").set_index("pass")
    one, two = headline.iloc[0, 0], headline.iloc[0, 1]   # 1 thread: passed; 2: none
    assert one.startswith(units.seconds(measured.loc["plan", "median_s"]) + " measured")
    assert "the sum of the best layers alone" in one
    assert "measured" not in two
    assert "network-pass-0" in parsed.tables and "best-0" in parsed.tables


def test_a_damaged_network_parquet_is_a_clear_error(network_run, tmp_path):
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(network_run, damaged)
    (damaged / "network.parquet").write_bytes(b"PAR1 not a table")
    code, message = _report(damaged)
    assert code != 0 and "network.parquet" in message and "not a readable parquet" in message
