"""Which cached numba kernels a worker compiled, rather than loaded from numba's cache.

Why it matters: a process that compiles a ``parallel=True`` kernel runs other machine code
than every later process that loads the same kernel from the cache.  numba compiles the
parfor body (the gufunc) as a library of its own and also links a copy into the kernel's
library, which the module-level optimiser then runs over again; the copy is what the cache
stores, but the compiling process had already loaded the first library, and its (weak)
symbol is the one the kernel calls.  Measured under callgrind (direct/nhwc on
``mb1ic8ih10oc8oh10kh3ph1``, 1 thread, AMD EPYC znver1 host): 370,113 instructions per call
in the process that compiled, 299,840 in every process that loaded, all of the difference
in the gufunc (693,882 vs 553,510 Ir over two calls, a mapping of its own vs one beside the
kernel).  Reloading in the same process binds the same symbol again, so only a fresh
process runs the cached code: the worker measures nothing after a compile and asks to be
restarted (:class:`convbench.harness.protocol.Restart`).

The watch listens to numba's ``numba:compile`` event, which fires only on a cache miss, and
keeps the dispatchers that cache (a ``cache=False`` function compiles in every process, so
restarting would not help).
"""

from __future__ import annotations

from typing import Any


class CompileWatch:
    """Names of the cached numba functions compiled in this process since :meth:`start`."""

    def __init__(self) -> None:
        self.compiled: list[str] = []
        self._listener: Any = None

    def start(self) -> CompileWatch:
        from numba.core import event

        watch = self

        class _Listener(event.Listener):
            def on_start(self, ev: Any) -> None:
                pass

            def on_end(self, ev: Any) -> None:
                dispatcher = (ev.data or {}).get("dispatcher")
                if dispatcher is not None and _caches(dispatcher):
                    name = getattr(dispatcher.py_func, "__qualname__", repr(dispatcher))
                    if name not in watch.compiled:
                        watch.compiled.append(name)

        self._listener = _Listener()
        event.register("numba:compile", self._listener)
        return self

    def stop(self) -> None:
        if self._listener is not None:
            from numba.core import event

            event.unregister("numba:compile", self._listener)
            self._listener = None


def _caches(dispatcher: Any) -> bool:
    """Whether the dispatcher saves its compiled code in numba's on-disk cache."""
    from numba.core.caching import NullCache

    cache = getattr(dispatcher, "_cache", None)
    return cache is not None and not isinstance(cache, NullCache)
