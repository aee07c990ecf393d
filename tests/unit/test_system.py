"""convbench.harness.system: each check on files holding real /proc and /sys contents, the
busy thresholds on recorded /proc/stat snapshots, and every check on this machine."""

from __future__ import annotations

import dataclasses
import json

import pytest

from convbench.harness import sysinfo, system
from tests.conftest import DATA

STAT = DATA / "proc_stat"


def _tree(root, files: dict[str, str]):
    """A directory standing in for /proc or /sys/devices/system/cpu."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# -- /proc/stat --------------------------------------------------------------------------

def test_proc_stat_is_parsed_per_cpu():
    # busy_*.txt: this host's /proc/stat 0.5 s apart while other tests ran (2026-11-24)
    times = sysinfo.parse_proc_stat((STAT / "busy_before.txt").read_text())
    assert set(times) == {"cpu", "cpu0", "cpu1"}
    # cpu0 23636 0 1791 59562 254 0 156 132 0 0
    assert times["cpu0"] == {"total": 23636 + 1791 + 59562 + 254 + 156 + 132,
                             "idle": 59562 + 254, "steal": 132}
    # the kernel sums the aggregate line separately: a few jiffies apart (171150 vs 171147)
    per_cpu = times["cpu0"]["total"] + times["cpu1"]["total"]
    assert times["cpu"]["total"] == pytest.approx(per_cpu, abs=10)


def test_old_kernels_without_steal_count_zero():
    assert sysinfo.parse_proc_stat("cpu  10 0 5 100 1\n")["cpu"] == {
        "total": 116, "idle": 101, "steal": 0}


def _sample(name: str) -> dict:
    return sysinfo.parse_proc_stat((STAT / name).read_text())


def test_recorded_busy_window_warns():
    found = system.activity(_sample("busy_before.txt"), _sample("busy_after.txt"), (0, 1), 0.5)
    assert found is not None and found.busy_share > 0.9 and found.steal_share == 0
    checks = system.busy_checks(found)
    assert [c.verdict for c in checks] == [system.WARNING, system.OK]
    line = system.busy_warning(checks)
    assert line and "\n" not in line and "CPU use by others 98% on CPUs 0-1" in line


def _advance(before: dict, busy: int, idle: int, steal: int) -> dict:
    """``before`` plus the given jiffies on every CPU line (a constructed later sample)."""
    def step(t: dict) -> dict:
        return {"total": t["total"] + busy + idle + steal, "idle": t["idle"] + idle,
                "steal": t["steal"] + steal}
    return {name: step(t) for name, t in before.items()}


@pytest.mark.parametrize("busy, idle, steal, verdicts", [
    (2, 48, 0, [system.OK, system.OK]),             # 4%: background noise
    (10, 40, 0, [system.OK, system.OK]),            # 20%: at the threshold, not above
    (11, 39, 0, [system.WARNING, system.OK]),
    (0, 47, 3, [system.OK, system.WARNING]),        # 6% stolen
])
def test_thresholds(busy, idle, steal, verdicts):
    before = _sample("busy_before.txt")
    found = system.activity(before, _advance(before, busy, idle, steal), (0, 1), 0.5)
    checks = system.busy_checks(found)
    assert [c.verdict for c in checks] == verdicts
    assert (system.busy_warning(checks) is None) == (verdicts == [system.OK, system.OK])


def test_activity_falls_back_to_all_cpus_and_refuses_no_time():
    before = _sample("busy_before.txt")
    found = system.activity(before, _sample("busy_after.txt"), (7,), 0.5)  # no cpu7 line
    assert found is not None and found.cpus == "all"
    assert system.activity(before, before, (0,), 0.5) is None
    assert [c.verdict for c in system.busy_checks(None)] == [system.UNKNOWN] * 2


# -- /sys and /proc files ----------------------------------------------------------------

def test_governor(tmp_path):
    sysfs = _tree(tmp_path, {"cpu0/cpufreq/scaling_governor": "performance\n",
                             "cpu1/cpufreq/scaling_governor": "powersave\n"})
    assert system.governor((0,), sysfs).verdict == system.OK
    mixed = system.governor((0, 1), sysfs)
    assert mixed.verdict == system.WARNING and "powersave (CPUs 1)" in mixed.value
    missing = system.governor((2,), sysfs)
    assert missing.verdict == system.UNKNOWN and "does not exist" in missing.advice


@pytest.mark.parametrize("files, verdict, value", [
    ({"intel_pstate/no_turbo": "1\n"}, system.OK, "off (intel_pstate no_turbo=1)"),
    ({"intel_pstate/no_turbo": "0\n"}, system.WARNING, "on (intel_pstate no_turbo=0)"),
    ({"cpufreq/boost": "1\n"}, system.WARNING, "on (cpufreq boost=1)"),
    ({"cpufreq/boost": "0\n"}, system.OK, "off (cpufreq boost=0)"),
    ({}, system.UNKNOWN, "unknown"),
])
def test_turbo(tmp_path, files, verdict, value):
    check = system.turbo(_tree(tmp_path, files))
    assert (check.verdict, check.value) == (verdict, value)


@pytest.mark.parametrize("text, verdict", [("2\n", system.OK), ("0\n", system.WARNING),
                                           ("1\n", system.WARNING)])
def test_aslr(tmp_path, text, verdict):
    proc = _tree(tmp_path, {"sys/kernel/randomize_va_space": text})
    assert system.aslr(proc).verdict == verdict


@pytest.mark.parametrize("text, verdict, value", [
    ("always [madvise] never\n", system.OK, "madvise"),
    ("[always] madvise never\n", system.OK, "always"),
    ("always madvise [never]\n", system.WARNING, "never"),
])
def test_transparent_huge_pages(tmp_path, text, verdict, value):
    check = system.transparent_huge_pages(_tree(tmp_path, {"enabled": text}))
    assert (check.verdict, check.value) == (verdict, value)
    assert "packed weights" in check.advice
    assert system.transparent_huge_pages(tmp_path / "absent").verdict == system.UNKNOWN


def test_smt(tmp_path):
    sysfs = _tree(tmp_path, {"cpu0/topology/thread_siblings_list": "0,4\n",
                             "cpu4/topology/thread_siblings_list": "0,4\n",
                             "cpu1/topology/thread_siblings_list": "1\n"})
    shared = system.smt((0, 4), sysfs)
    assert shared.verdict == system.WARNING and shared.value == "0,4 share a core"
    assert system.smt((1,), sysfs).verdict == system.OK
    assert system.smt((2,), sysfs).verdict == system.UNKNOWN


def test_isolation(tmp_path):
    none = system.isolation(_tree(tmp_path / "a", {"isolated": "\n"}))
    assert none.verdict == system.WARNING and none.value.startswith("none (nohz_full: unknown")
    some = system.isolation(_tree(tmp_path / "b", {"isolated": "2-3\n", "nohz_full": "2-3\n"}))
    assert some.verdict == system.OK and some.value == "2-3 (nohz_full: 2-3)"
    assert "--cpus 2-3" in some.advice


def test_load_average(tmp_path):
    quiet = system.load_average(_tree(tmp_path / "a", {"loadavg": "0.00 0.01 0.05 1/96 42\n"}))
    assert quiet.verdict == system.OK and quiet.value.startswith("0.00 0.01 0.05")
    busy = system.load_average(_tree(tmp_path / "b", {"loadavg": "99.0 9.0 1.0 3/96 42\n"}))
    assert busy.verdict == system.WARNING
    assert system.load_average(tmp_path / "c").verdict == system.UNKNOWN


def test_nmi_watchdog_and_paranoid(tmp_path):
    proc = _tree(tmp_path, {"sys/kernel/nmi_watchdog": "1\n",
                            "sys/kernel/perf_event_paranoid": "2\n"})
    assert system.nmi_watchdog(proc).verdict == system.WARNING
    assert system.perf_paranoid(proc).value.startswith("2")
    empty = tmp_path / "empty"
    assert system.nmi_watchdog(empty).verdict == system.UNKNOWN
    assert system.perf_paranoid(empty).verdict == system.UNKNOWN


@pytest.mark.parametrize("requested, reasons, chosen", [
    ("default", {"tbb": "no libtbb", "omp": "", "workqueue": ""}, "omp"),
    ("default", {"tbb": "no libtbb", "omp": "no libgomp", "workqueue": ""}, "workqueue"),
    ("workqueue", {"tbb": "", "omp": "", "workqueue": ""}, "workqueue"),
    ("safe", {"tbb": "no libtbb", "omp": "", "workqueue": ""}, None),
    ("forksafe", {"tbb": "no libtbb", "omp": "", "workqueue": ""}, "workqueue"),
    ("threadsafe", {"tbb": "no libtbb", "omp": "", "workqueue": ""}, "omp"),
    ("fast", {"tbb": "", "omp": "", "workqueue": ""}, None),
])
def test_threading_layer_choice_follows_numba(requested, reasons, chosen):
    picked, missing = system.choose_layer(requested, ("tbb", "omp", "workqueue"), reasons)
    assert picked == chosen
    if reasons["tbb"] and requested != "workqueue":
        assert "no libtbb" in missing or requested == "fast"


def test_a_check_refuses_an_unknown_verdict():
    with pytest.raises(ValueError):
        system.Check("x", "y", "fine")


# -- this machine --------------------------------------------------------------------------

def test_every_check_on_this_machine_has_a_value_or_a_reason():
    checks = system.check_all(window_s=0.2)
    assert len({c.item for c in checks}) == len(checks) >= 12
    for check in checks:
        assert check.verdict in system.VERDICTS
        assert check.value, check
        if check.verdict == system.UNKNOWN:
            assert check.advice, check          # the reason it could not be read
    layer = next(c for c in checks if c.item == "numba threading layer")
    assert layer.value.split()[0] in ("tbb", "omp", "workqueue", "none")
    assert json.loads(json.dumps(system.to_json(checks))) == [dataclasses.asdict(c)
                                                              for c in checks]
    text = system.format_checks(checks)
    assert all(c.item in text for c in checks)
