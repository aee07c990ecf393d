"""The results directory: its files, the tidy table's columns and the format version.

Written by ``convbench run`` (harness), read by ``report`` and ``compare``.  A results
directory holds::

    manifest.json      format_version, convbench version, suite, created (UTC ISO), status
                       ("running" | "complete" | "interrupted"), planned case ids
    results.parquet    one row per case (layer x variant x threads x vector width), COLUMNS
    results.csv        the same table as CSV
    values.parquet     every raw timed value, long form, VALUE_COLUMNS
    pyperf.json        a pyperf BenchmarkSuite, one benchmark per measured case
    environment.json   host, CPU, clock, cores, kernel, governor, library versions, machine
                       limits (peak GFLOP/s, bandwidth) when known, perf availability, load,
                       the host checks of ``convbench system`` ("system") and the busy
                       warning the run printed ("busy_warning", null when none), each
                       worker's settings ("workers": threads, pinned "cpus", numba's
                       code settings "numba_config" (NUMBA_OPT and the like), ...), the
                       git commit of the convbench checkout that ran ("git_commit", null
                       without one) and, in a farm run's host directory, the worker's
                       name ("farm_host", convbench.farm.layout)
    suite.yaml         a copy of the suite that was run
    journal.jsonl      every finished case as committed, one JSON line each: the truth
                       while the manifest says "running" (results.store, results.journal)
    .lock              held by the process writing the directory (results.lock)

The Parquet, CSV and pyperf files are written when a run stops (complete or interrupted);
the manifest, written after them, vouches for them.

Times are seconds per kernel call.  Missing figures are NaN, with a ``*_reason`` column
saying why where one exists (counters).  Counter columns added by the counters backend are
named ``ctr_<event>`` (raw counts per call) and derived metrics by their names in
:data:`COUNTER_METRICS`.  The static vector profile of the code each ok case ran
(``convbench.kernels.asm.static_profile``, read once per case by its first timing worker
process; not for library baselines, whose code is not numba's) adds ``asm_vectorisation``
("vectorised", "not vectorised", "no FP", "no jitted kernel": an own variant that leaves the
arithmetic to BLAS), ``asm_profile`` (one line, as ``convbench check --asm`` prints it),
``asm_packed_fma_{64,128,256,512,sve}`` and ``asm_scalar_fp`` (instruction counts in the
code, not executed counts), ``asm_kernels`` (kernel:verdict pairs) or, where the code could
not be read without compiling it again, ``asm_reason``.
"""

from __future__ import annotations

from convbench.identity import KEY_COLUMNS
from convbench.status import STATUSES as STATUSES  # re-exported: the status column's words

# 2: adds the kernel_version and cache columns (cache is part of the case key);
#    statuses are convbench.status.Status words.
# 3: adds the cpus column (the CPUs each case's worker was pinned to).
# 4: adds performed_flops, roofline_gbs, share_flag, processes, process_spread, the
#    values' process, compile_width and vector_width_bits; the roofline bound comes from the
#    machine's bandwidth curve at the layer's footprint (roofline_level names the plateau).
# Older directories are read through convbench.results.upgrade.
# 5: adds journal.jsonl (cases committed by appending) and .lock; a killed run's cases are
#    in the journal only, the consolidated files are written when a run stops.
# 6: adds the cache_model column (whose caches the simulated counts model: a
#    harness.counters.cache_models name, or "host") and environment.json's cache_model.
FORMAT_VERSION = 6

MANIFEST = "manifest.json"
RESULTS_PARQUET = "results.parquet"
RESULTS_CSV = "results.csv"
VALUES_PARQUET = "values.parquet"
PYPERF_JSON = "pyperf.json"
ENVIRONMENT_JSON = "environment.json"
SUITE_COPY = "suite.yaml"

REQUIRED_FILES = (MANIFEST, RESULTS_PARQUET, VALUES_PARQUET, ENVIRONMENT_JSON)

# name -> (pandas dtype, meaning)
COLUMNS: dict[str, tuple[str, str]] = {
    # identity: these together are a case's identity across runs (see IDENTITY)
    "case_id": ("string", "stable id: layer|algorithm/layout/params|t<threads>|v<width>"),
    "suite": ("string", "suite name"),
    "layer": ("string", "layer name from the suite"),
    "variant": ("string", "algorithm/layout/k=v... (kernels.base.Variant.id)"),
    "algorithm": ("string", "registered algorithm name"),
    "layout": ("string", "activation layout the kernel runs in"),
    "params": ("string", "kernel parameters as sorted JSON object"),
    "threads": ("int64", "threads given to numba and BLAS"),
    "vector_width": ("string", "auto | 256 | 512 (NUMBA_CPU_FEATURES in the worker)"),
    "compile_width": ("string", "the width the code was compiled for: vector_width, or for "
                      "auto the host's fastest measured width (machine limits), or "
                      "llvm-default when no limits were known; shares divide by its peak"),
    "vector_width_bits": ("int64", "bits of the widest FMA LLVM emitted under that width's "
                          "flags on this host (the machine peak kernel's static profile)"),
    "cache": ("string", "warm | cold-weights | cold: the cache state each timed call starts "
                        "from (cold modes evict before every call and time single calls)"),
    "baseline": ("bool", "a library baseline (BLAS / oneDNN), not an own kernel"),
    # the problem
    "descriptor": ("string", "benchdnn descriptor of the layer (part of the case's identity: "
                             "compare refuses to pair cases whose problems differ)"),
    "kernel_version": ("string", "hash of the algorithm's module source and the kernel "
                                 "modules it uses (kernels.registry.kernel_version)"),
    "layer_count": ("int64", "occurrences of the layer in the network"),
    "flops": ("int64", "nominal direct-conv FLOPs of one call"),
    "compulsory_bytes": ("int64", "input + weights + output bytes"),
    # outcome
    "status": ("string", "ok | fail | error | crash | timeout | skip"),
    "reason": ("string", "why the case is not ok (empty when ok)"),
    # where it ran
    "cpus": ("string", "CPUs the worker was pinned to as it reported them (Linux cpulist, "
                       "e.g. 0-1; --cpus or one per thread); empty when no worker reported "
                       "(skips, crashes before a result, format 2 and older)"),
    "cache_model": ("string", "whose cache geometry --counters sim simulated: a named "
                              "model (--cache-model, e.g. cortex-a72) or 'host'; under a "
                              "model the sim_* counts are a model of the data-cache traffic "
                              "of this host's code under that core's caches, not a "
                              "measurement of that core"),
    # verification against the float64 reference
    "max_abs_err": ("float64", "max |y - ref|"),
    "max_rel_err": ("float64", "max relative error where |ref| exceeds the bound"),
    "err_bound_ratio": ("float64", "worst error / tolerance bound (<= 1 passes)"),
    # one-time costs and memory
    "compile_s": ("float64", "first call minus a steady call: JIT compile or cache load"),
    "prepare_s": ("float64", "one-time preparation (weight packing, transforms, buffers)"),
    "workspace_bytes": ("int64", "scratch memory beyond input, weights and output"),
    "packed_weight_bytes": ("int64", "weights in the kernel's own format"),
    "info": ("string", "kernel-specific figures as JSON (multiplies saved, ...)"),
    # timing statistics, seconds per call
    "loops": ("int64", "calls per timed value (calibrated per process, the smallest of the "
              "processes; 1 in cold cache modes)"),
    "processes": ("int64", "worker processes the values come from (timing.processes)"),
    "process_spread": ("float64", "(max - min) / median of the processes' medians of "
                       "value / reference value: a bias of one process shows here"),
    "timer_resolution_s": ("float64", "the clock's measured resolution divided by loops: "
                                      "what one value cannot resolve below (cold modes time "
                                      "single calls)"),
    "n_values": ("int64", "timed values"),
    "median_s": ("float64", "median"),
    "mean_s": ("float64", "mean"),
    "stdev_s": ("float64", "sample standard deviation"),
    "min_s": ("float64", "minimum"),
    "max_s": ("float64", "maximum"),
    "iqr_s": ("float64", "interquartile range"),
    "ci_low_s": ("float64", "bootstrap 95% CI of the median, low (values from several "
                            "worker processes: the processes resampled, then their values)"),
    "ci_high_s": ("float64", "bootstrap 95% CI of the median, high (as ci_low_s)"),
    "gflops": ("float64", "nominal FLOPs / median time / 1e9: the effective rate, also for "
                          "algorithms that do fewer multiplies (Winograd, Strassen)"),
    "performed_flops": ("int64", "FLOPs the variant performs per call: the nominal flops, "
                                 "or fewer where its kernel reports them in info (Winograd: "
                                 "2 x alpha^2 x tiles x IC x OC of its GEMMs; Strassen: its "
                                 "leaf GEMMs); the shares below divide these"),
    "peak_share": ("float64", "performed_flops / median time / measured peak for this thread "
                              "count and width (NaN when no peak is known, or when above 1: "
                              "see share_flag)"),
    "gbs": ("float64", "compulsory bytes (input + weights + output once) / median time / 1e9"),
    "roofline_gbs": ("float64", "triad GB/s of the machine's bandwidth curve at this case's "
                                "footprint per thread (compulsory bytes / threads; "
                                "interpolated in log size, the largest point's beyond it)"),
    "roofline_level": ("string", "what bounds the roofline: 'peak' when compute-bound, else "
                                 "the memory plateau (L1, L2, L3, DRAM) whose bandwidth is "
                                 "nearest roofline_gbs; empty without machine limits"),
    "roofline_share": ("float64", "performed GFLOP/s / min(peak, performed flops per byte x "
                                  "roofline_gbs): the share of the roofline bound (NaN "
                                  "without machine limits, or when above 1: see share_flag)"),
    "share_flag": ("string", "non-empty when a share came out above 1 (beyond the timer's "
                                "resolution relative to the median): a measurement error, "
                                "not a result; names the share and its value, and that share "
                                "is NaN in the row"),
    # in-run reference kernel (fixed sgemm) measured in the same rounds
    "ref_ratio": ("float64", "median over rounds of value / reference-kernel value"),
    "ref_ratio_ci_low": ("float64", "bootstrap 95% CI of ref_ratio, low (as ci_low_s)"),
    "ref_ratio_ci_high": ("float64", "bootstrap 95% CI of ref_ratio, high (as ci_low_s)"),
}

# Columns that identify a case across runs (compare and report join on these); the
# descriptor must agree too (convbench.identity).
IDENTITY = KEY_COLUMNS

VALUE_COLUMNS: dict[str, tuple[str, str]] = {
    "case_id": ("string", "the case"),
    "process": ("int64", "which of the case's worker processes took the value (0, 1, ...)"),
    "round": ("int64", "round-robin round the value was taken in, within its process"),
    "value": ("float64", "seconds per call"),
    "ref_value": ("float64", "reference kernel's seconds per call in the same round"),
    "loops": ("int64", "calls in this value"),
}

# Derived counter metrics (counters backend); each may have a "<name>_reason" column.
COUNTER_METRICS = ("ipc", "l1d_miss_rate", "llc_miss_rate", "fma_utilization",
                   "counted_gflops", "dram_bandwidth_gbs")
