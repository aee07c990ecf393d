"""Fuzzing the suite loader, the descriptor parser and the planner's size check.

Hostile inputs are a valid suite mutated (a field dropped or replaced by a random scalar,
list or mapping, huge or negative numbers, NaN, control characters, repeated entries,
aliases, deep nesting), raw bytes (non-UTF-8 included) and random descriptor strings.  The
contract: either a valid result or a :class:`ConvbenchError` whose message is one line,
under 500 characters, naming the file; never another exception.  ``make_plan`` is called
with ``--dry-run``'s semantics (plan only, nothing runs).

CONVBENCH_FUZZ_EXAMPLES raises the number of examples for a longer run by hand.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench.errors import ConvbenchError
from convbench.harness.options import RunOptions, make_plan
from convbench.spec.descriptor import parse_descriptor
from convbench.spec.suite import load_suite, parse_suite
from tests.conftest import convbench_process

EXAMPLES = int(os.environ.get("CONVBENCH_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
PATH = Path("fuzz/hostile.yaml")

VALID = {
    "name": "fuzz",
    "description": "a valid suite that the strategies mutate",
    "layers": [{"name": "a", "shape": "mb1ic8ih8oc8kh3ph1", "count": 2},
               {"name": "b", "ic": 4, "ih": 6, "oc": 4, "kh": 1}],
    "sweep": {"algorithms": ["direct", "im2col"], "layouts": ["nchw"], "threads": [1],
              "vector_widths": ["auto"], "cache": ["warm"],
              "params": {"im2col": {"gemm": ["blas"]}},
              "timing": {"min_time": 0.01, "values": 3, "warmups": 0, "timeout": 10,
                         "processes": 1}},
}
# Places a mutation may land: top-level fields, layer fields, sweep and timing fields.
PLACES = ([(k,) for k in VALID] + [("layers", 0, k) for k in ("name", "shape", "count")]
          + [("layers", 1, k) for k in ("ic", "ih", "oc", "kh", "sh", "ph", "dh", "g")]
          + [("sweep", k) for k in VALID["sweep"]]
          + [("sweep", "timing", k) for k in VALID["sweep"]["timing"]]
          + [("sweep", "params", "im2col", "gemm"), ("sweep", "params", "winograd2x2"),
             ("sweep", "params", "indirect", "MR")])

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(-10, 10), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.text(alphabet=st.characters(max_codepoint=0x1f), max_size=5),
    st.sampled_from(["auto", "own", "Own", "blas", "nchw16c", "direct", "4", "1e400",
                     "mb1ic8ih8oc8kh3", "x" * 300]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)

# Each class of input, and how many of each this process tried and saw handled.
TRIED: dict[str, int] = {}
HANDLED: dict[str, int] = {}


def _expect_handled(kind: str, call, path_text: str) -> object:
    """``call()`` returns a result or raises a one-line located ConvbenchError."""
    TRIED[kind] = TRIED.get(kind, 0) + 1
    try:
        result = call()
    except ConvbenchError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, message
        assert len(message) < 500, message
        assert path_text in message, message
        result = exc
    HANDLED[kind] = HANDLED.get(kind, 0) + 1
    outcome = f"{kind} ({'refused' if isinstance(result, ConvbenchError) else 'accepted'})"
    HANDLED[outcome] = HANDLED.get(outcome, 0) + 1
    return result


def _set(doc: dict, place: tuple, value: object, drop: bool) -> None:
    node = doc
    for step in place[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(step, {})
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            return
        if not isinstance(node, (dict, list)):
            return
    if isinstance(node, dict):
        if drop:
            node.pop(place[-1], None)
        else:
            node[place[-1]] = value


@st.composite
def mutated_suites(draw) -> str:
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(PLACES))
        kind = draw(st.sampled_from(["drop", "value", "repeat"]))
        if kind == "repeat":   # a list entry given twice
            target = doc
            for step in place[:-1]:
                target = target.get(step, {}) if isinstance(target, dict) else {}
            current = target.get(place[-1]) if isinstance(target, dict) else None
            value = current + current[:1] if isinstance(current, list) and current else current
            _set(doc, place, value, drop=False)
        else:
            _set(doc, place, draw(values), drop=kind == "drop")
    text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()))
    return draw(st.sampled_from([text, _with_alias(text), _nested(text, draw),
                                 text.replace("fuzz", "f" * draw(st.integers(1, 300)), 1)]))


def _with_alias(text: str) -> str:
    return text + "extra: &e [1, 2, 3]\nmore: *e\n"


def _nested(text: str, draw) -> str:
    depth = draw(st.integers(10, 3000))
    return text.replace("layers:", "layers: " + "[" * depth + "]" * depth + "\nold:", 1)


def _plan_if_valid(text: str) -> object:
    suite = parse_suite(text, PATH)
    # --dry-run semantics: the plan and its size, nothing run, the host's CPUs irrelevant
    return make_plan(suite, RunOptions(threads=(1,)))


@FUZZ
@given(mutated_suites())
def test_mutated_suites(text):
    _expect_handled("mutated suite", lambda: _plan_if_valid(text), str(PATH))


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(data):
    """Through load_suite itself, so its size and UTF-8 checks are fuzzed too."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hostile.yaml"
        path.write_bytes(data)

        def load():
            return make_plan(load_suite(path), RunOptions(threads=(1,)))

        try:
            data.decode("utf-8")
            kind = "random bytes, UTF-8"
        except UnicodeDecodeError:
            kind = "random bytes, not UTF-8"
        _expect_handled(kind, load, str(path))


@FUZZ
@given(st.recursive(st.sampled_from(["[", "]", "{", "}", "a: ", "- ", "&x ", "*x", ", ",
                                     "\n", "  ", "!!python/name:os.system ", "? ", "|", ">"]),
                    lambda s: st.lists(s, max_size=30).map("".join), max_leaves=60))
def test_yaml_punctuation(text):
    _expect_handled("yaml punctuation", lambda: _plan_if_valid(text), str(PATH))


keys = st.sampled_from(["mb", "g", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "sh",
                        "sw", "ph", "pw", "dh", "dw", "id", "kd", "n", "_", "x"])
numbers = st.one_of(st.integers(0, 20), st.integers(0, 10**30).map(str),
                    st.just("9" * 5000), st.just(""))


tokens = st.tuples(keys, numbers).map(lambda kv: f"{kv[0]}{kv[1]}")


@st.composite
def mutated_descriptors(draw) -> str:
    """A valid descriptor with a token added (a key given twice, a huge or zero value)."""
    base = draw(st.sampled_from(["mb1ic8ih8oc8kh3ph1", "g2mb1ic4ih6iw7oc4kh3kw1sh2",
                                 "ic16ih5oc8oh3kh3", 'mb1ic3ih9oc2kh1n"x"']))
    at = draw(st.integers(0, len(base)))
    return base[:at] + draw(tokens) + base[at:]


@FUZZ
@given(st.one_of(st.lists(tokens, max_size=12).map("".join), mutated_descriptors(),
                 st.text(max_size=60)))
def test_descriptors(text):
    _expect_handled("descriptor", lambda: parse_descriptor(text), "")


@pytest.mark.parametrize("seed", range(int(os.environ.get("CONVBENCH_FUZZ_CLI", "10"))))
def test_end_to_end_on_generated_bad_inputs(tmp_path, seed):
    """A few generated bad inputs through the real command line: exit 2, no traceback."""
    import random

    rng = random.Random(seed)
    bad = [b"\xff\xfe" + bytes(rng.randrange(256) for _ in range(40)),
           ("name: x\ndescription: d\nlayers: " + "[" * rng.randrange(100, 5000)).encode(),
           yaml.safe_dump({**VALID, "sweep": {**VALID["sweep"], "threads": [1, 1]}}).encode(),
           yaml.safe_dump({**VALID, "sweep": {**VALID["sweep"], "timing": {
               "min_time": rng.choice([math.nan, math.inf, -1.0])}}}).encode(),
           yaml.safe_dump({**VALID, "name": "n" * rng.randrange(65, 400)}).encode()]
    path = tmp_path / "bad.yaml"
    path.write_bytes(bad[seed % len(bad)])
    command = [("show", path), ("run", path, "--dry-run"), ("check", path)][seed % 3]
    if seed % 4 == 3:   # a descriptor to check, past the limits
        command = ("check", rng.choice(["mb1ic99999ih99999oc9999kh1", "ic8ih8oc8kh3sh0",
                                        "mb1ic" + "9" * 400 + "ih8oc8kh1"]))
    done = convbench_process(*command, timeout=120)
    TRIED["cli"] = TRIED.get("cli", 0) + 1
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("convbench: error: ")
    HANDLED["cli"] = HANDLED.get("cli", 0) + 1


def test_fuzz_counts_when_asked():
    """With CONVBENCH_FUZZ_REPORT set, write the per-class counts (for a report by hand)."""
    report = os.environ.get("CONVBENCH_FUZZ_REPORT")
    if report:
        Path(report).write_text("".join(f"{kind}: tried {n}, handled {HANDLED.get(kind, 0)}\n"
                                        for kind, n in TRIED.items())
                                + "".join(f"{kind}: {n}\n" for kind, n in HANDLED.items()
                                          if kind not in TRIED))
