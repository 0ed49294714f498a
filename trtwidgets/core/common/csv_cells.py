"""CSV cells a spreadsheet reads as text, never as a formula.

Layer, node and tensor names come from the user's model and files. A cell that starts with ``=``,
``+``, ``-`` or ``@`` (or a tab or carriage return, which some spreadsheets skip before looking) is
run as a formula when the CSV is opened: ``=HYPERLINK("http://...")`` or ``+cmd|' /C calc'!A0``.
:func:`csv_cell` prefixes such a cell with ``'`` (OWASP's advice), which spreadsheets show as text;
numbers (``-3``, ``+1.5e-3``) are left as they are.
"""

from __future__ import annotations

import re

__all__ = ["csv_cell", "FORMULA_STARTS"]

#: First characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def csv_cell(value):
    """``value`` made safe for a CSV cell: a string that starts like a formula gets a leading ``'``.

    Anything that is not a string is returned as it is (numbers are written by the CSV writer).
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value
