"""Markdown and CSV versions of the report's tables (figures are linked, not inlined)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from convbench.report.tables import as_text


def _md_cell(text: str) -> str:
    # a pipe or newline would break the row; escape HTML too, since Markdown passes it on
    import html

    return html.escape(text.replace("|", "\\|").replace("\n", " "), quote=False)


def markdown_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(none)\n"
    text = as_text(frame)
    lines = ["| " + " | ".join(_md_cell(str(c)) for c in frame.columns) + " |",
             "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |"
              for row in text.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path
