"""ConvProblem: derived sizes, FLOPs and bytes, and its validation."""

import pytest

from convbench.spec.descriptor import parse_descriptor
from convbench.spec.problem import ConvProblem, ProblemError


def test_flops_formula_with_groups():
    p = ConvProblem.make(mb=2, g=4, ic=32, ih=10, iw=12, oc=16, kh=3, kw=1, ph=1, pw=0)
    assert (p.oh, p.ow) == (10, 12)
    assert p.flops == 2 * 2 * 16 * 10 * 12 * (32 // 4) * 3 * 1
    assert p.input_bytes == 4 * 2 * 32 * 10 * 12
    assert p.weight_bytes == 4 * 16 * 8 * 3
    assert p.output_bytes == 4 * 2 * 16 * 10 * 12


def test_output_size_with_stride_and_dilation():
    p = ConvProblem.make(ic=1, ih=15, oc=1, kh=3, sh=2, ph=1, dh=2)  # effective kernel 7
    assert p.oh == (15 - 7 + 2) // 2 + 1


@pytest.mark.parametrize("fields, field", [
    ({"oh": 5}, "oh"), ({"g": 3}, "g"), ({"ic": 0}, "ic"), ({"ph": -1}, "ph"), ({"kh": 40}, "kh"),
])
def test_impossible_shapes_name_the_field(fields, field):
    base = {"mb": 1, "g": 1, "ic": 4, "ih": 8, "iw": 8, "oc": 4, "oh": 6, "ow": 6, "kh": 3,
            "kw": 3}
    base.update(fields)
    with pytest.raises(ProblemError) as err:
        ConvProblem(**base)
    assert err.value.field == field


def test_immutable_and_hashable():
    p = ConvProblem.make(ic=3, ih=8, oc=4, kh=3)
    with pytest.raises(AttributeError):
        p.ic = 5
    assert {p: 1}[ConvProblem.make(ic=3, ih=8, oc=4, kh=3)] == 1


@pytest.mark.parametrize("fields, pointwise", [
    ({}, True),                          # 1x1, stride 1, unpadded
    ({"dh": 2, "dw": 1}, True),          # dilation does not move a 1x1 kernel's only tap
    ({"g": 4}, True),                    # grouped: one pointwise GEMM per group
    ({"kh": 3, "kw": 3, "ph": 1}, False),
    ({"kw": 3}, False),
    ({"sh": 2}, False),                  # ResNet v1's strided 1x1 shortcut
    ({"sw": 2}, False),
    ({"pw": 1}, False),
])
def test_is_pointwise(fields, pointwise):
    p = ConvProblem.make(**{"ic": 8, "ih": 9, "oc": 4, "kh": 1, "kw": 1, **fields})
    assert p.is_pointwise is pointwise


def test_layer_class_names_what_own_kernels_are_judged_by():
    """ResNet-50's conv1 and VGG's conv1_1 are stems (the image's 3 channels), whatever
    their kernel; a depthwise layer is depthwise at any stride; a strided 1 x 1 is 1x1."""
    def cls(desc: str) -> str:
        return parse_descriptor(desc).layer_class

    assert cls("ic3ih224oc64oh112kh7sh2ph3") == "stem"
    assert cls("ic3ih224oc64oh224kh3ph1") == "stem"
    assert cls("g512ic512ih14oc512oh7kh3sh2ph1") == "depthwise"
    assert cls("ic512ih28oc1024oh14kh1sh2") == "1x1"
    assert cls("ic64ih56oc64oh56kh3ph1") == "3x3"
    assert cls("ic5ih56oc64oh56kh3ph1") == "3x3"   # 5 channels: no longer an image
    assert cls("g2ic64ih56oc64oh56kh3ph1") == "3x3"   # grouped, not depthwise
