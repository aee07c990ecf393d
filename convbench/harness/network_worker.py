"""The worker process of ``convbench run --network``: builds, verifies and times whole
network passes.

Started as ``python -m convbench.harness.network_worker --job FILE --out FILE`` by
:mod:`convbench.harness.network_run`.  The job holds the plan.json document, which passes
to run (the plan's, all-NCHW, all-NHWC, oneDNN, ONNX Runtime), the thread count, the CPUs,
the cache modes and the timing.  Each pass is built (every conv prepacked), run once and checked
tensor by tensor against the float64 reference pass (:mod:`convbench.network.executor`);
only passes that pass are timed, all of them round-robin in the same rounds with the
in-run reference kernel, as one layer's variants are.  ``warm``: calibrated loops of
back-to-back passes; ``cold``: one pass per value, right after the caches were evicted
(:mod:`convbench.harness.coldcache`).  The answer (JSON) holds per pass and cache mode
the values and the reference's values of the same rounds, or why the pass was not timed;
with ``profile`` (a repeat count), after the timing, each of our passes' seconds per op and
per op's transforms inside the pass (:meth:`~convbench.network.executor.NetworkPass.profile`),
and ONNX Runtime's per node from its profiler
(:meth:`~convbench.network.onnxruntime_pass.OrtPass.profile`).

Why not the kernel worker: its job, protocol and journal are keyed by conv cases (one
layer, one variant); a pass is a whole graph.  The pinning before numba starts its threads
and the timer are shared, as in :mod:`convbench.harness.transform_worker`.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import Any

from convbench.harness import oneshot
from convbench.harness.threads import use_threads


def _error(exc: Exception) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _build(label: str, plan: Any, graph: Any, weights: dict, threads: int
           ) -> tuple[Any, Any]:
    """(the pass, a function giving its tensors as NCHW) for one label."""
    from convbench.harness import network_run
    from convbench.network import executor, onednn_pass, onnxruntime_pass

    if label == network_run.ONEDNN:
        built = onednn_pass.OneDNNPass(graph, weights)
        return built, onednn_pass.pass_tensors
    if label == network_run.ORT:
        return onnxruntime_pass.OrtPass(graph, weights, threads), onnxruntime_pass.pass_tensors
    spec = plan.passes[network_run.spec_label(label)]
    return (executor.NetworkPass(graph, spec, weights, fuse=label != network_run.UNFUSED,
                                 shared=label != network_run.OWN_BUFFERS),
            executor.pass_tensors)


def run_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Verify every pass of the job against the reference, then time the correct ones."""
    import numpy as np

    from convbench.harness import coldcache, network_run, timer
    from convbench.network import executor, onednn_pass, planfile
    from convbench.network.reference import run_reference

    threads = job["threads"]
    blas_limit = use_threads(threads)  # noqa: F841 - held
    if network_run.ONEDNN in job["passes"] and onednn_pass.unavailable() is None:
        import torch

        torch.set_num_threads(threads)
    timer.start_parallel_runtime()
    plan = planfile.from_document(job["plan"], Path(job.get("plan_path", "plan.json")))
    graph = plan.suite.graph
    x, weights = executor.network_inputs(graph, job["seed"])
    reference = run_reference(graph, plan.suite,
                              {k: w.astype(np.float64) for k, w in weights.items()}, x)
    answers: dict[str, dict[str, Any]] = {}
    alive: dict[str, Any] = {}
    for label in job["passes"]:
        answer: dict[str, Any] = {"pass": label, "status": "ok", "reason": ""}
        answers[label] = answer
        try:
            t0 = time.perf_counter()
            built, tensors_of = _build(label, plan, graph, weights, threads)
            t1 = time.perf_counter()
            built.input[...] = x
            built()
            answer.update(build_s=t1 - t0, first_call_s=time.perf_counter() - t1,
                          fused=sorted(getattr(built, "fused", {})))
        except Exception as exc:  # a pass that cannot run is a result, not a crash
            answer.update(status="error", reason=_error(exc))
            continue
        # a library's pass is checked by its output only (no plan, no tensors)
        growth = (1.0 if label in network_run.LIBRARIES
                  else executor.op_growth(graph, plan.passes[network_run.spec_label(label)]))
        verdict = executor.check(graph, reference, tensors_of(built), growth)
        answer.update(max_abs_err=verdict.max_abs_err, max_rel_err=verdict.max_rel_err,
                      err_bound_ratio=verdict.err_bound_ratio)
        if not verdict.passed:
            answer.update(status="fail", reason=verdict.reason)
            continue
        alive[label] = built
    timing = job["timing"]
    reference_kernel = timer.ReferenceKernel()
    ref_entry = timer.Entry("reference", reference_kernel,
                            timer.calibrate(reference_kernel, timing["min_time"]))
    out = []
    for mode in job["cache"]:
        entries = []
        evictor = (None if mode == coldcache.WARM else
                   coldcache.Evictor(mode, threads, job.get("cold_bytes")))
        for label, built in alive.items():
            if evictor is None:
                entry = timer.Entry(label, built, timer.calibrate(built, timing["min_time"]))
            else:   # a cold value is one pass right after an eviction
                entry = timer.Entry(label, built, 1, before=evictor.evict)
            for _ in range(timing["warmups"]):
                entry.value()
            entries.append(entry)
        ref_entry.values.clear()
        timer.run_rounds(entries, ref_entry, timing["values"],
                         order=np.random.default_rng([job["seed"], job["process"]]))
        timed = {e.key: e for e in entries}
        oneshot.tick(job)
        for label in job["passes"]:
            row = {**answers[label], "cache": mode}
            if label in timed:
                row.update(values=list(timed[label].values),
                           ref_values=list(ref_entry.values), loops=timed[label].loops)
            out.append(row)
    if job.get("profile"):   # after the timing, which it must not disturb
        repeats = int(job["profile"])
        ours = {label: built for label, built in alive.items()
                if isinstance(built, executor.NetworkPass)}
        parts = executor.profile_together(ours, repeats)
        parts.update({label: built.profile(repeats) for label, built in alive.items()
                      if label not in ours and hasattr(built, "profile")})
        profiles = {label: [[op, part, seconds] for (op, part), seconds in found.items()]
                    for label, found in parts.items()}
        for row in out:
            if row["pass"] in profiles:
                row["profile"] = profiles[row["pass"]]
    return out


def main(argv: list[str] | None = None) -> int:
    return oneshot.main(run_job, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
