"""Text from outside the program (a label, a path, a file's contents) as a
message or the CLI prints it: control characters escaped, as the core's
messages escape them (src/base/printable.h), so that printing it moves no
cursor and forges no line."""

from __future__ import annotations

import re

# C0, DEL and C1 controls (ESC among them), the Unicode line separators, and
# the lone surrogates that stand for undecodable bytes of a file name.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object) -> str:
    """``str(value)`` with every control character escaped."""
    return _CONTROL.sub(lambda match: _escaped(match.group()), str(value))
