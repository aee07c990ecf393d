"""Layout transforms: exact data movement between NCHW, NHWC and NCHW[x]c, and their
measurement into transforms.parquet."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from convbench.kernels import layouts, transforms

LAYOUTS = ("nchw", "nhwc", "nchw8c", "nchw16c", "nchw32c")
# odd channel counts leave the last block part padding; 1 x 1 and a single channel too
SHAPES = [(1, 3, 5, 7), (2, 17, 4, 3), (1, 1, 1, 1), (1, 33, 2, 2)]


@pytest.fixture(scope="module")
def tensors() -> dict[tuple[int, ...], np.ndarray]:
    rng = np.random.default_rng(0)
    return {shape: rng.standard_normal(shape, dtype=np.float32) for shape in SHAPES}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_pair_equals_the_numpy_reference(tensors, shape):
    x = tensors[shape]
    for src, dst in itertools.product(LAYOUTS, LAYOUTS):
        held = layouts.to_layout(x, src)
        got = transforms.convert(held, shape, src, dst)
        np.testing.assert_array_equal(got, transforms.reference(held, shape, src, dst),
                                      err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("shape", SHAPES)
def test_round_trips_are_the_identity(tensors, shape):
    x = tensors[shape]
    for path in [("nchw", "nchw16c", "nhwc", "nchw"), ("nchw", "nchw8c", "nchw32c", "nchw"),
                 ("nchw", "nhwc", "nchw16c", "nchw8c", "nhwc", "nchw")]:
        held = x
        for src, dst in itertools.pairwise(path):
            held = transforms.convert(held, shape, src, dst)
        np.testing.assert_array_equal(held, x, err_msg=" -> ".join(path))


def test_block_padding_is_written_as_zeros():
    """A reused destination buffer holds no stale values in its padding channels."""
    shape = (1, 3, 2, 2)
    t = transforms.Transform(shape, "nchw", "nchw8c")
    y = np.full(transforms.stored_shape(shape, "nchw8c"), np.nan, np.float32)
    t(np.ones(shape, np.float32), y)
    assert np.all(y[..., :3] == 1) and np.all(y[..., 3:] == 0)


def test_layouts_of_adds_the_plain_layouts_in_order():
    assert transforms.layouts_of({("nchw16c", "nchw32c")}) == (
        "nchw", "nhwc", "nchw16c", "nchw32c")
