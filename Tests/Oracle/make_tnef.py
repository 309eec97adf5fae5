#!/usr/bin/env python3
"""Writes a small TNEF stream (winmail.dat) for the MailParse tests: make_tnef.py OUT NAME=PATH [NAME=PATH...]

Each argument NAME=PATH adds an attachment called NAME holding the bytes of the file PATH (`tnef` does the same for
a script that imports this one). The format (MS-OXTNEF):
the signature 0x223E9F78, a 2-byte key, then attributes: level (1 byte), id (4), length (4), data, checksum (2,
the sum of the data bytes mod 65536). Each attachment is attAttachRenddata, attAttachTitle, attAttachData.
"""

import struct
import sys

LVL_MESSAGE, LVL_ATTACHMENT = 1, 2
ATT_TNEF_VERSION = 0x00089006
ATT_OEM_CODEPAGE = 0x00069007
ATT_MESSAGE_CLASS = 0x00078008
ATT_ATTACH_RENDDATA = 0x00069002
ATT_ATTACH_TITLE = 0x00018010
ATT_ATTACH_DATA = 0x0006800F


def attribute(level, ident, data):
    return struct.pack("<BII", level, ident, len(data)) + data + struct.pack("<H", sum(data) & 0xFFFF)


def tnef(attachments):
    """The TNEF stream of attachments, a list of (name, bytes)."""
    parts = [struct.pack("<IH", 0x223E9F78, 0x0001)]
    parts.append(attribute(LVL_MESSAGE, ATT_TNEF_VERSION, struct.pack("<I", 0x00010000)))
    parts.append(attribute(LVL_MESSAGE, ATT_OEM_CODEPAGE, struct.pack("<II", 1252, 0)))
    parts.append(attribute(LVL_MESSAGE, ATT_MESSAGE_CLASS, b"IPM.Microsoft Mail.Note\0"))
    for name, data in attachments:
        parts.append(attribute(LVL_ATTACHMENT, ATT_ATTACH_RENDDATA, struct.pack("<HIHHI", 1, 0xFFFFFFFF, 0, 0, 0)))
        parts.append(attribute(LVL_ATTACHMENT, ATT_ATTACH_TITLE, name.encode() + b"\0"))
        parts.append(attribute(LVL_ATTACHMENT, ATT_ATTACH_DATA, data))
    return b"".join(parts)


def main():
    attachments = []
    for argument in sys.argv[2:]:
        name, path = argument.split("=", 1)
        with open(path, "rb") as f:
            attachments.append((name, f.read()))
    with open(sys.argv[1], "wb") as f:
        f.write(tnef(attachments))


if __name__ == "__main__":
    main()
