#!/usr/bin/env python3
"""The oracle for MailParse tests: a message's attachments by the rules of ARCHITECTURE.md, "Mail import", read with Python's email package.

Usage: mail_attachments.py MESSAGE [MESSAGE...]
Prints one JSON object per message, a line each: {"file", "attachments": [{"name", "name_hex",
"content_type", "size", "sha256"}]}.
A file that starts with an mbox "From " line is read from the line after it (the caller's job in §12).
"""

import email
import email.policy
import hashlib
import json
import mimetypes
import sys

SIGNATURES = {"application/pgp-signature", "application/pkcs7-signature", "application/x-pkcs7-signature"}
NOT_WALKED = {"message/partial", "message/external-body"}
MAX_NAME = 255
# Python's own table, not /etc/mime.types: the Swift side carries the same defaults.
EXTENSIONS = mimetypes.MimeTypes()


def is_control(ch):
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F


def truncated(data, limit):
    """Cut to at most limit bytes without splitting a UTF-8 sequence."""
    if len(data) <= limit:
        return data
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:
        end -= 1
    if end == 0 and data[0] & 0xC0 == 0x80:
        end = limit
    return data[:end]


def reduced(name):
    """§12's one safe name (bytes), or None when nothing is left of it."""
    # get_filename() has stripped the ends; the last component, '/' and '\\' both separating.
    last = name.replace("\\", "/").split("/")[-1]
    last = "".join("_" if is_control(ch) else ch for ch in last)
    data = last.encode("utf-8", "surrogateescape").lstrip(b".")
    if not data:
        return None
    if len(data) > MAX_NAME:
        dot = data.rfind(b".")
        ext = data[dot:] if dot > 0 and len(data) - dot < 32 else b""
        data = truncated(data[: len(data) - len(ext)], MAX_NAME - len(ext)) + ext
    return data


def extension(content_type):
    ext = EXTENSIONS.guess_extension(content_type)
    return ext[1:] if ext else "bin"


def attachments(message):
    found = []
    nameless = 0

    def walk(part):
        nonlocal nameless
        content_type = part.get_content_type()
        if content_type in SIGNATURES or content_type in NOT_WALKED:
            return
        if part.is_multipart():  # multipart/* and message/* (a forwarded message's one payload)
            for sub in part.get_payload():
                walk(sub)
            return
        filename = part.get_filename()
        if filename is None and part.get_content_disposition() != "attachment":
            return
        name = reduced(filename) if filename is not None else None
        if name is None:
            nameless += 1
            name = f"attachment-{nameless}.{extension(content_type)}".encode()
        payload = part.get_payload(decode=True) or b""
        found.append(
            {
                "name": name.decode("utf-8", "replace"),
                "name_hex": name.hex(),
                "content_type": content_type,
                "size": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest(),
            }
        )

    walk(message)
    return found


def main():
    for path in sys.argv[1:]:
        with open(path, "rb") as f:
            data = f.read()
        if data.startswith(b"From "):
            data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
        message = email.message_from_bytes(data, policy=email.policy.default)
        print(json.dumps({"file": path, "attachments": attachments(message)}))


if __name__ == "__main__":
    main()
