"""tests/parallel.py's file order for ``pytest -n 2``: longest first, serial files last,
a file's tests together and in their order."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests import parallel


def _item(nodeid: str, serial: bool = False) -> SimpleNamespace:
    marker = object() if serial else None
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: marker)


def test_longest_first_serial_last_files_kept_whole(tmp_path, monkeypatch):
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"a.py": 1.0, "b.py": 50.0, "s.py": 90.0, "t.py": 5.0}))
    monkeypatch.setattr(parallel, "DURATIONS", durations)
    items = [_item("a.py::x"), _item("s.py::one"), _item("b.py::x"), _item("new.py::x"),
             _item("s.py::two", serial=True), _item("b.py::y"), _item("t.py::z", serial=True)]
    parallel.order_files(items)
    assert [i.nodeid for i in items] == ["b.py::x", "b.py::y", "a.py::x", "new.py::x",
                                         "s.py::one", "s.py::two", "t.py::z"]


def test_without_durations_the_collection_order_stays(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "DURATIONS", tmp_path / "missing.json")
    items = [_item("b.py::x"), _item("a.py::x", serial=True), _item("c.py::x")]
    parallel.order_files(items)
    assert [i.nodeid for i in items] == ["b.py::x", "c.py::x", "a.py::x"]
