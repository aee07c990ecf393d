"""The farm's host directories being written: one :class:`ResultsStore` per host.

A host's directory is created when its first group comes back, with the environment that
host collected (so ``environment.json`` describes the machine that measured the rows), and
reopened on ``--resume``.  Every-host directories plan the whole suite; a shard host's
plan is the groups it was given, so each directory is complete on its own when nothing
was lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convbench.farm import layout
from convbench.harness import sysinfo
from convbench.results.store import STATUS_COMPLETE, STATUS_INTERRUPTED, ResultsStore, now_utc

# what a group's worker settings add to the environment as the run goes on
_ACCUMULATED = ("workers", "restarted_after_compile", "workers_killed_after_closing")


class HostStores:
    """The results stores of a farm run's hosts, opened as they are needed."""

    def __init__(self, path: Path, suite_name: str, suite_text: str, planned: list[str],
                 options: dict[str, Any], whole_plan: bool):
        self.path = path
        self.suite_name = suite_name
        self.suite_text = suite_text
        self.planned = planned
        self.options = options
        self.whole_plan = whole_plan   # every-host: each host plans every case
        self.stores: dict[str, ResultsStore] = {}
        for name, directory in layout.host_dirs(path).items():
            self.stores[name] = ResultsStore.reopen(directory)

    def done(self, host: str | None = None) -> set[str]:
        """Case ids with a row on ``host`` (None: on any host)."""
        stores = self.stores.values() if host is None else \
            [s for n, s in self.stores.items() if n == layout.host_dir_name(host)]
        return {cid for s in stores for cid in s.done}

    def add(self, host: str, result: dict[str, Any]) -> None:
        """A finished task's rows, values and worker settings into its host's directory."""
        name = layout.host_dir_name(host)
        store = self.stores.get(name)
        if store is None:
            environment = {**result["environment"], "farm_host": host}
            store = ResultsStore.create(self.path / layout.HOSTS / name, self.suite_name,
                                        self.suite_text,
                                        self.planned if self.whole_plan else [],
                                        environment, self.options)
            self.stores[name] = store
        else:
            _accumulate(store.environment, result["environment"])
        by_case: dict[str, list[dict[str, Any]]] = {}
        for value in result["values"]:
            by_case.setdefault(value["case_id"], []).append(value)
        for row in result["rows"]:
            if row["case_id"] not in store.done:
                store.add(row, by_case.get(row["case_id"], []))
        if not self.whole_plan:
            store.manifest["planned"] = sorted(store.done)
        store.save_environment()

    def finish(self, interrupted: bool) -> None:
        """Consolidate every host's files; a host that lacks planned cases stays
        interrupted (``--resume`` finishes it)."""
        for store in self.stores.values():
            try:
                store.environment = sysinfo.finish(store.environment)
                missing = set(store.manifest["planned"]) - store.done
                if interrupted or missing:
                    store.set_status(STATUS_INTERRUPTED)
                else:
                    store.manifest["finished"] = now_utc()
                    store.set_status(STATUS_COMPLETE)
            finally:
                store.close()


def _accumulate(held: dict[str, Any], more: dict[str, Any]) -> None:
    """Add a task's worker settings and restarts to a host's environment."""
    for key in _ACCUMULATED:
        value = more.get(key)
        if isinstance(value, list):
            held.setdefault(key, []).extend(value)
        elif isinstance(value, dict):
            into = held.setdefault(key, {})
            for sub, item in value.items():
                if isinstance(item, list):
                    into.setdefault(sub, []).extend(item)
                else:
                    into.setdefault(sub, {}).update(item)
