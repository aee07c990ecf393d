"""One self-contained HTML page: environments, tables, figures (PNGs inlined as data URIs).

Every string that comes from a suite or a results file passes through :func:`html.escape`
(via :func:`_e`), so a layer named ``<script>`` shows as text (and an escape sequence as
``\\x1b``).  The sortable tables use a few lines of inline JavaScript and nothing from the
network: the page works offline.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable

import pandas as pd

from convbench.report.figures import Figure
from convbench.report.tables import as_text
from convbench.textsafe import terminal

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1500px;padding:0 1em;
color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:2em}h3{margin-bottom:.3em}
nav a{margin-right:1em}p.about{color:#555;margin:.2em 0 .6em}
.scroll{overflow-x:auto;max-height:36em;overflow-y:auto;border:1px solid #ddd}
table{border-collapse:collapse;font-size:12px}
th,td{padding:2px 6px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}
th{white-space:normal;overflow-wrap:anywhere;min-width:4em;vertical-align:bottom}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td:not(.num){white-space:normal;max-width:24em}
th{background:#f3f3f3;position:sticky;top:0;cursor:pointer;user-select:none}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555}.runs{display:flex;gap:1em 1.5em;flex-wrap:wrap}
.note{background:#fff6d5;padding:.4em .8em;border-left:3px solid #e0b000}
/* each run's block as wide as its table; the next run moves below when the row is full,
   so a table never has to scroll sideways (1400 px, three runs of 17 columns) */
.runs>div{flex:0 1 auto;min-width:0;max-width:100%}
table.wrap td,table.wrap th{white-space:normal;vertical-align:top}
table.headline{font-size:14px}table.headline td:first-child{font-weight:600}
table.headline td{padding:4px 12px;max-width:40em}
details>summary{cursor:pointer;color:#335}
table#env td:first-child{overflow-wrap:anywhere}tr.differs td{background:#fff6d5}
details.value>summary{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:60em}
details.value div{white-space:normal;word-break:break-word;max-width:80em}
"""

# Click a header: sort its table by that column, numbers numerically, again to reverse.
_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var dir = th.dataset.dir === "asc" ? "desc" : "asc";
    table.querySelectorAll("th").forEach(function (h) { delete h.dataset.dir; });
    th.dataset.dir = dir;
    var key = function (row) {
      var cell = row.cells[col], text = cell.textContent, num;
      if (cell.dataset.sort !== undefined) {
        num = parseFloat(cell.dataset.sort);
        return isNaN(num) ? Infinity : num;   // empty cells last going up
      }
      num = parseFloat(text);
      return isNaN(num) || String(num).length < text.length - 4 ? text : num;
    };
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), c;
      if (typeof x === typeof y) { c = x < y ? -1 : x > y ? 1 : 0; }
      else { c = typeof x === "number" ? -1 : 1; }
      return dir === "asc" ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _e(value: object) -> str:
    # control characters shown as escapes too: a browser ignores them, but whoever reads
    # the file in a terminal would get the escape sequence of a hostile layer name
    return html.escape(terminal(str(value)), quote=True)


def table_html(frame: pd.DataFrame, table_id: str, css: str = "sortable") -> str:
    """A DataFrame as a table (sortable unless ``css`` says otherwise; "wrap" lets long
    cells wrap); every header and cell escaped."""
    if frame.empty:
        return '<p class="about">(none)</p>'
    text = as_text(frame)
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(
        frame[c]) for c in frame.columns]
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    rows = []
    for shown, raw in zip(text.itertuples(index=False), frame.itertuples(index=False),
                          strict=True):
        # a number cell carries its raw value to sort by: "1.2 ms" sorts after "900 µs"
        cells = "".join(f'<td class="num" data-sort="{_sort_key(r)}">{_e(v)}</td>' if num
                        else f"<td>{_breakable(v)}</td>"
                        for v, r, num in zip(shown, raw, numeric, strict=True))
        rows.append(f"<tr>{cells}</tr>")
    return (f'<div class="scroll"><table class="{_e(css)}" id="{_e(table_id)}"><thead><tr>'
            f'{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


_VARIANT_LIKE = re.compile(r"[\w.=,+-]+(/[\w.=,+-]+)+")


def _breakable(text: str) -> str:
    """Escaped text that may wrap after a "/": a variant id (nchwc/nchwxc/ic_bn=16/...)
    breaks between its parts, never inside a parameter.  Only plain ids get the breaks:
    any other text is shown exactly as escaped."""
    if not _VARIANT_LIKE.fullmatch(text):
        return _e(text)
    return _e(text).replace("/", "/<wbr>")


def _sort_key(value: object) -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if number != number else repr(number)


# a value longer than this (the CPU flags: ~100 words on one line) is folded
FOLD_CHARS = 100


def _env_cell(value: str) -> str:
    if len(value) <= FOLD_CHARS:
        return f"<td>{_e(value)}</td>"
    words = value.count(",") + 1 if value.startswith("[") else len(value.split())
    return (f'<td><details class="value"><summary>{_e(value[:60])}… ({words} items, '
            f"click to show)</summary><div>{_e(value)}</div></details></td>")


def environment_html(items: dict[str, dict[str, str]], table_id: str = "env") -> str:
    """The runs' environments as one table, key by run (``items``: run -> key -> text), the
    keys whose values differ between runs highlighted, long values folded."""
    names = list(items)
    keys = list(dict.fromkeys(k for run in items.values() for k in run))
    head = "<th>key</th>" + "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = []
    for key in keys:
        values = [items[n].get(key, "") for n in names]
        css = ' class="differs"' if len(set(values)) > 1 else ""
        rows.append(f"<tr{css}><td>{_e(key)}</td>" + "".join(map(_env_cell, values))
                    + "</tr>")
    return (f'<table class="wrap" id="{_e(table_id)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def folded(summary: str, inner: str) -> str:
    """``inner`` (already escaped HTML) behind a click on ``summary``."""
    return f"<details><summary>{_e(summary)}</summary>{inner}</details>"


def side_by_side(parts: list[str]) -> str:
    """Blocks (one per run) next to each other where the page is wide enough."""
    return '<div class="runs">' + "".join(f"<div>{p}</div>" for p in parts) + "</div>"


def figure_html(figure: Figure) -> str:
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f'<figure id="fig-{_e(figure.path.stem)}"><h3>{_e(figure.title)}</h3>'
            f'<img src="data:image/png;base64,{data}" alt="{_e(figure.title)}">'
            f"<figcaption>{_e(figure.caption)} (file: {_e(figure.path.name)})</figcaption>"
            "</figure>")


def page(title: str, sections: Iterable[tuple[str, str, str]]) -> str:
    """The whole document from (anchor, heading, inner HTML) sections; the inner HTML
    must already be escaped."""
    sections = list(sections)
    nav = "".join(f'<a href="#{_e(a)}">{_e(h)}</a>' for a, h, _ in sections)
    body = "".join(f'<section id="{_e(a)}"><h2>{_e(h)}</h2>{inner}</section>'
                   for a, h, inner in sections)
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><style>{_STYLE}</style></head>'
            f"<body><h1>{_e(title)}</h1><nav>{nav}</nav>{body}"
            f"<script>{_SCRIPT}</script></body></html>\n")


def paragraph(text: str, css: str = "about") -> str:
    return f'<p class="{css}">{_e(text)}</p>'


def heading(text: str) -> str:
    return f"<h3>{_e(text)}</h3>"
