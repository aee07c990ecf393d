"""The suite loader's error messages: bad suites fail with a SuiteError that says where.

Every message names the file; errors inside a layer also name the layer's index and name
and the offending field, so a reviewer can find the mistake without a traceback.
"""

from __future__ import annotations

import pytest

from convbench.errors import ConvbenchError, SuiteError
from convbench.spec.suite import load_suite

HEAD = "name: bad\ndescription: a suite with a mistake in it\nlayers:\n"
GOOD = "  - {name: ok, shape: mb1ic8ih16oc8oh16kh3ph1, count: 2}\n"


def _write(tmp_path, text: str, filename: str = "bad.yaml"):
    path = tmp_path / filename
    path.write_text(text)
    return path


def _error(path) -> str:
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert str(path) in message
    return message


def _assert_names_layer(message: str, path, line: int, index: int, name: str, fld: str):
    assert f"{path}:{line}" in message
    assert f"layer {index}" in message
    assert repr(name) in message
    assert f"field '{fld}'" in message


def test_good_suite_loads(tmp_path):
    suite = load_suite(_write(tmp_path, HEAD + GOOD))
    assert [(layer.name, layer.count) for layer in suite.layers] == [("ok", 2)]


def test_suite_error_is_a_user_error():
    assert issubclass(SuiteError, ConvbenchError)


def test_bad_yaml_names_file_and_line(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: broken, shape: mb1ic8ih16oc8kh3\n"
                  "  - {name: next, shape: mb1ic8ih16oc8kh3}\n")
    message = _error(path)
    assert f"{path}:6:" in message
    assert "not valid YAML" in message


def test_bad_indentation_names_file_and_line(tmp_path):
    path = _write(tmp_path, HEAD + "  - name: a\n    shape: mb1ic8ih16oc8kh3\n   count: 2\n")
    message = _error(path)
    assert f"{path}:6:" in message


def test_unknown_field(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: typo, shape: mb1ic8ih16oc8kh3, cuont: 3}\n")
    message = _error(path)
    assert f"{path}:5" in message
    assert "layer 1" in message and "'typo'" in message
    assert "unknown field" in message and "cuont" in message


def test_unknown_top_level_field(tmp_path):
    message = _error(_write(tmp_path, HEAD + GOOD + "layer_count: 3\n"))
    assert "layer_count" in message


def test_missing_shape_field(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: noshape, count: 2}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "noshape", "shape")
    assert "missing" in message


def test_missing_explicit_field(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: noic, ih: 16, oc: 8, kh: 3}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "noic", "ic")


def test_missing_layer_name(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {shape: mb1ic8ih16oc8kh3}\n")
    message = _error(path)
    assert f"{path}:5" in message and "layer 1" in message and "field 'name'" in message


def test_missing_top_level_field(tmp_path):
    message = _error(_write(tmp_path, "name: bad\nlayers:\n" + GOOD))
    assert "field 'description'" in message and "missing" in message


def test_impossible_output_size_in_descriptor(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: wrong_oh, shape: mb1ic8ih16oc8oh15kh3ph1}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "wrong_oh", "shape")
    assert "oh=15 does not follow" in message and "expected oh=16" in message


def test_impossible_output_size_in_explicit_fields(tmp_path):
    path = _write(tmp_path, HEAD + GOOD
                  + "  - {name: wrong_ow, ic: 8, ih: 16, oc: 8, ow: 9, kh: 3, sh: 2, ph: 1}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "wrong_ow", "ow")
    assert "does not follow" in message and "expected ow=8" in message


def test_kernel_larger_than_input(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: huge_k, ic: 8, ih: 2, oc: 8, kh: 5}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "huge_k", "kh")


def test_groups_not_dividing_channels_in_descriptor(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: bad_g, shape: mb1g3ic8ih16oc9kh3ph1}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "bad_g", "shape")
    assert "g=3 do not divide ic=8" in message


def test_groups_not_dividing_channels_in_explicit_fields(tmp_path):
    path = _write(tmp_path, HEAD + GOOD
                  + "  - {name: bad_g, g: 3, ic: 9, ih: 16, oc: 8, kh: 3, ph: 1}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "bad_g", "g")
    assert "do not divide oc=8" in message


@pytest.mark.parametrize("count", ["0", "-3", "1.5", "'2'", "true"])
def test_non_positive_or_non_integer_count(tmp_path, count):
    path = _write(tmp_path, HEAD + GOOD
                  + f"  - {{name: bad_count, shape: mb1ic8ih16oc8kh3, count: {count}}}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "bad_count", "count")
    assert "positive integer" in message


def test_duplicate_layer_name(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: ok, shape: mb1ic8ih8oc8kh1}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "ok", "name")
    assert "duplicate" in message


def test_duplicate_key_in_a_layer_is_rejected(tmp_path):
    """Plain YAML keeps the last of two equal keys; a suite must not hide that."""
    path = _write(tmp_path, HEAD + GOOD
                  + "  - name: twice\n    shape: mb1ic8ih16oc8kh3\n    count: 1\n    count: 4\n")
    message = _error(path)
    _assert_names_layer(message, path, 8, 1, "twice", "count")
    assert "duplicate key 'count'" in message


def test_descriptor_name_disagrees_with_layer_name(tmp_path):
    path = _write(tmp_path, HEAD + GOOD
                  + "  - {name: mine, shape: 'mb1ic8ih16oc8kh3n\"theirs\"'}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "mine", "shape")
    assert "'theirs'" in message


def test_bad_descriptor_text(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: garbled, shape: mb1ic8xx16oc8kh3}\n")
    message = _error(path)
    _assert_names_layer(message, path, 5, 1, "garbled", "shape")
    assert "unexpected text" in message


def test_shape_and_explicit_fields_together(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: both, shape: mb1ic8ih16oc8kh3, ic: 8}\n")
    message = _error(path)
    assert "layer 1" in message and "'both'" in message and "ic" in message


def test_python_object_tag_rejected_by_safe_loader(tmp_path):
    marker = tmp_path / "constructed"
    path = _write(tmp_path, HEAD + GOOD + "  - name: evil\n    shape: mb1ic8ih16oc8kh3\n"
                  f"    count: !!python/object/apply:builtins.open ['{marker}', 'w']\n")
    message = _error(path)
    _assert_names_layer(message, path, 7, 1, "evil", "count")
    assert "python/object/apply" in message
    assert not marker.exists(), "the tag must never be constructed"


def test_python_object_tag_on_a_whole_layer(tmp_path):
    path = _write(tmp_path, HEAD + GOOD
                  + "  - !!python/object:collections.OrderedDict {name: evil}\n")
    message = _error(path)
    assert f"{path}:5" in message and "layer 1" in message and "'evil'" in message
    assert "python/object" in message


def test_python_tag_at_top_level(tmp_path):
    path = _write(tmp_path, "!!python/object/apply:os.getcwd []\n")
    message = _error(path)
    assert f"{path}:1:" in message and "python/object/apply" in message


def test_bad_reference(tmp_path):
    message = _error(_write(tmp_path, HEAD + GOOD + "reference: {macs: -1, source: paper}\n"))
    assert "field 'reference.macs'" in message


def test_reference_macs_in_exponent_form(tmp_path):
    """YAML 1.1 reads 409e7 (no dot, no exponent sign) as a string; the loader converts it."""
    suite = load_suite(_write(tmp_path, HEAD + GOOD + "reference: {macs: 409e7, source: x}\n"))
    assert suite.reference is not None and suite.reference.macs == 4.09e9


def test_bad_sweep_timing(tmp_path):
    message = _error(_write(tmp_path, HEAD + GOOD + "sweep: {timing: {values: 2}}\n"))
    assert "field 'sweep.timing.values'" in message


def test_empty_file(tmp_path):
    message = _error(_write(tmp_path, ""))
    assert "mapping" in message


def test_missing_file(tmp_path):
    message = _error(tmp_path / "nowhere.yaml")
    assert "cannot read" in message


def test_descriptor_without_mb_warns_batch_2(tmp_path):
    path = _write(tmp_path, HEAD + GOOD + "  - {name: nomb, shape: ic8ih16oc8oh16kh3ph1}\n")
    with pytest.warns(UserWarning) as record:
        suite = load_suite(path)
    assert suite.layers[1].problem.mb == 2
    (warning,) = record
    _assert_names_layer(str(warning.message), path, 5, 1, "nomb", "shape")
    assert "batch 2" in str(warning.message) and "mb1" in str(warning.message)


def test_descriptor_with_mb_does_not_warn(tmp_path, recwarn):
    load_suite(_write(tmp_path, HEAD + GOOD + "  - {name: two, shape: mb2ic8ih16oc8kh3}\n"))
    assert not [w for w in recwarn if "mb" in str(w.message)]
