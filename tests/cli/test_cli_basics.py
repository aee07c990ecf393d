"""The front door: --help stays light, errors are one line with exit code 2."""

import subprocess
import sys
import textwrap

import pytest

from convbench.cli import main


def _run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "convbench", *args], capture_output=True,
                          text=True, timeout=300, **kw)


def test_help_does_not_import_heavy_modules():
    code = textwrap.dedent("""
        import sys
        from convbench.cli import main
        try:
            main(["--help"])
        except SystemExit:
            pass
        for command in ("check", "show", "suites", "system", "run"):
            try:
                main([command, "--help"])
            except SystemExit:
                pass
        heavy = [m for m in ("numba", "pandas", "matplotlib", "scipy") if m in sys.modules]
        print("HEAVY", heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "HEAVY []" in out, out


def test_check_descriptor_passes(tmp_path):
    r = _run("check", "mb1ic5ih9iw7oc6kh3kw3ph1pw1sh2sw2nodd", "-a", "direct")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "direct/nchw" in r.stdout and "direct/nhwc" in r.stdout
    assert "0 failed" in r.stdout


def test_bad_descriptor_is_one_line_exit_2():
    r = _run("check", "mb1ic3ih32oc4oh31kh3ph1")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "oh=31 does not follow" in r.stderr


def test_bad_suite_names_file_layer_field(tmp_path):
    suite = tmp_path / "bad.yaml"
    suite.write_text(textwrap.dedent("""\
        name: bad
        description: test
        layers:
          - name: ok_layer
            shape: mb1ic8ih8oc8kh3ph1
          - name: broken
            shape: mb1ic8ih8oc8kh3ph1
            count: 0
    """))
    r = _run("show", str(suite))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{suite}:6: layer 1 ('broken'): field 'count'" in r.stderr


def test_show_prints_layers_and_total(tmp_path):
    suite = tmp_path / "two.yaml"
    suite.write_text(textwrap.dedent("""\
        name: two
        description: two layers
        layers:
          - {name: a, shape: mb1ic8ih8oc8kh3ph1, count: 2}
          - {name: b, ic: 8, ih: 8, oc: 16, kh: 1}
    """))
    r = _run("show", str(suite))
    assert r.returncode == 0, r.stderr
    macs = 2 * 8 * 8 * 8 * 8 * 9 + 16 * 8 * 8 * 8
    assert f"{macs / 1e9:.3f} GMAC" in r.stdout
    assert "mb1ic8ih8oc16oh8kh1ph0" in r.stdout


def test_unknown_command_is_usage_error():
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2


def test_descriptor_without_mb_warns_on_one_line(tmp_path):
    suite = tmp_path / "nomb.yaml"
    suite.write_text("name: nomb\ndescription: d\nlayers:\n"
                     "  - {name: a, shape: ic8ih8oc8kh3ph1}\n")
    r = _run("show", str(suite))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == (f"convbench: warning: {suite}:4: layer 0 ('a'): field 'shape': "
                                "no mb in the descriptor, so batch 2 (benchdnn's default); "
                                "write mb1 for batch 1")
