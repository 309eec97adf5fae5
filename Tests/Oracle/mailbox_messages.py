#!/usr/bin/env python3
"""Prints the SHA-256 of each message of an mbox or Maildir, as Python's mailbox module reads them, one a line
(a Maildir's sorted, since its order is unspecified)."""
import hashlib
import mailbox
import sys

kind, path = sys.argv[1], sys.argv[2]
if kind == "mbox":
    box = mailbox.mbox(path, create=False)
    digests = [hashlib.sha256(box.get_bytes(key)).hexdigest() for key in box.keys()]
else:
    box = mailbox.Maildir(path, factory=None, create=False)
    digests = sorted(hashlib.sha256(box.get_bytes(key)).hexdigest() for key in box.keys())
print("\n".join(digests))
