"""Strings from suites and results files made safe for where they end up.

A layer name is whatever a suite's author typed, and results directories travel (CI
baselines, artefacts from other hosts), so every such string is treated as hostile where
it meets an interpreter: a terminal (escape sequences), a spreadsheet (formulas), Markdown
(links, images, HTML, table pipes), matplotlib (``$...$`` is mathtext), XML (characters
XML 1.0 forbids) and the file system (a name becomes part of a path).  One function per
destination; each leaves ordinary text unchanged.
"""

from __future__ import annotations

import html
import re
from typing import Any

# C0 and C1 controls and DEL, and the bidirectional overrides and isolates that reorder
# what a reader sees ("trojan source"); a terminal acts on the first, a viewer on the rest.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: str) -> str:
    """``text`` with every control character shown as its escape (``\\x1b``), so nothing
    printed can move the cursor, clear the screen or retitle the window; newlines and
    tabs too, since one cell must stay one cell."""
    return _CONTROL.sub(_escape, text)


def one_line(text: str, width: int = 400) -> str:
    """``text`` for a one-line message: whitespace runs made one space, controls escaped,
    at most ``width`` characters."""
    text = terminal(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


# OWASP "CSV injection": a cell starting with one of these is a formula to Excel,
# LibreOffice and Google Sheets; a leading apostrophe makes it text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as written: text starting with a formula
    character gets a leading ``'``; anything that is not text is returned as is."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_frame(frame: Any) -> Any:
    """A copy of a pandas DataFrame with :func:`csv_cell` applied to every text cell and
    column name, for ``DataFrame.to_csv``; numeric columns are left as they are (a negative
    number is no formula)."""
    import pandas as pd

    out = frame.rename(columns=lambda c: csv_cell(c) if isinstance(c, str) else c)
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_string_dtype(column.dtype) or column.dtype == object:
            out[name] = column.map(csv_cell, na_action="ignore")
    return out


# Markdown that could make a link, an image, code, emphasis or a new table cell; HTML is
# escaped as entities (Markdown passes tags through).
_MARKDOWN = re.compile(r"([\\`*\[\]|])")


def markdown(text: str) -> str:
    """``text`` as literal Markdown inline text (a table cell, a heading): no link, image,
    HTML, code span or cell break can form, newlines become spaces, controls escaped."""
    text = terminal(text.replace("\r\n", " ").replace("\n", " "))
    return html.escape(_MARKDOWN.sub(r"\\\1", text), quote=False)


def mathtext(text: str) -> str:
    """``text`` for a matplotlib label: ``$`` escaped (two of them would start mathtext,
    which fails on most strings) and controls shown as escapes (no glyph for them)."""
    return terminal(text).replace("$", r"\$")


# Characters XML 1.0 does not allow at all, even as references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """``text`` for an XML attribute or element (JUnit): forbidden characters escaped, so
    the file stays well-formed (ElementTree writes them raw)."""
    return _NOT_XML.sub(_escape, text)


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def file_part(text: str) -> str:
    """``text`` as part of a file name: only letters, digits, ``.``, ``_`` and ``-``, so a
    name can neither leave its directory nor make one."""
    name = _UNSAFE_NAME.sub("_", text).strip(".")
    return name or "_"
