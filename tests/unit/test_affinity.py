"""convbench.harness.affinity: CPU lists, the run's CPU pool, one CPU per core first."""

from __future__ import annotations

import os

import pytest

from convbench.errors import ConvbenchError
from convbench.harness import affinity
from convbench.harness.options import RunOptions


@pytest.mark.parametrize("text, cpus, compact", [
    ("0", (0,), "0"),
    ("0-3", (0, 1, 2, 3), "0-3"),
    ("0,1", (0, 1), "0-1"),
    ("0-2,5,8-9\n", (0, 1, 2, 5, 8, 9), "0-2,5,8-9"),   # sysfs files end in a newline
    ("3,1,1", (1, 3), "1,3"),
    ("", (), ""),                                        # an empty sysfs list: none
])
def test_cpu_lists_parse_and_print_back(text, cpus, compact):
    assert affinity.parse_cpu_list(text) == cpus
    assert affinity.format_cpu_list(cpus) == compact


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "0;1", "1.5"])
def test_bad_cpu_lists_are_refused(text):
    with pytest.raises(ValueError):
        affinity.parse_cpu_list(text)


def _topology(root, siblings: dict[int, str]):
    """A sysfs cpu directory whose thread_siblings_list files hold ``siblings``."""
    for cpu, text in siblings.items():
        path = root / f"cpu{cpu}" / "topology" / "thread_siblings_list"
        path.parent.mkdir(parents=True)
        path.write_text(text + "\n")
    return root


def test_one_cpu_per_core_before_siblings(tmp_path):
    # 4 cores with 2 SMT threads each, Intel-style numbering (sibling = cpu + 4)
    sysfs = _topology(tmp_path, {c: f"{c % 4},{c % 4 + 4}" for c in range(8)})
    assert affinity.one_per_core_first(range(8), sysfs) == (0, 1, 2, 3, 4, 5, 6, 7)
    # AMD-style numbering (siblings adjacent): 2 threads take two cores, not one
    amd = _topology(tmp_path / "amd", {c: f"{c - c % 2}-{c - c % 2 + 1}" for c in range(8)})
    assert affinity.cpus_for(range(8), 2, amd) == (0, 2)
    assert affinity.cpus_for(range(8), 5, amd) == (0, 1, 2, 4, 6)


def test_unknown_topology_counts_each_cpu_as_a_core(tmp_path):
    assert affinity.cpus_for((3, 5, 7), 2, tmp_path) == (3, 5)


def test_pool_defaults_to_this_process_and_refuses_other_cpus():
    allowed = tuple(sorted(os.sched_getaffinity(0)))
    assert affinity.resolve_pool(()) == allowed
    assert affinity.resolve_pool((allowed[-1],)) == (allowed[-1],)
    outside = max(allowed) + 1 + max(affinity.isolated_cpus(), default=0)
    with pytest.raises(ConvbenchError, match=r"^--cpus: expected CPUs this process may use"):
        affinity.resolve_pool((outside,))


def test_pool_needs_a_cpu_per_thread():
    affinity.check_pool((0, 1), [1, 2])
    with pytest.raises(ConvbenchError, match=r"^--cpus: expected at least 4 CPUs for 4 "
                                             r"threads, got 2 \(0-1\)$"):
        affinity.check_pool((0, 1), [1, 4])


def test_run_options_keep_the_cpus_for_resume():
    options = RunOptions(cpus=(1, 3))
    assert RunOptions.from_json(options.to_json()).cpus == (1, 3)
    assert RunOptions.from_json({}).cpus == ()   # a manifest from before --cpus
