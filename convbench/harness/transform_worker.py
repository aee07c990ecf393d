"""The worker process of ``convbench transforms``: verifies and times layout transforms.

Started as ``python -m convbench.harness.transform_worker --job FILE --out FILE`` by
:mod:`convbench.harness.transform_run`.  The job names the tensor shapes, the (from, to)
layout pairs, the thread count, the CPUs and the timing; the answer (a JSON file) holds, per
shape and pair, the timed values with the in-run reference's values of the same rounds, or
why the pair was not timed.

Why not the kernel worker (:mod:`convbench.harness.worker`): its job, its protocol and the
runner's journal are all keyed by conv cases (layer x variant, verified against the conv
reference); a transform is no conv case.  What timing needs is shared instead: the pinning
(:mod:`convbench.harness.affinity`) before numba starts its threads, and the timer's
calibration, reference kernel and seeded round-robin rounds (:mod:`convbench.harness.timer`).
Each shape's pairs are timed round-robin together, like one layer's variants.
"""

from __future__ import annotations

import sys
from typing import Any

from convbench.harness import oneshot
from convbench.harness.threads import use_threads


def run_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Verify every transform of the job against numpy, then time the exact ones."""
    import numpy as np

    from convbench.harness import timer
    from convbench.kernels import layouts, transforms

    blas_limit = use_threads(job["threads"])  # noqa: F841 - held
    timer.start_parallel_runtime()
    timing = job["timing"]
    rng = np.random.default_rng(job["seed"])
    reference = timer.ReferenceKernel()
    ref_entry = timer.Entry("reference", reference,
                            timer.calibrate(reference, timing["min_time"]))
    answers: list[dict[str, Any]] = []
    for shape in map(tuple, job["shapes"]):
        x_nchw = rng.standard_normal(shape, dtype=np.float32)
        entries, timed = [], []
        for src, dst in job["pairs"]:
            answer: dict[str, Any] = {"shape": list(shape), "from_layout": src,
                                      "to_layout": dst, "status": "ok", "reason": ""}
            answers.append(answer)
            t = transforms.Transform(shape, src, dst)
            x, y = layouts.to_layout(x_nchw, src), t.empty_output()
            t(x, y)
            if not np.array_equal(y, transforms.reference(x, shape, src, dst)):
                answer.update(status="wrong", reason="differs from numpy's transpose")
                continue
            entry = timer.Entry(f"{src}->{dst}", t, timer.calibrate(t, timing["min_time"],
                                                                    (x, y)), (x, y))
            for _ in range(timing["warmups"]):
                entry.value()
            entries.append(entry)
            timed.append(answer)
        ref_entry.values.clear()
        timer.run_rounds(entries, ref_entry, timing["values"],
                         order=np.random.default_rng([job["seed"], job["process"]]))
        for answer, entry in zip(timed, entries, strict=True):
            answer.update(values=list(entry.values), ref_values=list(ref_entry.values),
                          loops=entry.loops)
    return answers


def main(argv: list[str] | None = None) -> int:
    return oneshot.main(run_job, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
