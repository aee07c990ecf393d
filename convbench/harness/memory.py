"""The memory a worker process may take: ``RLIMIT_DATA``, set by the worker on itself.

A kernel or library that allocates without bound (a bug, or a layer far larger than the
suite meant) must cost one case, not the machine: with the limit, its allocation fails
with ``MemoryError`` (or a library's ``bad_alloc``) inside the worker and the case is
recorded as an error, where without it the kernel's OOM killer might pick the runner, a
browser or a neighbour.  ``RLIMIT_DATA`` counts the heap and private anonymous mappings
(Linux >= 4.7), which is what buffers are; unlike ``RLIMIT_AS`` it leaves the large
address-space reservations of LLVM, OpenBLAS and thread stacks alone.

Default: three quarters of the physical memory (``MemTotal``), at least
:data:`MIN_LIMIT_BYTES`; ``CONVBENCH_WORKER_MEMORY`` (bytes, or with a K/M/G/T suffix)
overrides it, ``0`` lifts it.
"""

from __future__ import annotations

import os
import resource

from convbench.errors import ConvbenchError

MEMORY_ENV = "CONVBENCH_WORKER_MEMORY"
MIN_LIMIT_BYTES = 4 << 30   # torch and onnxruntime alone map ~1 GiB at import
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def physical_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def parse_size(text: str) -> int:
    """``"1G"``, ``"512M"``, ``"1073741824"`` as bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, suffix = (text[:-1], text[-1]) if text[-1:] in _SUFFIX else (text, "")
    try:
        value = int(float(number) * _SUFFIX[suffix])
    except (ValueError, OverflowError):
        raise ConvbenchError(f"{MEMORY_ENV}: expected bytes like 8G or 8589934592, got "
                             f"{text!r}") from None
    if value < 0:
        raise ConvbenchError(f"{MEMORY_ENV}: expected a size >= 0, got {text!r}")
    return value


def worker_limit() -> int | None:
    """Bytes a worker may allocate (None: no limit)."""
    given = os.environ.get(MEMORY_ENV, "")
    if given:
        return parse_size(given) or None
    total = physical_bytes()
    return None if total is None else max(MIN_LIMIT_BYTES, total * 3 // 4)


def apply(limit: int | None) -> None:
    """Limit this process (a worker, before it imports numba or a library)."""
    if limit is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
