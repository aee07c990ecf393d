"""The worker process of ``convbench transforms``: verifies and times layout transforms and
glue ops, what a layout plan pays besides its convs.

Started as ``python -m convbench.harness.transform_worker --job FILE --out FILE`` by
:mod:`convbench.harness.transform_run`.  The job names the tensor shapes, each with its (from,
to) layout pairs, the glue ops (:class:`convbench.network.glue.GlueKey`) with their layouts, the
thread count, the CPUs and the timing; the answer (a JSON file) holds, per shape and pair
and per glue key and layout, the timed values with the in-run reference's values of the
same rounds, or why it was not timed.

Why not the kernel worker (:mod:`convbench.harness.worker`): its job, its protocol and the
runner's journal are all keyed by conv cases (layer x variant, verified against the conv
reference); a transform is no conv case.  What timing needs is shared instead: the pinning
(:mod:`convbench.harness.affinity`) before numba starts its threads, and the timer's
calibration, reference kernel and seeded round-robin rounds (:mod:`convbench.harness.timer`).
Each shape's pairs are timed round-robin together, like one layer's variants; so are each
glue key's layouts.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from convbench.harness import oneshot
from convbench.harness.threads import use_threads

# the cache modes each transform and glue op is timed in (see _transforms and _glue), in
# the order of its answers
CACHE_MODES = ("cold-weights", "warm")


def run_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Verify every transform of the job against numpy and every glue op against the float64
    reference, then time the correct ones (transforms first, then glue answers, which carry
    a ``kind``)."""
    import numpy as np

    from convbench.harness import timer

    blas_limit = use_threads(job["threads"])  # noqa: F841 - held
    timer.start_parallel_runtime()
    reference = timer.ReferenceKernel()
    ref_entry = timer.Entry("reference", reference,
                            timer.calibrate(reference, job["timing"]["min_time"]))
    rng = np.random.default_rng(job["seed"])
    return [*_transforms(job, ref_entry, rng), *_glue(job, ref_entry, rng)]


def _rounds(job: dict[str, Any], ref_entry: Any, entries: list, timed: list[dict]) -> None:
    """Time ``entries`` round-robin with the reference; their values into ``timed``."""
    import numpy as np

    from convbench.harness import timer

    for entry in entries:
        for _ in range(job["timing"]["warmups"]):
            entry.value()
    ref_entry.values.clear()
    timer.run_rounds(entries, ref_entry, job["timing"]["values"],
                     order=np.random.default_rng([job["seed"], job["process"]]))
    for answer, entry in zip(timed, entries, strict=True):
        answer.update(values=list(entry.values), ref_values=list(ref_entry.values),
                      loops=entry.loops)


def _in_every_mode(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """One copy of ``answer`` per cache mode: the plan reads the mode of its conv costs."""
    return [{**answer, "cache": mode} for mode in CACHE_MODES]


def _queue(answer: dict[str, Any], by_mode: dict[str, Any], entries: list[Any],
           timed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Queue each mode's timer entry for :func:`_rounds`; the answers they will fill in."""
    rows = _in_every_mode(answer)
    for mode, row in zip(CACHE_MODES, rows, strict=True):
        entries.append(by_mode[mode])
        timed.append(row)
    return rows


def _transforms(job: dict[str, Any], ref_entry: Any, rng: Any) -> list[dict[str, Any]]:
    """Each shape's (from, to) pairs, checked against numpy's transpose and timed as
    :func:`_glue` times a glue op, in both :data:`CACHE_MODES`: ``cold-weights`` one call
    after the eviction and the transform's twin (the same transform from the call's input
    into a spare output: the input warm where the op before it left it, the output cold),
    ``warm`` in a loop.  Timed warm only, the 33 transforms of ResNet-50's 2-thread plan
    ran 1.02 and 1.50 ms inside its pass in two runs against 0.57 predicted, its convs at
    1.07x and 1.05x theirs (Zen 3 host).  Timed both ways, in one quieter run, the plan's
    31 transforms took 0.744 ms inside the pass against 0.474 warm and 0.975 cold-weights,
    local-best's 47 took 1.972 against 1.293 and 2.652: warm figures under-predict the pass
    by 1.5-2.7x, cold-weights ones over-predict a quiet pass by 1.3x.  The plan takes
    cold-weights, as for glue."""
    import numpy as np

    from convbench.harness import coldcache, timer
    from convbench.kernels import layouts, transforms

    timing = job["timing"]
    evictor = coldcache.Evictor(coldcache.COLD_WEIGHTS, job["threads"], job.get("cold_bytes"),
                                pass_bytes=job.get("pass_bytes"))
    answers: list[dict[str, Any]] = []
    for shape, pairs in job["shapes"]:
        shape = tuple(shape)
        x_nchw = rng.standard_normal(shape, dtype=np.float32)
        entries, timed = [], []
        for src, dst in pairs:
            answer: dict[str, Any] = {"shape": list(shape), "from_layout": src,
                                      "to_layout": dst, "status": "ok", "reason": ""}
            t = transforms.Transform(shape, src, dst)
            x, y = layouts.to_layout(x_nchw, src), t.empty_output()
            t(x, y)
            if not np.array_equal(y, transforms.reference(x, shape, src, dst)):
                answer.update(status="wrong", reason="differs from numpy's transpose")
                answers.extend(_in_every_mode(answer))
                continue
            spare = t.empty_output()

            def twin(x_: Any, _y: Any, t: Any = t, spare: Any = spare) -> None:
                t(x_, spare)

            answers.extend(_queue(answer, {
                "cold-weights": timer.Entry(f"{src}->{dst}", t, 1, (x, y),
                                            before=evictor.before_twin(twin)),
                "warm": timer.Entry(f"{src}->{dst}/warm", t,
                                    timer.calibrate(t, timing["min_time"], (x, y)), (x, y))},
                entries, timed))
        _rounds(job, ref_entry, entries, timed)
        oneshot.tick(job)
    return answers


def _glue(job: dict[str, Any], ref_entry: Any, rng: Any) -> list[dict[str, Any]]:
    """Each glue key in each layout, with the calls the network pass makes, checked
    against the float64 reference op (exact up to float32 rounding of the sums).

    Timed twice, as the two kinds of pass run a glue op (the plan takes the one of its
    cache mode, :mod:`convbench.tune.cache_choice`):

    - ``cold-weights``: one call after the caches were evicted and the op's twin ran on
      its first input (the op before it just wrote it), so the other inputs (a residual
      add's shortcut, produced long before) and a fresh output buffer start cold.  Timed
      in a loop instead, ResNet-50's relus and adds took 1.8x and 2.4x less than inside
      its pass (AMD host, 1 thread).  With the first input read back on one thread
      instead of the twin, MobileNet V1's 28 glue ops cost 2.25-3.31 ms at 2 threads
      (Zen 4 host), 8-12x their warm time: each paid the thread pool's and the runtime's
      restart, which a pass's back-to-back ops do not.
    - ``warm``, a network that stays in cache: in a loop, everything in cache.  The
      cold-weights figures put MobileNet V1's 27 relu6 at 1.40 ms where its warm pass ran
      them in 0.46 (AMD Zen 3 host, 2 threads)."""
    import numpy as np

    from convbench.harness import coldcache, timer
    from convbench.kernels import layouts, transforms
    from convbench.network import glue
    from convbench.network.reference import run_op
    from convbench.spec.network import Op

    answers: list[dict[str, Any]] = []
    if not job.get("glue"):
        return answers
    evictor = coldcache.Evictor(coldcache.COLD_WEIGHTS, job["threads"], job.get("cold_bytes"),
                                pass_bytes=job.get("pass_bytes"))
    for raw, glue_layouts in zip(job["glue"], job["glue_layouts"], strict=True):
        key = glue.GlueKey(raw["kind"], tuple(raw["shape"]), raw["inputs"], raw["k"],
                           raw["s"], raw["p"], raw["in_place"])
        ins_nchw = [rng.standard_normal(key.shape, dtype=np.float32)
                    for _ in range(key.inputs)]
        op = Op(key.kind, key.kind, tuple(f"in{i}" for i in range(key.inputs)),
                k=key.k, s=key.s, p=key.p)
        expected = run_op(op, [a.astype(np.float64) for a in ins_nchw])
        channels = key.shape[1]
        entries, timed = [], []
        for layout in glue_layouts:
            answer: dict[str, Any] = {**raw, "layout": layout, "status": "ok", "reason": ""}
            # copies: an in-place op must not change the inputs of the next layout
            ins = [np.array(layouts.to_layout(a, layout)) for a in ins_nchw]
            out = (ins[0] if key.in_place   # as the pass runs it: over its first input
                   else np.zeros(transforms.stored_shape(expected.shape, layout), np.float32))
            calls = glue.op_calls(key.kind, ins, out, layout, channels, key.k, key.s, key.p)

            def run(calls: list = calls) -> None:
                for fn, args in calls:
                    fn(*args)

            run()
            got = layouts.from_layout(out, layout, channels)
            # float32 sums of `inputs` terms: a few ulps of the largest magnitude
            tolerance = 4 * key.inputs * np.finfo(np.float32).eps * np.abs(expected).max()
            if not np.allclose(got, expected, rtol=0, atol=tolerance):
                answer.update(status="wrong", reason="differs from the float64 reference op")
                answers.extend(_in_every_mode(answer))
                continue
            twin = glue_twin(key, ins, out, layout, channels)
            before = functools.partial(evictor.before_twin(twin), ins[0], out)

            answers.extend(_queue(answer, {
                "cold-weights": timer.Entry(f"{key.kind}@{layout}", run, 1, before=before),
                "warm": timer.Entry(f"{key.kind}@{layout}/warm", run,
                                    timer.calibrate(run, job["timing"]["min_time"]))},
                entries, timed))
        _rounds(job, ref_entry, entries, timed)
        oneshot.tick(job)
    return answers


def glue_twin(key: Any, ins: list, out: Any, layout: str, channels: int
              ) -> Callable[[Any, Any], None]:
    """A glue op's twin for cold-weights (``Evictor.before_twin``): the same op on the real
    first input (the op before it just wrote it) and its own copies of the other inputs
    and, unless it runs in place, of the output.  So the pass's warm part -- that input,
    where the op's threads read it, the code, the awake thread pool -- is warm, and the
    output and a residual's shortcut stay cold."""
    import numpy as np

    from convbench.network import glue

    twin_ins = [ins[0], *(np.array(a) for a in ins[1:])]
    twin_out = twin_ins[0] if key.in_place else np.zeros_like(out)
    calls = glue.op_calls(key.kind, twin_ins, twin_out, layout, channels, key.k, key.s,
                          key.p)

    def run(_x: Any, _y: Any) -> None:
        for fn, args in calls:
            fn(*args)
    return run


def main(argv: list[str] | None = None) -> int:
    return oneshot.main(run_job, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
