"""The conv problem: one immutable description of a 2-D forward convolution.

Field names and conventions follow oneDNN benchdnn: ``dh``/``dw`` is the dilation *minus one*
(0 means a dense kernel), padding is symmetric, weights are OIHW with IC/g input channels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from convbench.errors import ConvbenchError
from convbench.spec.limits import MAX_DIMENSION, MAX_LAYER_BYTES, format_bytes, shown

FLOAT32_BYTES = 4
FLOAT64_BYTES = 8
STEM_CHANNELS = 4   # input channels a group up to which a layer reads the image (RGB, RGBA)

SHAPE_FIELDS = (
    "mb", "g", "ic", "ih", "iw", "oc", "oh", "ow",
    "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw",
)


class ProblemError(ConvbenchError):
    """A conv shape that is impossible; ``field`` names the offending field."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


_POSITIVE = ("mb", "g", "ic", "ih", "iw", "oc", "kh", "kw", "sh", "sw")


def _check_field(f: str, v: object) -> None:
    """One shape field on its own: an integer, in range (before any arithmetic uses it)."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise ProblemError(f"{f} must be an integer, got {shown(v)}", f)
    if v > MAX_DIMENSION:
        raise ProblemError(f"{f}={shown(v)} is larger than {MAX_DIMENSION} (2^31 - 1)", f)
    if f in _POSITIVE and v <= 0:
        raise ProblemError(f"{f} must be positive, got {v}", f)
    if v < 0 and f not in ("oh", "ow"):   # an output size is checked against its formula
        raise ProblemError(f"{f} must be >= 0, got {v}", f)


def output_size(i: int, k: int, s: int, p: int, d: int) -> int:
    """Output extent along one axis (benchdnn's formula; d is dilation minus one)."""
    return (i - ((k - 1) * (d + 1) + 1) + 2 * p) // s + 1


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution, float32, NCHW semantics.

    Immutable so it can key dictionaries and be shared between plan, worker and results.
    Construction validates every field; use :meth:`make` to derive the output size.
    """

    mb: int
    g: int
    ic: int
    ih: int
    iw: int
    oc: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    ph: int = 0
    pw: int = 0
    dh: int = 0
    dw: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        for f in SHAPE_FIELDS:
            _check_field(f, getattr(self, f))
        if not isinstance(self.name, str):
            raise ProblemError(f"name must be a string, got {shown(self.name)}", "name")
        if self.ic % self.g:
            raise ProblemError(f"groups g={self.g} do not divide ic={self.ic}", "g")
        if self.oc % self.g:
            raise ProblemError(f"groups g={self.g} do not divide oc={self.oc}", "g")
        for axis, (i, k, s, p, d, o) in {
            "h": (self.ih, self.kh, self.sh, self.ph, self.dh, self.oh),
            "w": (self.iw, self.kw, self.sw, self.pw, self.dw, self.ow),
        }.items():
            expected = output_size(i, k, s, p, d)
            if expected <= 0:
                raise ProblemError(
                    f"kernel k{axis}={k} (dilation d{axis}={d}) does not fit input "
                    f"i{axis}={i} with padding p{axis}={p}", f"k{axis}")
            if o != expected:
                raise ProblemError(
                    f"o{axis}={o} does not follow from i{axis}={i}, k{axis}={k}, s{axis}={s}, "
                    f"p{axis}={p}, d{axis}={d}: expected o{axis}={expected}", f"o{axis}")
        # Last, as it needs every size valid: nothing of this problem is allocated yet.
        if self.checked_bytes > MAX_LAYER_BYTES:
            raise ProblemError(
                f"the layer needs {format_bytes(self.checked_bytes)} ({self.checked_bytes} "
                f"bytes: float32 input, weights, output and the float64 reference's copies), "
                f"more than the limit of {format_bytes(MAX_LAYER_BYTES)} "
                f"(convbench.spec.limits.MAX_LAYER_BYTES)")

    @classmethod
    def make(cls, **fields: int | str) -> ConvProblem:
        """Build a problem, deriving ``oh``/``ow`` when they are omitted."""
        f = dict(fields)
        f.setdefault("mb", 1)
        f.setdefault("g", 1)
        for a, b in (("iw", "ih"), ("kw", "kh"), ("sw", "sh"), ("pw", "ph"), ("dw", "dh")):
            if a not in f and b in f:
                f[a] = f[b]
        for key in ("sh", "sw"):
            f.setdefault(key, 1)
        for key in ("ph", "pw", "dh", "dw"):
            f.setdefault(key, 0)
        for key in ("ih", "iw", "kh", "kw", "ic", "oc"):
            if key not in f:
                raise ProblemError(f"missing required field {key}", key)
        for key, value in f.items():   # before output_size divides by a stride
            if key in SHAPE_FIELDS:
                _check_field(key, value)
        if "oh" not in f:
            f["oh"] = output_size(f["ih"], f["kh"], f["sh"], f["ph"], f["dh"])
        if "ow" not in f:
            f["ow"] = output_size(f["iw"], f["kw"], f["sw"], f["pw"], f["dw"])
        return cls(**f)

    def replace(self, **changes: int | str) -> ConvProblem:
        return dataclasses.replace(self, **changes)

    # -- derived quantities -------------------------------------------------
    @property
    def icg(self) -> int:
        """Input channels per group."""
        return self.ic // self.g

    @property
    def ocg(self) -> int:
        """Output channels per group."""
        return self.oc // self.g

    @property
    def is_depthwise(self) -> bool:
        return self.g > 1 and self.g == self.ic == self.oc

    @property
    def is_pointwise(self) -> bool:
        """1x1 kernel, stride 1, no padding: output pixel i reads input pixel i only, so the
        conv is one GEMM of the weights with the input as it lies (im2col's unfold is the
        identity).  Dilation is not tested: it does not move the single tap of a 1x1 kernel.
        Groups are not tested either: a grouped pointwise conv is one such GEMM per group."""
        return (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw) == (1, 1, 1, 1, 0, 0)

    @property
    def layer_class(self) -> str:
        """The kind of layer own kernels are judged by against the libraries: "stem" (the
        image input, at most 4 channels a group: ResNet's 7 x 7 conv1, VGG's conv1_1),
        "depthwise", "1x1" (strided or not), else the kernel size, e.g. "3x3".  Each
        has its own best algorithm and its own limit (a stem's few channels fill no
        vector, a depthwise layer streams its input once), so a mean over all layers
        can hide a class that loses."""
        if self.is_depthwise:
            return "depthwise"
        if self.icg <= STEM_CHANNELS:
            return "stem"
        return f"{self.kh}x{self.kw}"

    @property
    def reduction_length(self) -> int:
        """Products summed into one output value: IC/g * KH * KW."""
        return self.icg * self.kh * self.kw

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the direct algorithm (padding taps included)."""
        return self.mb * self.oc * self.oh * self.ow * self.reduction_length

    @property
    def flops(self) -> int:
        """Nominal FLOPs: 2*N*OC*OH*OW*(IC/g)*KH*KW."""
        return 2 * self.macs

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.mb, self.ic, self.ih, self.iw)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        """OIHW with IC/g input channels per output channel."""
        return (self.oc, self.icg, self.kh, self.kw)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.mb, self.oc, self.oh, self.ow)

    @property
    def input_bytes(self) -> int:
        return FLOAT32_BYTES * self.mb * self.ic * self.ih * self.iw

    @property
    def weight_bytes(self) -> int:
        return FLOAT32_BYTES * self.oc * self.icg * self.kh * self.kw

    @property
    def output_bytes(self) -> int:
        return FLOAT32_BYTES * self.mb * self.oc * self.oh * self.ow

    @property
    def compulsory_bytes(self) -> int:
        """Bytes read and written at least once: input + weights + output."""
        return self.input_bytes + self.weight_bytes + self.output_bytes

    @property
    def checked_bytes(self) -> int:
        """Bytes a check of this layer allocates: the float32 tensors of the kernel plus
        the float64 reference's input, weights, zero-padded input and output
        (:func:`convbench.kernels.reference.conv2d_reference`); bounded by
        :data:`~convbench.spec.limits.MAX_LAYER_BYTES`."""
        float32 = self.input_bytes + self.weight_bytes + self.output_bytes
        padded = self.mb * self.ic * (self.ih + 2 * self.ph) * (self.iw + 2 * self.pw)
        return float32 + FLOAT64_BYTES * (float32 // FLOAT32_BYTES + padded)

    @property
    def arithmetic_intensity(self) -> float:
        """Nominal FLOPs per compulsory byte (the roofline's x axis)."""
        return self.flops / self.compulsory_bytes

    @property
    def shape_fields(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in SHAPE_FIELDS}

    def same_shape(self, other: ConvProblem) -> bool:
        return self.shape_fields == other.shape_fields

    def __str__(self) -> str:
        from convbench.spec.descriptor import format_descriptor

        return format_descriptor(self)
