"""Named cache models: other cores' cache geometries for callgrind's simulation.

``--counters sim --cache-model NAME`` simulates this host's code (its instructions, its
addresses) against the caches of the named core.  That is a model of the data-cache
traffic of this host's code under that core's caches, never a measurement of that core:
its compiler output, vector width, prefetchers and replacement policy all differ (callgrind
simulates LRU, write-allocate, no prefetch).

callgrind simulates two levels, I1/D1 and one unified LL.  Per model, the LL is the core's
last *private* level where it has one (A76, N1, V1, Zen 4, Sapphire Rapids: their L2): what
one core's working set competes for alone, so the figure does not depend on what the other
cores run.  Where the core has no private level beyond L1 (Cortex-A72, Apple M1), the LL is
the cluster's shared L2 whole, as a single-threaded run sees it.  The L3s (Zen 4's per-CCD
32 MiB, Sapphire Rapids' 1.875 MiB/core mesh slices) are not modelled.

callgrind needs a power-of-two number of sets; every size is rounded down to one exactly as
``sim._power_of_two_sets`` rounds the host's LL, and ``ROUNDED`` records where that changed a
figure (for the entries below, nowhere: all their set counts are powers of two already).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convbench.errors import ConvbenchError

KiB = 1024
MiB = 1024 * KiB
HOST = "host"   # the results' word for "the host's own geometry" (no model)


@dataclass(frozen=True)
class Level:
    """One cache as callgrind takes it: size in bytes, ways, line bytes."""

    size: int
    ways: int
    line: int

    @property
    def sets(self) -> int:
        return self.size // (self.ways * self.line)

    def arg(self) -> str:
        """callgrind's "size,assoc,line", the size rounded to a power-of-two set count."""
        sets = max(self.sets, 1)
        size = (1 << (sets.bit_length() - 1)) * self.ways * self.line
        return f"{size},{self.ways},{self.line}"


@dataclass(frozen=True)
class CacheModel:
    """A core's I1, D1 and the level modelled as callgrind's LL, with the sources."""

    name: str
    title: str
    i1: Level
    d1: Level
    ll: Level
    ll_is: str      # which of the core's levels the LL stands for, and why
    source: str     # where the figures come from, and how sure they are

    def geometry(self) -> dict[str, str]:
        """``{"I1"|"D1"|"LL": "size,assoc,line"}`` as ``sim.worker_prefix`` takes them."""
        return {"I1": self.i1.arg(), "D1": self.d1.arg(), "LL": self.ll.arg()}


MODELS: dict[str, CacheModel] = {m.name: m for m in (
    CacheModel(
        "cortex-a72", "Arm Cortex-A72",
        i1=Level(48 * KiB, 3, 64), d1=Level(32 * KiB, 2, 64), ll=Level(1 * MiB, 16, 64),
        ll_is="L2, shared by the cluster (512 KiB-4 MiB configurable, 16-way); 1 MiB as in "
              "the Raspberry Pi 4's BCM2711",
        # Sure: L1 48 KiB 3-way I, 32 KiB 2-way D; L2 16-way, fixed 64 B lines, 512 KiB to
        # 4 MiB (checked against the TRM's "About the L2 memory system" page,
        # developer.arm.com/docs/100095).  The L2 size is the implementer's choice.
        source="Arm Cortex-A72 MPCore Processor Technical Reference Manual (100095), "
               "Level 1 Memory System; Level 2 Memory System: About the L2 memory system"),
    CacheModel(
        "cortex-a76", "Arm Cortex-A76",
        i1=Level(64 * KiB, 4, 64), d1=Level(64 * KiB, 4, 64), ll=Level(512 * KiB, 8, 64),
        ll_is="private L2 (128/256/512 KiB, 8-way); 512 KiB, the largest configuration",
        source="Arm Cortex-A76 Core Technical Reference Manual (100798), A1.2 Features: "
               "L1 I/D 64 KiB 4-way, L2 8-way 64 B lines"),
    CacheModel(
        "neoverse-n1", "Arm Neoverse N1",
        i1=Level(64 * KiB, 4, 64), d1=Level(64 * KiB, 4, 64), ll=Level(1 * MiB, 8, 64),
        ll_is="private L2 (512 KiB or 1 MiB, 8-way); 1 MiB as in AWS Graviton2 and Ampere "
              "Altra",
        source="Arm Neoverse N1 Core Technical Reference Manual (100616), A1.3 Features; "
               "A6 L1 memory system, A7 L2 memory system"),
    CacheModel(
        "neoverse-v1", "Arm Neoverse V1",
        i1=Level(64 * KiB, 4, 64), d1=Level(64 * KiB, 4, 64), ll=Level(1 * MiB, 8, 64),
        ll_is="private L2 (512 KiB or 1 MiB, 8-way); 1 MiB as in AWS Graviton3",
        source="Arm Neoverse V1 Core Technical Reference Manual (101427), A1.3 Features "
               "(L1 I/D 64 KiB 4-way; L2 8-way, 64 B lines)"),
    CacheModel(
        "apple-m1", "Apple M1 P-core (Firestorm)",
        i1=Level(192 * KiB, 6, 128), d1=Level(128 * KiB, 8, 128), ll=Level(12 * MiB, 12, 128),
        ll_is="the P-cluster's shared 12 MiB L2 whole (Firestorm has no private L2); the "
              "SoC's system level cache is not modelled",
        # Sizes and the 128 B line are what macOS reports (sysctl hw.perflevel0.l1icachesize
        # 196608, l1dcachesize 131072, l2cachesize 12582912, hw.cachelinesize 128).  Apple
        # publishes no ways: 6/8/12 are from microbenchmark studies (AnandTech's M1 review,
        # Dougall Johnson's Firestorm notes), less sure than the sizes.
        source="Apple: sysctl hw.perflevel0.* on macOS (sizes, line); ways from published "
               "microbenchmarks, not a vendor manual"),
    CacheModel(
        "zen4", "AMD Zen 4",
        i1=Level(32 * KiB, 8, 64), d1=Level(32 * KiB, 8, 64), ll=Level(1 * MiB, 8, 64),
        ll_is="private L2 (1 MiB, 8-way); the 32 MiB per-CCD L3 victim cache is not modelled",
        source="AMD Software Optimization Guide for the AMD Zen 4 Microarchitecture (57647), "
               "2.12 Cache and Memory Hierarchy (L1 I/D 32 KiB 8-way, L2 1 MiB 8-way)"),
    CacheModel(
        "sapphire-rapids", "Intel Sapphire Rapids (Golden Cove core)",
        i1=Level(32 * KiB, 8, 64), d1=Level(48 * KiB, 12, 64), ll=Level(2 * MiB, 16, 64),
        ll_is="private L2 (2 MiB, 16-way); the 1.875 MiB/core shared LLC is not modelled",
        source="Intel 64 and IA-32 Architectures Optimization Reference Manual (248966), "
               "Golden Cove / Sapphire Rapids cache parameters table (L1D 48 KiB 12-way, "
               "L1I 32 KiB 8-way, L2 2 MiB 16-way)"),
)}

# Where rounding to a power-of-two set count changed a figure: none of the entries above
# (the test checks this stays true, so a new entry that rounds is listed here on purpose).
ROUNDED: dict[str, str] = {}


def get(name: str) -> CacheModel:
    """The named model; a ConvbenchError listing the known ones otherwise."""
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise ConvbenchError(f"unknown cache model {name!r}; known models: "
                             f"{', '.join(MODELS)}") from None


def label(name: str | None) -> str:
    """What the results record as ``cache_model``: the model's name, or ``host``."""
    return get(name).name if name else HOST


def caption(name: str | None) -> str:
    """The line reports print next to simulated counts made under a model."""
    if not name or name == HOST:
        return "simulated under this host's own cache geometry"
    model = MODELS.get(name)
    title = model.title if model else name
    return (f"a model of the data-cache traffic of this host's code under {title}'s caches "
            f"(not a measurement of that core)")


def facts(name: str | None) -> dict[str, Any]:
    """environment.json's ``cache_model``: the name, the geometry simulated, its sources."""
    if not name:
        return {"name": HOST, "caption": caption(None)}
    model = get(name)
    return {"name": model.name, "title": model.title, "geometry": model.geometry(),
            "ll_is": model.ll_is, "source": model.source, "caption": caption(model.name)}
