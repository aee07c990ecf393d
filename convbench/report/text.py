"""Markdown and CSV versions of the report's tables (figures are linked, not inlined).

Every cell passes through :mod:`convbench.textsafe`: Markdown-escaped in the Markdown
table, formula-defused in the CSV files.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from convbench.report.tables import as_text
from convbench.textsafe import csv_frame, markdown


def markdown_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(none)\n"
    text = as_text(frame)
    lines = ["| " + " | ".join(markdown(str(c)) for c in frame.columns) + " |",
             "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(markdown(v) for v in row) + " |"
              for row in text.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """``frame`` as CSV, text cells that a spreadsheet would run as formulas defused."""
    csv_frame(frame).to_csv(path, index=False)
    return path
