"""Text from servers, config files and paths, made safe to show on a terminal.

A tool description, a server's stderr, an error message or a folder name may carry escape
sequences (set the window title, write the clipboard with OSC 52, clear the screen) or
characters that reorder what the reader sees. Whatever shows such text passes it through
``safe_text`` first. The rule:

* every C0 control character (U+0000–U+001F), DEL (U+007F) and every C1 control character
  (U+0080–U+009F) is shown as ``\\xNN``; the tab is kept, and so is the newline where the
  field is multi-line (a carriage return never is: it would let a line overwrite itself);
* the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E,
  U+2066–U+2069) and the line and paragraph separators (U+2028, U+2029) are shown as
  ``\\uNNNN``, so text cannot reorder or break the line it sits in;
* a lone surrogate (which JSON can carry but UTF-8 cannot encode) is shown as ``\\uDNNN``
  instead of making the write fail.

Machine output keeps the exact strings: ``json_for_terminal`` only writes those same
characters as JSON ``\\u`` escapes, which decode to the original text.

Standard library only: the CLI's renderers and log lines use it, and so does the shim, which
loads no CLI module.
"""

from __future__ import annotations

import json
import re
from typing import Any

_ALWAYS_ESCAPED = (
    "\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069\\ud800-\\udfff"
)
_UNSAFE_IN_ONE_LINE = re.compile(f"[\\n{_ALWAYS_ESCAPED}]")
_UNSAFE_IN_MANY_LINES = re.compile(f"[{_ALWAYS_ESCAPED}]")
# JSON already escapes U+0000–U+001F; these are the characters it would otherwise write raw.
_UNSAFE_IN_JSON = re.compile(
    "[\\x7f-\\x9f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069\\ud800-\\udfff]"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def safe_text(value: object, *, multiline: bool = False) -> str:
    """``value`` as text a terminal shows as it is: control characters made visible.

    ``multiline`` keeps newlines (a Windows ``\\r\\n`` becomes ``\\n``); otherwise a newline is
    shown as ``\\x0a`` too, so one field cannot pose as another line of the output.
    """
    text = value if isinstance(value, str) else str(value)
    if multiline:
        return _UNSAFE_IN_MANY_LINES.sub(_visible, text.replace("\r\n", "\n"))
    return _UNSAFE_IN_ONE_LINE.sub(_visible, text)


def json_for_terminal(payload: Any, *, indent: int | None = 2) -> str:
    """``payload`` as JSON (indented, or on one line with ``indent=None``) whose strings decode
    exactly, with nothing a terminal acts on."""
    text = json.dumps(payload, indent=indent, ensure_ascii=False, default=str)
    return _UNSAFE_IN_JSON.sub(_json_escape, text)
