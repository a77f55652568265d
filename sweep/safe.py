r"""Text from a sweep (names, descriptions, data paths, errors, notes) made safe for each
output it goes into. Any of it may come from a file someone else wrote.

* :func:`plain`: one line, every control character written as its escape (no raw newline,
  tab, carriage return or terminal escape survives);
* :func:`markdown_text`: :func:`plain`, then ``&``, ``<``, ``>`` as HTML entities (Markdown
  renders raw HTML), ``\`` and ``|`` backslash-escaped (a table cell stays one cell);
* :func:`html_text`: :func:`plain`, then HTML-escaped, quotes included (text and
  attribute values);
* :func:`csv_cell`: a text cell that a spreadsheet would read as a formula (starting with
  ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading ``'``; numbers
  stay numbers.
"""
from __future__ import annotations

import html

from zoforge.errors import printable

__all__ = ["plain", "markdown_text", "html_text", "csv_cell", "FORMULA_PREFIXES"]

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def plain(text) -> str:
    """``text`` as one printable line."""
    return printable(str(text))


def markdown_text(text) -> str:
    text = plain(text).replace("\\", "\\\\").replace("&", "&amp;")
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def html_text(text) -> str:
    return html.escape(plain(text), quote=True)


def csv_cell(value):
    """``value`` for a CSV cell (see the module docstring); None stays empty."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    return ("'" if text.startswith(FORMULA_PREFIXES) else "") + plain(text)
