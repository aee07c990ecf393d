"""The network pass: a whole network run with a plan's kernels, transforms and glue.

:class:`NetworkPass` builds every conv occurrence once with its own weights (the plan's
variant, prepacked in ``build``), gives every tensor storage in each layout the plan holds
it in (page aligned; tensors whose lives do not overlap share it, :func:`plan_storage`),
and turns the ops into a flat list of calls: transforms the plan pays before an op
(:mod:`convbench.kernels.transforms`), the conv's ``run`` or the glue kernel
(:mod:`convbench.network.glue`), and the output's transform to NCHW.  A relu or relu6 right
after a conv runs in the conv's stores where its kernel can (:func:`fusible`), and so does
a residual add right after a conv (:func:`residual_fusible`): the conv writes into the
shortcut's buffer, adding its sums to it, and a relu after the add fuses as well.  Calling
the pass runs that list: one whole network on the input held in
:attr:`NetworkPass.input`, nothing allocated.

Every transform the plan lists is executed, one per (tensor, consumer) edge as the
dynamic program charged it, so the measured pass is the predicted one; two consumers
needing the same tensor in the same layout share the destination buffer but each pays the
copy (deduplicating them would be a faster executor than the plan models).  A tensor read
in a layout that holds the same bytes as one it is held in (NCHW[C]c and NHWC, NCHW[1]c
and NCHW: :func:`convbench.kernels.transforms.same_memory`) is a view of that buffer, as
the plan charges nothing for it.

:func:`check` holds every tensor of a pass against the float64 reference
(:func:`convbench.network.reference.run_reference`) under the bound described there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np

from convbench.kernels import epilogue, layouts, registry, transforms
from convbench.kernels.base import Prepared, Variant
from convbench.kernels.buffers import page_aligned
from convbench.kernels.reference import EPS32
from convbench.network import glue
from convbench.network.planfile import PassSpec, PlanFileError, StepSpec, TransformSpec
from convbench.network.reference import random_weights
from convbench.spec.network import INPUT, Network, Op

Shape = tuple[int, int, int, int]
# The constant of the pass's error bound (see check): twice the single conv's C, because
# the bound is against a tensor's largest magnitude instead of each element's own sum of
# |products| (which is larger by about sqrt(K), the slack the single-conv rule keeps).
NETWORK_C = 4.0
OP, TRANSFORMS, OUTPUT = "op", "transforms", "output"   # NetworkPass.labels


def network_inputs(network: Network, seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The seeded NCHW input (uniform in [-1, 1)) and per-conv-op OIHW weights, float32
    (the reference computes on exactly these values, in float64)."""
    rng = np.random.default_rng([seed, 17])
    x = rng.uniform(-1.0, 1.0, network.input_shape).astype(np.float32)
    weights = {name: w.astype(np.float32)
               for name, w in random_weights(network, seed).items()}
    return x, weights


def variant_of(variant_id: str) -> Variant:
    """The variant a plan names; a ``@width`` suffix (plans over several vector widths) is
    dropped: the pass runs at its worker's one width."""
    return Variant.parse(variant_id.partition("@")[0])


Call = glue.Call


@dataclass
class NetworkPass:
    """A plan's pass over ``network``, built and allocated; call it to run one pass."""

    network: Network
    spec: PassSpec
    weights: Mapping[str, np.ndarray]
    buffers: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    kernels: dict[str, Prepared] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # per call, the (op, part) it belongs to: part "op" (the conv or glue kernel) or
    # "transforms" (those paid before the op; op "output" for the output's)
    labels: list[tuple[str, str]] = field(default_factory=list)
    produced: dict[str, str] = field(default_factory=dict)   # tensor -> layout written
    growth: float = 1.0                                       # largest error_growth used
    fuse: bool = True            # relu / relu6 / add into the conv before them, where it can
    fused: dict[str, str] = field(default_factory=dict)       # glue op -> conv it ran in
    accumulated: dict[str, str] = field(default_factory=dict)  # conv -> the add it ran

    # (tensor, layout) -> [first op index writing it, last op index reading it]; an
    # in-place result is the same storage as the input it overwrites (the key it aliases)
    live: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    aliases: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    shared: bool = True          # tensors whose lives do not overlap share storage

    def __post_init__(self) -> None:
        self._build_calls()
        if self.shared:
            storage = plan_storage(self.network, self.buffers, self.live, self.aliases)
            self._build_calls(storage)

    def _build_calls(self, storage: Mapping[tuple[str, str], np.ndarray] | None = None
                     ) -> None:
        """The calls of one pass.  Without ``storage`` every tensor gets its own buffer
        and each buffer's life is recorded; with it (the second build) the same calls run
        on the storage :func:`plan_storage` gave each tensor.  Kernels are built once."""
        net = self.network
        self.calls, self.labels, self.produced = [], [], {}
        self.buffers = {} if storage is None else dict(storage)
        self._step = -1
        self._buffer(INPUT, "nchw")
        self.produced[INPUT] = "nchw"
        steps = self.spec.steps
        for i, (op, step) in enumerate(zip(net.ops, steps, strict=True)):
            self._step = i
            if op.name != step.op:
                raise PlanFileError(f"{self.spec.label}: step {step.op!r} where the network "
                                    f"runs {op.name!r}")
            if op.name not in self.accumulated.values():   # (else run before its conv)
                for t in step.transforms:
                    self._transform(t)
            self._label(op.name, TRANSFORMS)
            if op.kind == "conv":
                self._conv(op, i)
            elif op.name in self.fused:
                self._alias((op.name, step.layout), (self.fused[op.name], step.layout))
            else:
                self._glue(op, step.layout)
            self._label(op.name, OP)
            self.produced[op.name] = step.layout
        self._step = len(steps)
        tail = self.spec.output_transform
        if tail is not None:
            self._transform(tail)
            self._label(OUTPUT, TRANSFORMS)
        if not self._viewable(net.output, "nchw"):
            raise PlanFileError(f"{self.spec.label}: the output {net.output!r} is left in "
                                f"{self.produced[net.output]}, not delivered in nchw")

    @property
    def input(self) -> np.ndarray:
        """The NCHW input buffer every call reads: fill it, then call."""
        return self.buffers[INPUT, "nchw"]

    def __call__(self) -> None:
        for fn, args in self.calls:
            fn(*args)

    def profile(self, repeats: int) -> dict[tuple[str, str], float]:
        """Seconds per (op, part) inside the pass: every call timed on its own, ``repeats``
        whole passes, the median per call, summed per (op, part).  The clock reads between
        calls cost ~0.1 us each; a pass's calls are as in :meth:`__call__`."""
        return self.per_part(np.array([self.time_calls() for _ in range(repeats)]))

    def time_calls(self) -> np.ndarray:
        """One pass with every call timed on its own: seconds per call."""
        clock = time.perf_counter
        seconds = np.empty(len(self.calls))
        for i, (fn, args) in enumerate(self.calls):
            t0 = clock()
            fn(*args)
            seconds[i] = clock() - t0
        return seconds

    def per_part(self, seconds: np.ndarray) -> dict[tuple[str, str], float]:
        """(passes x calls) seconds of :meth:`time_calls` as the median per call, summed per
        (op, part)."""
        total: dict[tuple[str, str], float] = {}
        for label, median in zip(self.labels, np.median(seconds, axis=0), strict=True):
            total[label] = total.get(label, 0.0) + float(median)
        return total

    def _label(self, op: str, part: str) -> None:
        self.labels.extend([(op, part)] * (len(self.calls) - len(self.labels)))

    def output(self) -> np.ndarray:
        """The network's output (NCHW) of the last call."""
        return self.buffers[self.network.output, "nchw"]

    def tensor_nchw(self, name: str) -> np.ndarray:
        """Tensor ``name`` of the last call as NCHW (block padding dropped), from the layout
        its op wrote."""
        layout = self.produced[name]
        return layouts.from_layout(self.buffers[name, layout], layout,
                                   self.network.shape(name)[1])

    # -- building ----------------------------------------------------------------------

    def _buffer(self, tensor: str, layout: str) -> np.ndarray:
        key = (tensor, layout)
        if key not in self.live:   # the first build: written here first
            self.live[key] = [self._step, self._step]
        self._used(key)
        if key not in self.buffers:
            # zeros: a blocked layout's padding channels must read as zero before any op
            # has written them (every writer keeps them zero after)
            shape = transforms.stored_shape(self.network.shape(tensor), layout)
            self.buffers[key] = page_aligned(np.zeros(shape, np.float32))
        return self.buffers[key]

    def _held(self, tensor: str, layout: str, reader: str) -> np.ndarray:
        if not self._viewable(tensor, layout):   # (the first build finds these)
            have = self.produced.get(tensor, "nothing")
            raise PlanFileError(f"{self.spec.label}: {reader} reads {tensor!r} in {layout}, "
                                f"but the plan leaves it in {have} with no transform")
        self._used((tensor, layout))
        return self.buffers[tensor, layout]

    def _viewable(self, tensor: str, layout: str) -> bool:
        """Whether ``tensor`` is held in ``layout``: in a buffer of its own, or as a view of
        a layout with the same bytes (:func:`convbench.kernels.transforms.same_memory`),
        which the plan charges no transform for and the pass copies nothing for; such a
        view is made (an alias) the first time it is asked for."""
        if (tensor, layout) in self.buffers:
            return True
        channels = self.network.shape(tensor)[1]
        same = [key for key in self.buffers
                if key[0] == tensor and transforms.same_memory(channels, key[1], layout)]
        if same:
            self._alias((tensor, layout), same[0])
        return bool(same)

    def _used(self, key: tuple[str, str]) -> None:
        """``key``'s storage is read or written at the current op: its life reaches it."""
        root = self.aliases.get(key, key)
        life = self.live.setdefault(root, [self._step, self._step])
        life[1] = max(life[1], self._step)

    def _alias(self, key: tuple[str, str], of: tuple[str, str]) -> np.ndarray:
        """``key`` held in ``of``'s memory: an in-place or fused op's result written over
        it, or the same tensor's bytes seen in another layout's shape."""
        self.aliases[key] = self.aliases.get(of, of)
        shape = transforms.stored_shape(self.network.shape(key[0]), key[1])
        self.buffers[key] = _as_shape(self.buffers[of], shape)
        self._used(key)
        return self.buffers[key]

    def _transform(self, t: TransformSpec) -> None:
        src = self._held(t.tensor, t.src, f"the transform for {t.consumer}")
        dst = self._buffer(t.tensor, t.dst)
        self.calls.append((transforms.Transform(self.network.shape(t.tensor), t.src, t.dst),
                           (src, dst)))

    def _conv(self, op: Op, i: int) -> None:
        """Conv ``op`` (step ``i``) and the glue its stores run: the residual add after it
        (:meth:`_residual`), then a relu / relu6 after the conv or that add (:func:`fusible`)."""
        net, steps, step = self.network, self.spec.steps, self.spec.steps[i]
        prepared = self._prepared(op, step.variant, step.in_layout, step.layout)
        x = self._held(op.inputs[0], step.in_layout, op.name)
        add = self._residual(op, i)
        if add is None:
            y = self._buffer(op.name, step.layout)
        else:   # the shortcut is in the conv's output buffer already: y = shortcut + conv
            shortcut = next(name for name in add.inputs if name != op.name)
            y = self._alias((op.name, step.layout), (shortcut, step.layout))
        self.calls.append((prepared.run, (x, y)))
        last = i + 1 if add is not None else i   # the op whose result the stores write
        if self.fuse and last + 1 < len(steps) and fusible(
                net, net.ops[last], step, net.ops[last + 1], steps[last + 1]):
            self._fuse(net.ops[last + 1], op, step.layout)

    def _residual(self, conv: Op, i: int) -> Op | None:
        """The add at step ``i + 1`` that ``conv`` runs in its stores, or None: its shortcut
        placed in the conv's output buffer (the add step's transforms run now, before the
        conv), the conv adding its sums to it (``Prepared.fuse_residual``)."""
        net, steps = self.network, self.spec.steps
        if i + 1 >= len(steps):
            return None
        add, step = net.ops[i + 1], steps[i + 1]
        if conv.name not in self.accumulated:   # (the second build follows the first)
            if not (self.fuse and residual_fusible(net, i, steps[i], step)
                    and self.kernels[conv.name].fuse_residual()):
                return None
            self.accumulated[conv.name] = add.name
            self.fused[add.name] = conv.name
        for t in step.transforms:
            self._transform(t)
        self._label(add.name, TRANSFORMS)
        return add

    def _prepared(self, op: Op, variant_id: str | None, in_layout: str, out_layout: str
                  ) -> Prepared:
        if variant_id is None:
            raise PlanFileError(f"{self.spec.label}: conv {op.name!r} has no variant")
        variant = variant_of(variant_id)
        algorithm = registry.get(variant.algorithm)
        problem = self.network.problem(op)
        reason = (algorithm.layout_refusal(variant.layout)
                  or algorithm.applies(problem, variant.layout, variant.param_dict))
        if reason:
            raise PlanFileError(f"{op.name} ({variant.id}) does not apply: {reason}")
        prepared = self.kernels.get(op.name) or algorithm.build(
            problem, self.weights[op.name], variant.layout, variant.param_dict)
        if (prepared.in_layout, prepared.out_layout) != (in_layout, out_layout):
            raise PlanFileError(f"{self.spec.label}: {op.name} ({variant.id}) reads "
                                f"{prepared.in_layout} and writes {prepared.out_layout}; the "
                                f"plan says {in_layout} -> {out_layout}")
        self.kernels[op.name] = prepared
        self.growth = max(self.growth, algorithm.error_growth)
        return prepared

    def _fuse(self, activation: Op, conv: Op, layout: str) -> None:
        """Run ``activation`` inside ``conv``'s stores when its kernel can: the activation
        then makes no call, and its tensor is the conv's buffer (as when it ran in place)."""
        if activation.name in self.fused:   # the second build: fused in the first
            return
        if self.kernels[conv.name].fuse_activation(activation.kind):
            self.fused[activation.name] = conv.name

    def _glue(self, op: Op, layout: str) -> None:
        i = glue.in_place_input(self.network, op)
        ins = glue.in_place_first([self._held(name, layout, op.name) for name in op.inputs], i)
        if i is None:
            out = self._buffer(op.name, layout)
        else:   # the result over the input no one else reads (glue.in_place_input)
            out = self._alias((op.name, layout), (op.inputs[i], layout))
        try:
            self.calls.extend(glue.op_calls(op.kind, ins, out, layout,
                                            self.network.shape(op.name)[1], op.k, op.s, op.p))
        except ValueError as exc:
            raise PlanFileError(str(exc)) from None


def profile_together(passes: Mapping[str, NetworkPass], repeats: int
                     ) -> dict[str, dict[tuple[str, str], float]]:
    """Each pass's :meth:`NetworkPass.profile`, the passes taking turns: repeat r of every
    pass before repeat r + 1 of any, as their timings run in the same rounds.  Profiled one
    pass after another, the ops of one pass looked slower than the same ops of another:
    Zen 3 host, ResNet-50's plan at 2 threads, the convs in the pass over their predicted
    costs came to 1.07 for the plan, 0.99 for local-best and 1.06 for all-NHWC, and
    res3b_branch2c, the same variant after the same transform in both, ran 0.677 ms in the
    plan's profile and 0.577 in local-best's; taking turns, the next run gave 1.05 for all
    four of our passes, and 0.693 / 0.714 ms.

    Each timed pass follows an untimed one of its own, so every op runs with its pass's
    weights and tensors where a warm pass finds them, as ONNX Runtime's profiler finds its
    own (:meth:`~convbench.network.onnxruntime_pass.OrtPass.profile`: its repeats back to
    back).  Timed right after the other passes (whose weights and tensors had pushed its
    own out), ours ran their ops colder than ORT's: MobileNet V2's plan at 2 threads, Zen
    3 host, one process, the two ways alternating, 20 repeats each, three times: its ops
    summed 5641 us timed after the other passes and 5310 after a run of their own, and
    ORT's node / our conv came to a geomean of 1.05 and 1.12 (ORT's profile the same)."""
    seconds: dict[str, list[np.ndarray]] = {label: [] for label in passes}
    for _ in range(repeats):
        for label, p in passes.items():
            p()
            seconds[label].append(p.time_calls())
    return {label: passes[label].per_part(np.array(rows)) for label, rows in seconds.items()}


# -- storage ------------------------------------------------------------------------------

def plan_storage(network: Network, buffers: Mapping[tuple[str, str], np.ndarray],
                 live: Mapping[tuple[str, str], list[int]],
                 aliases: Mapping[tuple[str, str], tuple[str, str]]
                 ) -> dict[tuple[str, str], np.ndarray]:
    """Storage for every buffer of a pass: a tensor whose life (first write to last read,
    in op indices) has ended gives its memory to the next one that fits, as inference
    engines plan their arenas.  A pass that gives each tensor its own buffer touches every
    activation of the network once per image: on MobileNet V1's plan at 2 threads (Zen 5
    host) its depthwise layers ran 2x their looped time inside the pass, writing outputs
    last touched a pass ago, while ONNX Runtime's, on recycled buffers, did not.

    The network's input and output keep their own buffers (the caller fills and reads
    them).  A blocked buffer whose channels do not fill their last block shares only with
    buffers of its own shape: its padding channels must read zero, which every writer keeps
    but none writes into memory that held another shape.  Two lives that meet at an op do
    not share (the op may read one while writing the other)."""
    # (a view of the input or the output is pinned with it)
    pinned = {aliases.get(k, k) for k in ((INPUT, "nchw"), (network.output, "nchw"))}
    out: dict[tuple[str, str], np.ndarray] = {}
    free: list[tuple[np.ndarray, tuple[int, ...] | None, int]] = []  # block, shape, free at
    roots = sorted((k for k in live if k not in aliases), key=lambda k: live[k][0])
    for key in roots:
        a = buffers[key]
        if key in pinned:
            out[key] = page_aligned(np.zeros(a.shape, a.dtype))
            continue
        first, last = live[key]
        padded = a.ndim == 5 and network.shape(key[0])[1] % a.shape[-1] != 0
        fits = [i for i, (block, shape, ends) in enumerate(free)
                if ends < first and block.nbytes >= a.nbytes
                and (shape is None if not padded else shape == a.shape)]
        if fits:
            i = min(fits, key=lambda i: free[i][0].nbytes)   # the tightest block
            block, shape, _ = free.pop(i)
        else:
            block, shape = page_aligned(np.zeros(a.nbytes, np.uint8)), (a.shape if padded
                                                                          else None)
        out[key] = block[:a.nbytes].view(a.dtype).reshape(a.shape)
        free.append((block, shape, last))
    for key, root in aliases.items():
        out[key] = _as_shape(out[root], buffers[key].shape)
    return out


def _as_shape(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` itself where it has ``shape`` (an in-place result), else a view of its bytes in
    that shape (another layout of the same memory)."""
    return a if a.shape == tuple(shape) else a.reshape(shape)


# -- verification -------------------------------------------------------------------------

@dataclass(frozen=True)
class PassCheck:
    """A pass's tensors against the float64 reference."""

    passed: bool
    max_abs_err: float       # of the network's output
    max_rel_err: float       # of the output: max |err| / max |reference|
    err_bound_ratio: float   # worst err / bound over every tensor checked (<= 1 passes)
    reason: str = ""


def error_bounds(network: Network, reference: Mapping[str, np.ndarray],
                 growth: Mapping[str, float] | float = 1.0) -> dict[str, float]:
    """Per tensor, the largest absolute error a correct float32 pass may show.

    The model (a bound on the random-walk rounding of the single-conv rule in
    :mod:`convbench.kernels.reference`, carried through the graph; ``m(t)`` is
    max |reference t|):

    - a conv adds ``NETWORK_C * eps32 * sqrt(K) * growth * m(out)`` and carries its
      input's error *relative* to the input's magnitude: with weights scaled by
      1/sqrt(fan-in) (random_weights) a conv maps an error as it maps the signal;
    - relu, relu6, max pooling and average pooling are 1-Lipschitz in the max norm: the
      input's error carries over, average pooling adding the rounding of its k*k-term sum
      (``NETWORK_C * eps32 * k * m(in)``);
    - an add sums its inputs' errors plus one rounding per term (``eps32 * sum m(in)``).

    So the bound grows with depth (a sum over the convs on the deepest path of eps *
    sqrt(K)), about 4e-4 of a tensor's magnitude at ResNet-50's output, while a wrong
    kernel (a missing tap, zeros, a misplaced block) errs by a sizeable fraction of it.
    """
    def g(op: Op) -> float:
        return growth.get(op.name, 1.0) if isinstance(growth, Mapping) else float(growth)

    mag = {name: float(np.max(np.abs(t))) if t.size else 0.0
           for name, t in reference.items()}
    bound: dict[str, float] = {INPUT: 0.0}
    for op in network.ops:
        ins = [bound[name] for name in op.inputs]
        if op.kind == "conv":
            k = network.problem(op).reduction_length
            relative = ins[0] / mag[op.inputs[0]] if mag[op.inputs[0]] > 0 else 0.0
            bound[op.name] = mag[op.name] * (relative + NETWORK_C * EPS32 * math.sqrt(k) * g(op))
        elif op.kind == "add":
            bound[op.name] = sum(ins) + EPS32 * sum(mag[n] for n in op.inputs)
        elif op.kind == "avgpool":
            bound[op.name] = ins[0] + NETWORK_C * EPS32 * op.k * mag[op.inputs[0]]
        else:
            bound[op.name] = ins[0]
    return bound


def check(network: Network, reference: Mapping[str, np.ndarray],
          tensors: Mapping[str, np.ndarray], growth: Mapping[str, float] | float = 1.0
          ) -> PassCheck:
    """Every tensor in ``tensors`` (NCHW, by op name) against ``reference`` in op order;
    fails at the first one outside its bound (:func:`error_bounds`) or not finite, naming
    it: where a pass goes wrong, not only that its output does."""
    bounds = error_bounds(network, reference, growth)
    worst = 0.0
    out = network.output
    for op in network.ops:
        if op.name not in tensors:
            continue
        got = np.asarray(tensors[op.name], np.float64)
        want = reference[op.name]
        if got.shape != want.shape:
            return _failed(f"{op.name}: shape {got.shape}, expected {want.shape}")
        if not np.all(np.isfinite(got)):
            bad = int(np.count_nonzero(~np.isfinite(got)))
            return _failed(f"{op.name} ({op.kind}): {bad} non-finite values")
        err = np.abs(got - want)
        i = int(np.argmax(err))
        bound = bounds[op.name] + 1e-30
        ratio = float(err.flat[i]) / bound
        worst = max(worst, ratio)
        if ratio > 1.0:
            where = tuple(int(v) for v in np.unravel_index(i, got.shape))
            return PassCheck(False, *_output_errors(tensors, reference, out), ratio,
                             f"{op.name} ({op.kind}{', ' + op.layer if op.layer else ''}): "
                             f"error {err.flat[i]:.3g} at n,c,h,w={where} is {ratio:.3g}x "
                             f"the bound {bound:.3g} (got {got.flat[i]:.6g}, expected "
                             f"{want.flat[i]:.6g})")
    return PassCheck(True, *_output_errors(tensors, reference, out), worst)


def _output_errors(tensors: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
                   out: str) -> tuple[float, float]:
    if out not in tensors:
        return math.nan, math.nan
    err = float(np.max(np.abs(np.asarray(tensors[out], np.float64) - reference[out])))
    scale = float(np.max(np.abs(reference[out])))
    return err, err / scale if scale > 0 else math.inf


def _failed(reason: str) -> PassCheck:
    return PassCheck(False, math.inf, math.inf, math.inf, reason)


def pass_tensors(p: NetworkPass) -> dict[str, np.ndarray]:
    """Every op's output, NCHW, for :func:`check`, but those an in-place glue op overwrote
    (:func:`convbench.network.glue.overwritten`): the pass runs once more on its input,
    each tensor copied right after its op's last call, before a later tensor's life may
    reuse its storage (:func:`plan_storage`).  A fused op's tensor is its conv's output."""
    gone = glue.overwritten(p.network) | set(p.accumulated)   # a conv that ran an add: its sum
    last_call = {op: i for i, (op, part) in enumerate(p.labels) if part == OP}
    capture: dict[int, list[str]] = {}
    for op in p.network.ops:
        if op.name not in gone:
            at = last_call[p.fused.get(op.name, op.name)]
            capture.setdefault(at, []).append(op.name)
    out = {}
    for i, (fn, args) in enumerate(p.calls):
        fn(*args)
        for name in capture.get(i, ()):
            out[name] = np.array(p.tensor_nchw(name), copy=True)
    return out


def activation_site(network: Network, before: Op, op: Op) -> bool:
    """Whether glue ``op`` is, by the graph alone, a relu or relu6 of ``before``'s output
    that no other op reads (so it runs in place: :func:`convbench.network.glue.in_place_input`)."""
    return (op.kind in epilogue.CODES and op.inputs == (before.name,)
            and glue.in_place_input(network, op) == 0)


def fusible(network: Network, before: Op, conv_step: StepSpec, op: Op, step: StepSpec
            ) -> bool:
    """Whether glue ``op`` (run right after ``before``: a conv, or the add a conv ran) may
    run inside the conv's stores: an :func:`activation_site` in the layout the conv
    writes, with no transform between them.  The kernel must also fuse it
    (``Prepared.fuse_activation``)."""
    return (activation_site(network, before, op) and not step.transforms
            and step.layout == conv_step.layout)


def residual_site(network: Network, i: int) -> bool:
    """Whether the op after the conv at index ``i`` is, by the graph alone, an add the conv
    can run: an add of two tensors, the conv's output (read by nothing else) and a
    shortcut that is neither the network's input nor its output and that no later op reads
    (the conv overwrites it)."""
    conv, add = network.ops[i], network.ops[i + 1]
    if not (add.kind == "add" and len(add.inputs) == 2 and conv.name in add.inputs
            and add.inputs[0] != add.inputs[1]
            and [o.name for o in network.consumers(conv.name)] == [add.name]):
        return False
    shortcut = next(name for name in add.inputs if name != conv.name)
    order = {o.name: k for k, o in enumerate(network.ops)}
    return (shortcut not in (INPUT, network.output)
            and all(order[reader.name] < i for reader in network.consumers(shortcut)
                    if reader.name != add.name))


def residual_fusible(network: Network, i: int, conv_step: StepSpec, step: StepSpec) -> bool:
    """Whether the add at step ``i + 1`` may run inside the stores of the conv at step
    ``i``: a :func:`residual_site` in the layout the conv writes, its transforms (run
    before the conv instead) not of the conv's output.  The kernel must also fuse it
    (``Prepared.fuse_residual``)."""
    return (residual_site(network, i) and step.layout == conv_step.layout
            and all(t.tensor != network.ops[i].name for t in step.transforms))


def fusion_sites(network: Network) -> dict[str, str]:
    """The glue ops a pass may run in a conv's stores, by the kind they fuse as ("add",
    "relu", "relu6"): an add right after a conv (:func:`residual_site`), an activation
    right after a conv or after such an add (:func:`activation_site`).  What the layout
    plan charges nothing for where the chosen kernel fuses that kind and the layouts agree
    (:mod:`convbench.plan.layouts`), as the pass decides with :func:`fusible` and
    :func:`residual_fusible`."""
    sites: dict[str, str] = {}
    ops = network.ops
    for i in range(1, len(ops)):
        before, op = ops[i - 1], ops[i]
        if before.kind == "conv" and residual_site(network, i - 1):
            sites[op.name] = "add"
        elif ((before.kind == "conv" or sites.get(before.name) == "add")
              and activation_site(network, before, op)):
            sites[op.name] = op.kind
    return sites


def predicted_parts(spec: PassSpec, fused: Collection[str] = ()
                    ) -> dict[tuple[str, str], float]:
    """The plan's seconds per (op, part), as :meth:`NetworkPass.profile` measures them;
    ``fused`` ops (:attr:`NetworkPass.fused`) cost nothing of their own."""
    parts: dict[tuple[str, str], float] = {}
    for step in spec.steps:
        if step.transforms:
            parts[step.op, TRANSFORMS] = sum(t.seconds for t in step.transforms)
        parts[step.op, OP] = 0.0 if step.op in fused else step.seconds
    if spec.output_transform is not None:
        parts[OUTPUT, TRANSFORMS] = spec.output_transform.seconds
    return parts


def op_growth(network: Network, spec: PassSpec) -> dict[str, float]:
    """Per conv op, its algorithm's declared error growth (Winograd, Strassen > 1)."""
    out = {}
    for op, step in zip(network.ops, spec.steps, strict=True):
        if op.kind == "conv" and step.variant:
            out[op.name] = registry.get(variant_of(step.variant).algorithm).error_growth
    return out
