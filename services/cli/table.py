"""Lists as a terminal shows them: a header, then one row a line, columns aligned."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The rows under their headers, each column as wide as its widest cell; the last
    column is not padded, so no line ends in spaces."""
    cells = [list(headers), *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]))
    return "\n".join(lines)
