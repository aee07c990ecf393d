"""Plain-text tables for the terminal (no dependency; pandas is too slow to import for this).

Cells are shown with their control characters escaped (textsafe.terminal): a layer named
``\x1b[2J`` must not clear the screen of whoever reads the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from convbench.textsafe import terminal


def format_table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Align ``rows`` (first row is the header) into columns; ``right`` aligns those right."""
    if not rows:
        return ""
    rows = [[terminal(str(c)) for c in row] for row in rows]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
