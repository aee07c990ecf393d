"""Case identity: what makes two measurements "the same case", and how it is written down.

A case is one layer's problem x variant (algorithm, layout, parameters) x thread count x
vector width x cache mode.  Its identity has two parts:

- the *key*, :data:`KEY_COLUMNS`: the names a person reads (layer, variant, threads,
  width, cache mode).  Results join on it across runs (``compare``, the report's
  side-by-side tables); a warm and a cold measurement are never paired.
- the *problem*, the layer's benchdnn descriptor.  A suite may keep a layer's name and
  change its shape; two cases with the same key and different problems are different
  measurements, and ``compare`` refuses to pair them rather than report a false change.

This module is the only place that formats and parses the case id
(``layer|variant|t<threads>|v<width>``, then ``|<cache mode>`` unless warm), the pyperf
benchmark name (``layer/variant/t<threads>/v<width>[/<cache mode>]``) and the command that
reproduces one case alone.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

KEY_COLUMNS = ("layer", "variant", "threads", "vector_width", "cache")
WARM = "warm"  # the cache mode that ids leave unsaid (every id before cache modes existed)
PROBLEM_COLUMN = "descriptor"

# Environment variables that change what a reproducer runs (extra test kernels); a
# reproducer line sets them as the run had them.
REPRODUCER_ENV = ("CONVBENCH_EXTRA_KERNELS",)


@dataclass(frozen=True)
class CaseKey:
    """The identity of a case, with the problem it measured."""

    layer: str
    variant: str
    threads: int
    vector_width: str
    descriptor: str = ""
    cache: str = WARM

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        """What runs are joined on (:data:`KEY_COLUMNS`)."""
        return (self.layer, self.variant, self.threads, self.vector_width, self.cache)

    @property
    def _cache_suffix(self) -> list[str]:
        return [] if self.cache == WARM else [self.cache]

    @property
    def case_id(self) -> str:
        return "|".join([self.layer, self.variant, f"t{self.threads}",
                         f"v{self.vector_width}", *self._cache_suffix])

    @property
    def pyperf_name(self) -> str:
        """Readable benchmark name, e.g. ``res2a/im2col/nhwc/gemm=blas/t1/vauto``."""
        return "/".join([self.layer, self.variant, f"t{self.threads}",
                         f"v{self.vector_width}", *self._cache_suffix])

    def reproducer(self, environ: dict[str, str] | None = None) -> str:
        """A paste-able command that runs this case alone through ``convbench check``."""
        environ = os.environ if environ is None else environ
        env = [f"{name}={shlex.quote(environ[name])}" for name in REPRODUCER_ENV
               if environ.get(name)]
        # check verifies: the cache mode changes the timing, not the answer
        words = ["convbench", "check", shlex.quote(self.descriptor or self.layer),
                 "--variant", shlex.quote(self.variant), "--threads", str(self.threads),
                 "--vector-width", self.vector_width]
        return " ".join(env + words)

    @classmethod
    def from_row(cls, row: dict) -> CaseKey:
        """The identity of a results-table row (a mapping with :data:`KEY_COLUMNS`)."""
        cache = row.get("cache")
        return cls(str(row["layer"]), str(row["variant"]), int(row["threads"]),
                   str(row["vector_width"]), str(row.get(PROBLEM_COLUMN) or ""),
                   cache if isinstance(cache, str) and cache else WARM)


def parse_case_id(text: str) -> CaseKey | None:
    """The key of a case id ``layer|variant|t<n>|v<w>[|cache]``; None when not one."""
    parts = text.split("|")
    if len(parts) not in (4, 5):
        return None
    return _from_parts(*parts)


def parse_pyperf_name(text: str) -> CaseKey | None:
    """The key of a pyperf benchmark name ``layer/variant.../t<n>/v<w>``; None otherwise.

    The variant contains slashes itself, so the layer is the first part and threads and
    width the last two.
    """
    parts = text.split("/")
    cache = [parts.pop()] if len(parts) > 4 and not parts[-1].startswith("v") else []
    if len(parts) < 4:
        return None
    return _from_parts(parts[0], "/".join(parts[1:-2]), parts[-2], parts[-1], *cache)


def _from_parts(layer: str, variant: str, threads: str, width: str,
                cache: str = WARM) -> CaseKey | None:
    if not (threads[:1] == "t" and threads[1:].isdigit() and width[:1] == "v" and width[1:]
            and cache):
        return None
    return CaseKey(layer, variant, int(threads[1:]), width[1:], cache=cache)
