"""`--cache-model NAME`: named cores' cache geometries for callgrind's simulation
(convbench/harness/counters/cache_models.py), recorded in the results and labelled."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from convbench.harness.counters import cache_models
from convbench.results import upgrade
from tests.conftest import DATA, convbench_process

SUITE = DATA / "cache_model_suite.yaml"


# -- the table ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(cache_models.MODELS))
def test_every_geometry_is_valid_for_callgrind(name):
    """callgrind refuses a set count that is not a power of two; sizes are bytes."""
    model = cache_models.MODELS[name]
    assert model.source and model.ll_is
    for level, arg in model.geometry().items():
        size, ways, line = map(int, arg.split(","))
        sets = size // (ways * line)
        assert sets * ways * line == size, (level, arg)
        assert sets & (sets - 1) == 0, f"{name} {level}: {sets} sets"
        assert line in (32, 64, 128) and size >= 1024, (level, arg)
    # the table's figures are simulated as written unless ROUNDED says otherwise
    written = {"I1": model.i1, "D1": model.d1, "LL": model.ll}
    unrounded = {k: f"{v.size},{v.ways},{v.line}" for k, v in written.items()}
    assert (unrounded == model.geometry()) == (name not in cache_models.ROUNDED)


def test_rounding_matches_sim_for_the_host_ll():
    """A size whose set count is no power of two rounds down as sim.py rounds the host's LL
    (12 MiB 16-way, 64 B lines: 12288 sets -> 8192, 8 MiB)."""
    from convbench.harness.counters.sim import _power_of_two_sets

    level = cache_models.Level(12 * 1024 * 1024, 16, 64)
    assert level.arg() == f"{_power_of_two_sets(level.size, 16, 64)},16,64" == "8388608,16,64"


def test_lookup_is_case_insensitive_and_unknown_names_list_the_known():
    assert cache_models.get("Cortex-A72").name == "cortex-a72"
    with pytest.raises(Exception, match="known models: cortex-a72, cortex-a76"):
        cache_models.get("cortex-a53")
    assert "not a measurement" in cache_models.caption("zen4")


# -- the command line --------------------------------------------------------------------
def test_unknown_model_is_one_line_and_exit_2(cli, tmp_path):
    code, _out, err = cli("run", SUITE, "-o", tmp_path / "r", "--counters", "sim",
                         "--cache-model", "pentium-4", "-q")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "unknown cache model 'pentium-4'" in lines[0]
    assert all(name in lines[0] for name in cache_models.MODELS)
    assert not (tmp_path / "r").exists()


def test_a_model_needs_sim_counters(cli, tmp_path):
    code, _out, err = cli("run", SUITE, "-o", tmp_path / "r", "--cache-model", "zen4", "-q")
    assert code == 2 and "--counters sim" in err


# -- results format ----------------------------------------------------------------------
def test_format5_tables_gain_cache_model_host():
    table = pd.DataFrame({"reason": pd.Series(["", ""], dtype="string"),
                          "cpus": pd.Series(["0", "1"], dtype="string"),
                          "max_abs_err": [0.0, 0.0]})
    new = upgrade._v5_to_v6(upgrade.Contents({"format_version": 5}, table, pd.DataFrame()))
    assert new.manifest["format_version"] == 6
    assert list(new.table.columns) == ["reason", "cpus", "cache_model", "max_abs_err"]
    assert (new.table["cache_model"] == "host").all()


def test_compare_warns_across_cache_models():
    from convbench.compare.match import Sample, different_cache_models

    def sample(model: str) -> Sample:
        return Sample(key=("l",), case_id="c", suite="s", layer="l", variant="v", threads=1,
                      vector_width="auto", status="ok", cache_model=model)

    assert different_cache_models([(sample("zen4"), sample("zen4"))]) == []
    [warning] = different_cache_models([(sample("cortex-a72"), sample("apple-m1"))])
    assert "'cortex-a72'" in warning and "not comparable" in warning


# -- a real simulation -------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a72_and_m1_models_count_different_d1_misses(tmp_path):
    """The suite's layer works on ~60 KiB (input 25.6 KiB, output 25.6 KiB, weights 9 KiB):
    more than Cortex-A72's 32 KiB 2-way D1, less than Apple M1's 128 KiB.  Same code, same
    instructions, other caches: the D1 misses differ (2039 vs 578 per call when written),
    the instruction count hardly."""
    rows = {}
    for model in ("cortex-a72", "apple-m1"):
        out = tmp_path / model
        r = convbench_process("run", SUITE, "-o", out, "--counters", "sim", "--cache-model",
                              model, "-q", "--no-measure-machine")
        assert r.returncode == 0, r.stderr
        assert "under Arm Cortex-A72's caches" in r.stdout or model != "cortex-a72"
        table = pd.read_parquet(out / "results.parquet")
        assert len(table) == 1 and table["cache_model"].tolist() == [model]
        env = json.loads((out / "environment.json").read_text())
        assert env["cache_model"]["name"] == model
        assert env["cache_model"]["geometry"] == cache_models.MODELS[model].geometry()
        rows[model] = table.iloc[0]
    a72, m1 = rows["cortex-a72"], rows["apple-m1"]
    # the same code; Ir moves by a few hundred in 2.7M with what differs before the region
    # (sim.py's docstring), nothing like the D1 misses
    assert abs(a72["sim_ir"] - m1["sim_ir"]) < 1e-3 * a72["sim_ir"]
    assert a72["sim_d1mr"] + a72["sim_d1mw"] > m1["sim_d1mr"] + m1["sim_d1mw"]
