"""Winograd minimal-filtering transforms F(m, 3) (Lavin & Gray 2015, "Fast Algorithms for
Convolutional Neural Networks", section 4) and their defining identity.

A 1-D F(m, r) computes m outputs of a valid correlation with an r-tap filter from
alpha = m + r - 1 inputs with alpha multiplies:  y = A^T [(G g) * (B^T d)].  Nested, the
2-D F(m x m, r x r) is  Y = A^T [(G g G^T) * (B^T d B)] A.  The matrices below are checked
by that identity against direct correlation in the tests, not against any listing (seed
004's F(2,3) labels are permuted; no seed gives F(4,3)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# F(2, 3): interpolation points 0, 1, -1, infinity.
F2_BT = np.array([[1, 0, -1, 0],
                  [0, 1, 1, 0],
                  [0, -1, 1, 0],
                  [0, 1, 0, -1]], dtype=np.float64)
F2_G = np.array([[1, 0, 0],
                 [1 / 2, 1 / 2, 1 / 2],
                 [1 / 2, -1 / 2, 1 / 2],
                 [0, 0, 1]], dtype=np.float64)
F2_AT = np.array([[1, 1, 1, 0],
                  [0, 1, -1, -1]], dtype=np.float64)

# F(4, 3): interpolation points 0, 1, -1, 2, -2, infinity.
F4_BT = np.array([[4, 0, -5, 0, 1, 0],
                  [0, -4, -4, 1, 1, 0],
                  [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0],
                  [0, 2, -1, -2, 1, 0],
                  [0, 4, 0, -5, 0, 1]], dtype=np.float64)
F4_G = np.array([[1 / 4, 0, 0],
                 [-1 / 6, -1 / 6, -1 / 6],
                 [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6],
                 [1 / 24, -1 / 12, 1 / 6],
                 [0, 0, 1]], dtype=np.float64)
F4_AT = np.array([[1, 1, 1, 1, 1, 0],
                  [0, 1, -1, 2, -2, 0],
                  [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Transform:
    """The three matrices of F(m, r): B^T (alpha x alpha), G (alpha x r), A^T (m x alpha)."""

    m: int
    r: int
    bt: np.ndarray
    g: np.ndarray
    at: np.ndarray

    def __post_init__(self) -> None:
        a = self.alpha
        if self.bt.shape != (a, a) or self.g.shape != (a, self.r) or self.at.shape != (self.m, a):
            raise ValueError(f"F({self.m},{self.r}): matrix shapes do not match alpha={a}")

    @property
    def alpha(self) -> int:
        """Input tile size m + r - 1, also the number of multiplies of the 1-D algorithm."""
        return self.m + self.r - 1

    def filter_1d(self, d: np.ndarray, g: np.ndarray) -> np.ndarray:
        """m outputs of the 1-D algorithm on alpha inputs ``d`` and r taps ``g``."""
        return self.at @ ((self.g @ g) * (self.bt @ d))

    def filter_2d(self, d: np.ndarray, g: np.ndarray) -> np.ndarray:
        """m x m outputs of the nested algorithm on an alpha x alpha tile and r x r filter."""
        u = self.g @ g @ self.g.T
        v = self.bt @ d @ self.bt.T
        return self.at @ (u * v) @ self.at.T

    def weights(self, w_oihw: np.ndarray) -> np.ndarray:
        """U = G g G^T for every (o, i) filter, in float64: (alpha, alpha, O, I)."""
        w = np.asarray(w_oihw, dtype=np.float64)
        return np.einsum("ak,oikl,bl->aboi", self.g, w, self.g, optimize=True)


TRANSFORMS = {2: Transform(2, 3, F2_BT, F2_G, F2_AT), 4: Transform(4, 3, F4_BT, F4_G, F4_AT)}


def correlate_1d(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Valid correlation y[i] = sum_k d[i + k] g[k] (what a conv layer computes), float64."""
    r = len(g)
    return np.array([np.dot(d[i:i + r], g) for i in range(len(d) - r + 1)])


def correlate_2d(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Valid 2-D correlation, float64."""
    r0, r1 = g.shape
    h, w = d.shape[0] - r0 + 1, d.shape[1] - r1 + 1
    return np.array([[np.sum(d[i:i + r0, j:j + r1] * g) for j in range(w)] for i in range(h)])
