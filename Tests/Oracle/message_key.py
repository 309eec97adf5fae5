#!/usr/bin/env python3
"""Prints the import key of each message of a source, one a line: the SHA-256 of its bytes without what transport
and filters add (ARCHITECTURE.md, "Mail import"), computed here with plain byte and line handling.

    message_key.py message FILE...   each file one message (a `From ` envelope line at its start left out)
    message_key.py mbox FILE         each message as Python's mailbox.mbox splits it, `>From ` quoting undone
    message_key.py maildir FOLDER    each message of the Maildir, sorted (its order is unspecified)
"""
import hashlib
import mailbox
import re
import sys

TRACE_NAMES = {
    b"return-path", b"received", b"delivered-to", b"x-original-to", b"envelope-to", b"x-envelope-from",
    b"x-envelope-to", b"received-spf", b"authentication-results", b"arc-seal", b"arc-message-signature",
    b"arc-authentication-results", b"x-received", b"x-google-smtp-source", b"x-tuid", b"x-offlineimap",
}
TRACE_PREFIXES = (b"x-spam-", b"x-virus-", b"x-rspamd-", b"x-amavis-")


def key(data, mbox_entry=False):
    lines = data.split(b"\n")
    kept = []
    in_header, dropping = True, False
    for number, line in enumerate(lines):
        newline = number < len(lines) - 1
        if not newline and line == b"":
            break
        if newline and line.endswith(b"\r"):
            line = line[:-1]
        if mbox_entry and re.match(rb">+From ", line):
            line = line[1:]
        if in_header:
            if line == b"":
                in_header = False
            elif line[:1] in (b" ", b"\t"):
                if dropping:
                    continue
            else:
                name, colon, _ = line.partition(b":")
                name = name.lower()
                dropping = bool(colon) and (name in TRACE_NAMES or name.startswith(TRACE_PREFIXES))
                if dropping:
                    continue
        kept.append(line + (b"\n" if newline else b""))
    return hashlib.sha256(b"".join(kept)).hexdigest()


def without_envelope(data):
    if data.startswith(b"From "):
        newline = data.find(b"\n")
        return b"" if newline < 0 else data[newline + 1:]
    return data


kind, paths = sys.argv[1], sys.argv[2:]
if kind == "message":
    for path in paths:
        with open(path, "rb") as file:
            print(key(without_envelope(file.read())))
elif kind == "mbox":
    box = mailbox.mbox(paths[0], create=False)
    for entry in box.keys():
        print(key(box.get_bytes(entry), mbox_entry=True))
else:
    box = mailbox.Maildir(paths[0], factory=None, create=False)
    print("\n".join(sorted(key(box.get_bytes(entry)) for entry in box.keys())))
