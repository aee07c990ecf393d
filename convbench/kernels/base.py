"""What an algorithm is to the harness: its metadata, tunable parameters, and prepared state.

An :class:`Algorithm` says where it comes from, when it applies, which activation layouts
it takes and which parameters it exposes.  ``build`` does the one-time preparation (weight
packing or transforms, indirection buffers) and returns a :class:`Prepared` whose ``run``
computes one inference into a preallocated output.  The harness times ``build`` apart from
``run``; conversion of the input into the kernel's layout is never timed with ``run``.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from convbench.spec.limits import MAX_DIMENSION, shown
from convbench.spec.problem import ConvProblem

ParamValue = int | float | str | bool

# The key of :meth:`Prepared.info` under which an algorithm that does fewer multiplies than
# the direct conv (Winograd, Strassen) reports the FLOPs it performs per call.  The results
# keep GFLOP/s on the nominal FLOPs (the effective rate) but divide the performed FLOPs by
# the peak (results.record), so a fast algorithm never shows more than 100% of peak.
PERFORMED_FLOPS = "performed_flops"


@dataclass(frozen=True)
class Ints:
    """The valid values of an integer parameter: ``lo <= v <= hi``, a multiple of ``step``."""

    lo: int = 1
    hi: int = MAX_DIMENSION
    step: int = 1

    def __contains__(self, value: object) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool)
                and self.lo <= value <= self.hi and value % self.step == 0)

    def __str__(self) -> str:
        multiple = f" that is a multiple of {self.step}" if self.step > 1 else ""
        return f"an integer from {self.lo} to {self.hi}{multiple}"


@dataclass(frozen=True)
class Param:
    """A tunable knob, declared next to the code that uses it.

    ``domain`` is what a sweep tries by default; ``allowed`` is what a suite's
    ``sweep.params`` may ask for (a tuple of choices or an :class:`Ints` range; None: the
    domain itself).  The two differ where the default sweep stays small on purpose (the
    GEMM blocking tries only its default but computes correctly with any of MR_CHOICES).
    """

    name: str
    domain: tuple[ParamValue, ...]
    default: ParamValue
    doc: str = ""
    allowed: tuple[ParamValue, ...] | Ints | None = None
    # Left out of variant ids at its default, as benchdnn leaves default knobs out of its
    # problem descriptors: a knob added to an algorithm later keeps the ids of the variants
    # recorded before it (results, tuning records, a compare baseline still name them).
    quiet_default: bool = False

    def __post_init__(self) -> None:
        if self.default not in self.domain:
            raise ValueError(f"param {self.name}: default {self.default!r} not in domain")
        bad = [v for v in self.domain if self.rejects(v)]
        if bad:
            raise ValueError(f"param {self.name}: domain values {bad} are not allowed")

    @property
    def expected(self) -> str:
        """The valid values in words, for messages."""
        valid = self.domain if self.allowed is None else self.allowed
        if isinstance(valid, Ints):
            return str(valid)
        return "one of " + ", ".join(map(str, valid))

    def rejects(self, value: object) -> str | None:
        """Why ``value`` is no valid setting of this knob; None when it is one.

        Types must match exactly: ``4.0`` or ``"4"`` is no MR although it equals 4 (both
        would also print as another variant id, or the same one as 4)."""
        valid = self.domain if self.allowed is None else self.allowed
        if isinstance(valid, Ints):
            ok = value in valid
        else:
            ok = any(type(value) is type(v) and value == v for v in valid)
        return None if ok else f"expected {self.expected}, got {shown(value)}"


class Prepared(ABC):
    """A kernel ready to run: weights already in the kernel's own format.

    ``in_layout``/``out_layout`` name activation layouts understood by
    :mod:`convbench.kernels.layouts` ("nchw", "nhwc", "nchw16c", ...).
    """

    in_layout: str = "nchw"
    out_layout: str = "nchw"
    workspace_bytes: int = 0          # scratch memory beyond input, weights and output
    packed_weight_bytes: int = 0      # weights in the kernel's own format (0: uses OIHW as is)

    @abstractmethod
    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        """Compute one convolution of ``x`` (in ``in_layout``) into ``y`` (``out_layout``)."""

    def info(self) -> dict[str, ParamValue]:
        """Extra figures worth recording (multiplies saved, buffer sizes, ...); an algorithm
        that performs fewer FLOPs than the nominal conv says how many under
        :data:`PERFORMED_FLOPS`."""
        return {}

    def fuse_activation(self, kind: str) -> bool:
        """Apply activation ``kind`` ("relu" or "relu6") to every output this kernel writes
        from now on, in its own stores (:mod:`convbench.kernels.epilogue`); False, and
        nothing changed, where the kernel cannot (the network pass then runs the glue op)."""
        return False

    def fuse_residual(self) -> bool:
        """Add every output this kernel computes to what its output buffer holds (y +=
        conv(x), before a fused activation): a residual add run in the conv's stores, the
        shortcut placed in the output buffer beforehand.  False, and nothing changed, where
        the kernel cannot."""
        return False

    def hot_kernels(self) -> tuple[object, ...] | None:
        """The numba dispatchers this variant calls, for the static code profile; empty
        when it calls none (its arithmetic is a library's).

        None (not declared): the profile falls back to every compiled dispatcher of the
        kernel's module, whichever other variants compiled them in the process, so a
        variant's profile could hold another's code; every shipped kernel declares its own.
        """
        return None


Applicability = Callable[[ConvProblem, str, Mapping[str, ParamValue]], "str | None"]
Builder = Callable[[ConvProblem, np.ndarray, str, Mapping[str, ParamValue]], Prepared]
IoLayouts = Callable[[str, Mapping[str, ParamValue]], tuple[str, str]]
# The candidates ``convbench tune`` searches for one layer, each a setting of every knob:
# a space that depends on the problem (NeoCPU's blocks are factors of the channel counts),
# where a sweep's fixed grid is the same for every layer.  A list, not per-knob domains:
# the knobs prune each other (reg_n x oc_bn must fit the register file).
TuningSpace = Callable[[ConvProblem], Sequence[Mapping[str, ParamValue]]]
# The sweep grid's domains for one layer where a knob's useful values depend on its shape
# (a block size larger than the channel count only pads with zeros); knobs it leaves out
# keep their Param's domain, and a suite's ``sweep.params`` replaces either.
LayerDomains = Callable[[ConvProblem], Mapping[str, tuple[ParamValue, ...]]]
# The multiply-adds a variant computes per one the layer needs (>= 1: zero-padded channel
# blocks), so the tuner's prior can tell a configuration's speed from its padding on
# another layer (:mod:`convbench.tune.prior`).
WorkRatio = Callable[[ConvProblem, Mapping[str, ParamValue]], float]
# The glue ops a variant runs in its own stores -- "relu", "relu6" (``Prepared.
# fuse_activation``), "add" (``Prepared.fuse_residual``) -- known without building it, so
# the layout plan charges such an op nothing where the network pass will fuse it.
Epilogues = Callable[[ConvProblem, str], frozenset[str]]
ACTIVATIONS = frozenset({"relu", "relu6"})


def always(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]) -> str | None:
    return None


@dataclass(frozen=True)
class Algorithm:
    """One algorithm family member the harness can sweep.

    ``applies(problem, layout, params)`` returns ``None`` when the variant can run, else the
    reason it cannot (recorded as a skip, never dropped).  ``error_growth`` multiplies the
    reference tolerance for algorithms whose rounding error provably grows (Winograd's
    transforms, Strassen's extra additions); 1.0 for anything that sums products directly.
    ``tuning_space(problem)``, when given, is what ``convbench tune`` searches for a layer
    instead of the sweep's grid (:mod:`convbench.tune.space`).
    """

    name: str
    title: str
    source: str
    layouts: tuple[str, ...]
    build: Builder
    params: tuple[Param, ...] = ()
    applies: Applicability = always
    baseline: bool = False
    error_growth: float = 1.0
    notes: str = ""
    # The (in, out) activation layouts of a variant, known without building it (the layout
    # plan needs them for every tuning record); None: both are the variant's layout.
    io_layouts: IoLayouts | None = None

    def activation_layouts(self, layout: str, params: Mapping[str, ParamValue]
                           ) -> tuple[str, str]:
        """The layouts :class:`Prepared` ``in_layout``/``out_layout`` will have."""
        return (layout, layout) if self.io_layouts is None else self.io_layouts(layout, params)
    tuning_space: TuningSpace | None = None
    layer_domains: LayerDomains | None = None
    work_ratio: WorkRatio | None = None   # None: no padding, every variant computes 1.0
    epilogues: Epilogues | None = None    # None: fuses nothing

    def fused_ops(self, problem: ConvProblem, layout: str) -> frozenset[str]:
        """The glue op kinds a variant in ``layout`` runs in its stores on ``problem``."""
        return frozenset() if self.epilogues is None else self.epilogues(problem, layout)

    def layout_refusal(self, layout: str) -> str | None:
        """Why ``layout`` is not one of this algorithm's (None: it is).  A builder handed
        another layout can fall back to one of its own without a word (depthwise builds
        NCHW), so every way in -- the sweep, ``check``, tuning records, a hand-edited
        plan.json, the build itself -- asks this first."""
        if layout in self.layouts:
            return None
        return f"{self.name} runs in {', '.join(self.layouts)}, not {layout}"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def defaults(self) -> dict[str, ParamValue]:
        return {p.name: p.default for p in self.params}

    @property
    def quiet_defaults(self) -> dict[str, ParamValue]:
        """The knobs marked ``quiet_default`` (:attr:`Param.quiet_default`), at their
        defaults."""
        return {p.name: p.default for p in self.params if p.quiet_default}

    def variant(self, layout: str, params: Mapping[str, ParamValue]) -> Variant:
        """The variant of ``params`` in ``layout``, the quiet knobs left out at their
        default."""
        quiet = self.quiet_defaults
        named = {k: v for k, v in params.items()
                 if not (k in quiet and type(v) is type(quiet[k]) and v == quiet[k])}
        return Variant.of(self.name, layout, named)

    def complete(self, params: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
        """``params`` with every quiet knob it leaves out at its default: what a variant
        id (or a record written before the knob existed) means."""
        return {**self.quiet_defaults, **params}

    def param_grid(self, overrides: Mapping[str, tuple[ParamValue, ...]] | None = None,
                   problem: ConvProblem | None = None) -> Iterator[dict[str, ParamValue]]:
        """Cartesian product of parameter domains: ``overrides`` (a suite's) replaces some,
        ``layer_domains(problem)`` sets others for that layer, the Params' give the rest."""
        layer = self.layer_domains(problem) if self.layer_domains and problem else {}
        overrides = {**layer, **(overrides or {})}
        names = [p.name for p in self.params]
        domains = [tuple(overrides.get(p.name, p.domain)) for p in self.params]
        for combo in itertools.product(*domains):
            yield dict(zip(names, combo, strict=True))


@dataclass(frozen=True)
class Variant:
    """An algorithm with a layout and concrete parameter values: the unit that is checked."""

    algorithm: str
    layout: str
    params: tuple[tuple[str, ParamValue], ...] = field(default=())

    @classmethod
    def of(cls, algorithm: str, layout: str, params: Mapping[str, ParamValue] | None = None
           ) -> Variant:
        return cls(algorithm, layout, tuple(sorted((params or {}).items())))

    @property
    def param_dict(self) -> dict[str, ParamValue]:
        return dict(self.params)

    @property
    def id(self) -> str:
        """Readable, stable identity, e.g. ``im2col/nhwc/gemm=blas``."""
        parts = [self.algorithm, self.layout] + [f"{k}={v}" for k, v in self.params]
        return "/".join(parts)

    @classmethod
    def parse(cls, text: str) -> Variant:
        """The variant an :attr:`id` names; parameter values become int, float or bool
        where they read as one (the id does not record types).  ValueError when ``text``
        is not ``algorithm/layout[/name=value...]``."""
        algorithm, _, rest = text.partition("/")
        layout, _, rest = rest.partition("/")
        if not algorithm or not layout:
            raise ValueError(f"variant {text!r}: expected algorithm/layout[/name=value...]")
        params: dict[str, ParamValue] = {}
        for part in filter(None, rest.split("/")):
            name, sep, value = part.partition("=")
            if not sep or not name:
                raise ValueError(f"variant {text!r}: expected name=value, got {part!r}")
            params[name] = _typed(value)
        return cls.of(algorithm, layout, params)


def _typed(value: str) -> ParamValue:
    """A parameter value as the id prints it, back to the value (str when nothing else)."""
    if value in ("True", "False"):
        return value == "True"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value
