"""Hostile suites, descriptors and run options: each refused on one line that says where.

Issue 16 (hardening) listed inputs that validated but broke later (repeats that collide in
the results, NaN seconds, strides of 0, sizes past int64), inputs that exhausted memory
(alias bombs, 10^10-case grids, terabyte layers) and inputs that crashed with a traceback
(non-UTF-8 text, 10,000 nested brackets).  Every test here goes through the command line
and asserts the same contract: exit code 2, one stderr line ``convbench: error: ...`` that
names the file and the field, no traceback.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from convbench.errors import ConvbenchError, SuiteError
from convbench.harness.plan import build_plan
from convbench.spec.limits import MAX_LAYER_BYTES, MAX_PLAN_CASES, shown
from convbench.spec.suite import load_suite, parse_suite
from tests.conftest import DATA, ROOT, convbench_process

HEAD = "name: bad\ndescription: a suite with a mistake in it\n"
LAYER = "layers:\n  - {name: ok, shape: mb1ic8ih16oc8oh16kh3ph1}\n"


def _write(tmp_path: Path, text: str | bytes, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _refused(code: int, err: str, *names: str) -> str:
    """The CLI's contract for bad input: exit 2, one line, no traceback; names appear."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("convbench: error: ")
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def _show(cli, path: Path, *names: str) -> str:
    code, _, err = cli("show", path)
    return _refused(code, err, str(path), *names)


def _dry_run(cli, path: Path, *args: str, names: tuple[str, ...] = ()) -> str:
    code, _, err = cli("run", path, "--dry-run", *args)
    return _refused(code, err, *names)


# -- item 2: repeated sweep entries -------------------------------------------------------
@pytest.mark.parametrize(("sweep", "fld"), [
    ("threads: [1, 1]", "sweep.threads"),
    ("vector_widths: [auto, auto]", "sweep.vector_widths"),
    ("vector_widths: [256, '256']", "sweep.vector_widths"),   # one id: v256
    ("cache: [warm, warm]", "sweep.cache"),
    ("algorithms: [direct, direct]", "sweep.algorithms"),
    ("layouts: [nchw, nhwc, nchw]", "sweep.layouts"),
    ("params: {strassen: {depth: [1, 1]}}", "sweep.params.strassen.depth"),
    ("params: {im2col: {gemm: [blas, own, blas]}}", "sweep.params.im2col.gemm"),
])
def test_repeated_sweep_entry(cli, tmp_path, sweep, fld):
    path = _write(tmp_path, HEAD + LAYER + f"sweep:\n  {sweep}\n")
    line = _show(cli, path, f"{path}:6", f"field '{fld}'", "more than once")
    assert len(line) < 500


@pytest.mark.parametrize(("option", "value"), [
    ("--threads", "1,1"), ("--vector-widths", "auto,auto"), ("--cache", "warm,cold,warm")])
def test_repeated_override(cli, option, value):
    _dry_run(cli, DATA / "tiny_suite.yaml", option, value,
             names=(option, "more than once"))


def test_two_spellings_of_one_value_are_caught_by_the_plan(tmp_path):
    """A suite built in code skips the loader; the planner still refuses two cases with
    one id (depth 1 and "1" both print as depth=1)."""
    suite = parse_suite(HEAD + LAYER + "sweep: {algorithms: [strassen]}\n",
                        tmp_path / "code.yaml")
    sweep = dataclasses.replace(suite.sweep, params={"strassen": {"depth": (1, "1")}})
    with pytest.raises(SuiteError, match="share the id"):
        build_plan(dataclasses.replace(suite, sweep=sweep), cpu_count=1)


# -- item 4: memory ---------------------------------------------------------------------
def _alias_bomb(levels: int = 9) -> str:
    lines = [HEAD + LAYER.rstrip("\n"), "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_before_it_expands(cli, tmp_path):
    path = _write(tmp_path, _alias_bomb())
    t0 = time.perf_counter()
    _show(cli, path, f"{path}:6:", "alias *a0 is not allowed")
    assert time.perf_counter() - t0 < 5


def test_a_huge_value_is_echoed_short(cli, tmp_path):
    path = _write(tmp_path, HEAD + "layers:\n  - {name: x, shape: mb1ic8ih8oc8kh1, count: ["
                  + ", ".join(["long_value_" * 10] * 5000) + "]}\n")
    line = _show(cli, path, "field 'count'", "positive integer")
    assert len(line) < 500
    assert len(shown("x" * 10**6)) <= 80


def _grid_suite(tmp_path: Path) -> Path:
    """~3 x 10^10 cases before filters: 100 layers x indirect's 2000 MC x 2000 KC x 4 MR
    x 2 NR x 3 widths x 3 cache modes."""
    sizes = ", ".join(map(str, range(1, 2001)))
    layers = "".join(f"  - {{name: l{i}, shape: mb1ic8ih8oc8kh1}}\n" for i in range(100))
    return _write(tmp_path, HEAD + "layers:\n" + layers + textwrap.dedent(f"""\
        sweep:
          algorithms: [indirect]
          vector_widths: [auto, '256', '512']
          cache: [warm, cold-weights, cold]
          params: {{indirect: {{MC: [{sizes}], KC: [{sizes}], MR: [4, 5, 6, 8], NR: [48, 64]}}}}
        """), "grid.yaml")


def test_a_grid_of_ten_billion_cases_is_refused_before_it_is_expanded(cli, tmp_path):
    path = _grid_suite(tmp_path)
    t0 = time.perf_counter()
    line = _dry_run(cli, path, "--threads", "1", names=(f"{path}:104", "field 'sweep'"))
    assert time.perf_counter() - t0 < 10
    cases = int(line.split("expands to ")[1].split()[0])
    assert cases >= 10**10 and f"limit of {MAX_PLAN_CASES}" in line


_LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from convbench.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    # VmHWM: this image's peak RSS (ru_maxrss keeps the forking parent's across exec)
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    print("peak_rss_kib", hwm.split()[1], file=sys.stderr)
    raise
"""


@pytest.mark.parametrize("what", ["grid", "layer", "descriptor"])
def test_nothing_big_is_allocated_on_the_way_to_a_refusal(tmp_path, what):
    """With the address space capped at 1 GiB (numba and llvmlite load in ~100 MB), a
    10^10-case dry run, a 1 TiB layer in a suite and a 19 PiB descriptor given to check
    are refused: any attempt to allocate them would die of MemoryError instead."""
    args = {"grid": ["run", _grid_suite(tmp_path), "--dry-run", "--threads", "1"],
            "layer": ["check", _write(tmp_path, HEAD + "layers:\n  - {name: big, shape: "
                                      "mb64ic512ih1024oc512kh3ph1}\n")],
            "descriptor": ["check", "mb1ic99999ih99999oc9999kh1"]}[what]
    done = subprocess.run([sys.executable, "-c", _LIMITED, *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("convbench: error: ")
    assert "limit" in lines[0]
    peak_kib = int(lines[-1].split()[1])
    assert peak_kib < 500 * 1024


def test_layer_above_the_tensor_limit(cli, tmp_path):
    path = _write(tmp_path, HEAD + "layers:\n  - {name: big, ic: 512, ih: 1024, oc: 512, "
                  "kh: 3, ph: 1, mb: 64}\n")
    _show(cli, path, f"{path}:4", "layer 0 ('big')", "1.0 TiB", "limit of 4.0 GiB")
    assert MAX_LAYER_BYTES == 4 * 2**30


def test_descriptor_above_the_tensor_limit():
    done = convbench_process("check", "mb64ic512ih1024oc512kh3ph1")
    _refused(done.returncode, done.stderr, "mb64ic512ih1024oc512kh3ph1", "1.0 TiB",
             "limit of 4.0 GiB")


# -- item 6: values that validated but broke later --------------------------------------
@pytest.mark.parametrize(("layer", "fld"), [
    ("{name: wide, ic: 99999999999999999999999, ih: 8, oc: 8, kh: 1}", "ic"),
    ("{name: wide, ic: 8, ih: 8, oc: 8, kh: 1, count: 99999999999999999999999}", "count"),
    ("{name: flat, ic: 8, ih: 8, oc: 8, kh: 3, sh: 0}", "sh"),
    ("{name: flat, ic: 8, ih: 8, oc: 8, kh: 3, sw: -1}", "sw"),
    ("{name: wide, shape: mb1ic8ih99999999999999999999oc8kh1}", "shape"),
])
def test_sizes_out_of_range(cli, tmp_path, layer, fld):
    path = _write(tmp_path, HEAD + f"layers:\n  - {layer}\n")
    _show(cli, path, f"{path}:4", "layer 0", f"field '{fld}'")


@pytest.mark.parametrize(("timing", "fld"), [
    ("min_time: .nan", "min_time"), ("min_time: .inf", "min_time"),
    ("timeout: .nan", "timeout"), ("timeout: -.inf", "timeout"),
    ("values: 99999999999999999999", "values"), ("processes: 0", "processes"),
])
def test_timing_out_of_range(cli, tmp_path, timing, fld):
    path = _write(tmp_path, HEAD + LAYER + f"sweep:\n  timing: {{{timing}}}\n")
    _show(cli, path, f"{path}:6", f"field 'sweep.timing.{fld}'")


@pytest.mark.parametrize(("option", "value"), [
    ("--min-time", "nan"), ("--min-time", "inf"), ("--timeout", "inf"), ("--timeout", "nan"),
    ("--min-time", "-1")])
def test_timing_override_out_of_range(cli, option, value):
    _dry_run(cli, DATA / "tiny_suite.yaml", option, value, names=(option, "finite"))


def test_suite_name_longer_than_a_directory_name_may_be(cli, tmp_path):
    path = _write(tmp_path, "name: " + "n" * 300 + "\ndescription: d\n" + LAYER)
    line = _show(cli, path, f"{path}:1", "field 'name'", "64")
    assert len(line) < 500


# -- item 7: parameter values against their domains ---------------------------------------
@pytest.mark.parametrize(("sweep", "fld", "says"), [
    ("params: {im2col: {gemm: [Own]}}", "sweep.params.im2col.gemm", "one of blas, own"),
    ("params: {winograd9: {gemm: [own]}}", "sweep.params.winograd9", "unknown algorithm"),
    ("params: {im2col: {gemmm: [own]}}", "sweep.params.im2col.gemmm", "im2col takes gemm"),
    ("params: {direct: {MR: [4]}}", "sweep.params.direct.MR", "takes no parameters"),
    ("params: {indirect: {MR: ['4']}}", "sweep.params.indirect.MR", "one of 1, 2, 4, 5, 6, 8"),
    ("params: {indirect: {MR: [4.0]}}", "sweep.params.indirect.MR", "one of 1, 2, 4, 5, 6, 8"),
    ("params: {indirect: {KC: [0]}}", "sweep.params.indirect.KC", "an integer from 1"),
    ("params: {nchwc: {unroll_ker: [1]}}", "sweep.params.nchwc.unroll_ker", "False, True"),
    ("algorithms: [direct, winograd9]", "sweep.algorithms", "unknown algorithm"),
    ("{algorithms: [direct], layouts: [nchw16c]}", "sweep.layouts", "unknown layout"),
])
def test_sweep_names_and_values_checked_against_the_registry(cli, tmp_path, sweep, fld, says):
    text = f"sweep: {sweep}\n" if sweep.startswith("{") else f"sweep:\n  {sweep}\n"
    path = _write(tmp_path, HEAD + LAYER + text)
    _show(cli, path, f"{path}:", f"field '{fld}'", says)


def test_valid_values_beyond_the_default_domain_are_accepted(tmp_path):
    """gemm's MR domain is its default alone, but every vectorising MR is valid."""
    suite = parse_suite(HEAD + LAYER + "sweep: {params: {indirect: {MR: [4, 6, 8], "
                        "KC: [64, 128]}, strassen: {depth: [3]}}}\n", tmp_path / "ok.yaml")
    assert suite.sweep.params["indirect"]["MR"] == (4, 6, 8)


def test_too_many_threads_says_where(cli, tmp_path):
    path = _write(tmp_path, HEAD + LAYER + "sweep:\n  threads: [1, 4096]\n")
    _dry_run(cli, path, names=(f"{path}:6", "field 'sweep.threads'", "exceed"))
    _dry_run(cli, DATA / "tiny_suite.yaml", "--threads", "4096",
             names=("--threads", "exceed"))


def test_extra_test_kernels_still_load(monkeypatch):
    from convbench.kernels import registry

    monkeypatch.setenv(registry.EXTRA_KERNELS_ENV, "tests.fault_kernels,tests.gate_kernels")
    registry.algorithms.cache_clear()
    try:
        assert load_suite(DATA / "gate_suite.yaml").sweep.algorithms[0] == "t_gated"
        assert load_suite(DATA / "fault_suite.yaml").layers
    finally:
        registry.algorithms.cache_clear()


# -- item 10: text that is not YAML a parser survives ---------------------------------------
@pytest.mark.parametrize("command", ["show", "run", "check"])
def test_non_utf8_suite(tmp_path, command):
    path = _write(tmp_path, (HEAD + LAYER).replace("mistake", "caf\xe9").encode("latin-1"))
    args = [command, path] + (["--dry-run"] if command == "run" else [])
    done = convbench_process(*args)
    _refused(done.returncode, done.stderr, f"{path}:2", "not UTF-8")


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_deeply_nested_yaml(cli, tmp_path, opening):
    closing = "]" if opening == "[" else "}"
    path = _write(tmp_path, HEAD + "layers: " + opening * 10_000 + closing * 10_000 + "\n")
    _show(cli, path, f"{path}:3:", "nested more than")


def test_control_characters_and_huge_integers(cli, tmp_path):
    path = _write(tmp_path, HEAD + "network: \x01\n" + LAYER)
    _show(cli, path, f"{path}:3:", "not valid YAML")
    path = _write(tmp_path, HEAD + LAYER + "sweep: {threads: [" + "9" * 5000 + "]}\n")
    _show(cli, path, f"{path}:5:", "not valid YAML")


def test_oversized_file(cli, tmp_path):
    path = _write(tmp_path, HEAD + LAYER + "#" * (2 << 20) + "\n")
    _show(cli, path, "larger than")


# -- item 13: every message one line, with a location --------------------------------------
def test_plan_errors_of_a_suite_built_in_code_still_say_which_suite():
    suite = parse_suite(HEAD + LAYER, Path("code.yaml"))
    sweep = dataclasses.replace(suite.sweep, algorithms=("nope",))
    with pytest.raises(ConvbenchError, match=r"code.yaml:.*field 'sweep.algorithms'"):
        build_plan(dataclasses.replace(suite, sweep=sweep), cpu_count=1)



@pytest.mark.parametrize("name", ["\x1b[2Jclear", "a\u202eb", "x" * 129])
def test_a_layer_name_is_printable_text_of_sane_length(tmp_path: Path, name: str) -> None:
    """Layer names reach terminals, figures and file names: control characters (an escape
    sequence, a bidi override) and names past MAX_LAYER_NAME are refused at load time."""
    import json

    path = tmp_path / "s.yaml"
    path.write_text("name: s\ndescription: d\nlayers:\n"
                    f"  - {{name: {json.dumps(name)}, shape: mb1ic4ih6oc4oh6kh3ph1}}\n")
    with pytest.raises(SuiteError, match=r"field 'name'.*printable"):
        load_suite(path)
