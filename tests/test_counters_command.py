"""``convbench counters`` lists the backends and each event's support with reasons."""

from click.testing import CliRunner

from convbench.commands.counters import command


def test_counters_lists_events_and_backends():
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 0, result.output
    for text in ("event map:", "perf_event_paranoid:", "task-clock", "backend perf:",
                 "backend sim:"):
        assert text in result.output
    if "backend sim: available" in result.output:   # the CPU counting passes compile for
        assert "sim compiles for: " in result.output


def test_counters_rejects_unknown_role():
    result = CliRunner().invoke(command, ["--events", "l9_misses=x"])
    assert result.exit_code != 0
