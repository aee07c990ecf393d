"""benchdnn descriptor grammar: defaulting rules, round trip, batch files."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.spec.descriptor import (
    DescriptorError,
    format_descriptor,
    parse_descriptor,
    read_batch_file,
)
from convbench.spec.problem import ConvProblem


def test_resnet_example_from_brief():
    p = parse_descriptor('mb1ic64ih56oc64oh56kh3ph1n"resnet_50:res2a_branch2b"')
    assert (p.mb, p.g, p.ic, p.ih, p.iw, p.oc, p.oh, p.ow) == (1, 1, 64, 56, 56, 64, 56, 56)
    assert (p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw) == (3, 3, 1, 1, 1, 1, 0, 0)
    assert p.name == "resnet_50:res2a_branch2b"
    assert p.flops == 2 * 64 * 56 * 56 * 64 * 9


def test_benchdnn_defaults_mb2_g1_stride1_pad0_dilation0():
    p = parse_descriptor("ic3ih32oc8kh3")
    assert (p.mb, p.g, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw) == (2, 1, 1, 1, 0, 0, 0, 0)
    assert (p.oh, p.ow) == (30, 30)  # output derived: (32 - 3 + 0) / 1 + 1


def test_square_form_copies_height_to_width():
    p = parse_descriptor("mb1ic8ih20oc8kh5sh2ph2dh1")
    assert (p.iw, p.kw, p.sw, p.pw, p.dw) == (20, 5, 2, 2, 1)
    assert p.ow == p.oh == (20 - ((5 - 1) * 2 + 1) + 4) // 2 + 1


def test_padding_derived_from_given_output():
    p = parse_descriptor("mb1ic64ih56oc64oh56kh3")  # no ph: benchdnn computes trivial padding
    assert p.ph == p.pw == 1


def test_canonical_form_with_underscores_and_groups():
    text = 'g32mb1_ic32ih112iw112_oc32oh112ow112_kh3kw3_sh1sw1_ph1pw1_n"mobilenet:conv_dw_1"'
    p = parse_descriptor(text)
    assert p.g == 32 and p.is_depthwise and p.name == "mobilenet:conv_dw_1"


def test_non_square_and_alexnet_line():
    p = parse_descriptor('ic3ih227iw227_oc96oh55ow55_kh11kw11_sh4sw4ph0pw0_n"alexnet:conv1"')
    assert (p.mb, p.oh, p.ow, p.sh) == (2, 55, 55, 4)
    q = parse_descriptor("mb1ic4ih9iw5oc6kh3kw1ph1pw0")
    assert (q.oh, q.ow) == (9, 5)


@pytest.mark.parametrize("bad, fragment", [
    ("", "empty"),
    ("ic3ih32kh3", "'oc' is required"),
    ("ic3oc4", "no spatial size"),
    ("ic3ih32oc4", "'ih' and 'kh' are required"),
    ("mb1ic3ih32oc4kh3xx7", "unexpected text"),
    ("mb1ic3id8ih32oc4kh3", "3-D"),
    ("mb1ic3ih32oc4oh31kh3ph1", "does not follow"),
    ("g3mb1ic4ih8oc6kh3", "do not divide ic"),
    ("mb1ic3ih2oc4kh5", "does not fit"),
])
def test_bad_descriptors_name_the_problem(bad, fragment):
    with pytest.raises(DescriptorError, match=fragment):
        parse_descriptor(bad)


problems = st.builds(
    lambda mb, g, icg, ocg, ih, iw, kh, kw, sh, sw, ph, pw, dh, dw: ConvProblem.make(
        mb=mb, g=g, ic=g * icg, oc=g * ocg, ih=ih + (kh - 1) * (dh + 1),
        iw=iw + (kw - 1) * (dw + 1), kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw,
        name="layer_x"),
    st.integers(1, 4), st.integers(1, 4), st.integers(1, 8), st.integers(1, 8),
    st.integers(1, 20), st.integers(1, 20), st.integers(1, 5), st.integers(1, 5),
    st.integers(1, 3), st.integers(1, 3), st.integers(0, 2), st.integers(0, 2),
    st.integers(0, 2), st.integers(0, 2))


@settings(max_examples=300, deadline=None)
@given(problems, st.booleans())
def test_format_parse_round_trip(problem, canonical):
    assert parse_descriptor(format_descriptor(problem, canonical=canonical)) == problem


def test_batch_file_skips_options_with_warning(tmp_path):
    f = tmp_path / "shapes_resnet"
    f.write_text("# ResNet shapes\n--dir=FWD_B\nmb1ic64ih56oc64oh56kh3ph1nres2a  # 3x3\n\n"
                 "mb1ic64ih56oc256oh56kh1nres2a_branch1\n")
    with pytest.warns(UserWarning, match=r"shapes_resnet:2: skipping option line '--dir=FWD_B'"):
        problems_read = read_batch_file(f)
    assert [p.name for p in problems_read] == ["res2a", "res2a_branch1"]


def test_batch_file_error_names_file_and_line(tmp_path):
    f = tmp_path / "shapes"
    f.write_text("mb1ic64ih56oc64oh56kh3ph1\nmb1ic64ih56oc64oh55kh3ph1\n")
    with pytest.raises(DescriptorError, match=r"shapes:2: .*oh=55 does not follow"):
        read_batch_file(f)
