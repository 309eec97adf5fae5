#!/usr/bin/env python3
"""Writes a message of winmail.dat parts holding random files, for the TNEF memory tests:
tnef_message.py OUT WINMAIL [WINMAIL...]

Each WINMAIL is one application/ms-tnef part (base64, named winmail.dat): NAME:SIZE[,NAME:SIZE...], the files it
holds (SIZE in bytes, random bytes seeded by NAME). Prints one JSON object: "winmail" the size and SHA-256 of each
winmail.dat in order, "files" the name, size and SHA-256 of every file in order.
"""

import base64
import hashlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tnef import tnef  # noqa: E402


def main():
    winmail, files = [], []
    with open(sys.argv[1], "wb") as out:
        out.write(b'From: a@example.com\nSubject: winmail\nMIME-Version: 1.0\n')
        out.write(b'Content-Type: multipart/mixed; boundary="B"\n\n')
        for argument in sys.argv[2:]:
            attachments = []
            for item in argument.split(","):
                name, size = item.rsplit(":", 1)
                data = random.Random(name).randbytes(int(size))
                attachments.append((name, data))
                files.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            stream = tnef(attachments)
            del attachments
            winmail.append({"size": len(stream), "sha256": hashlib.sha256(stream).hexdigest()})
            out.write(b'--B\nContent-Type: application/ms-tnef; name="winmail.dat"\n')
            out.write(b"Content-Transfer-Encoding: base64\n\n")
            out.write(base64.encodebytes(stream))
        out.write(b"--B--\n")
    print(json.dumps({"winmail": winmail, "files": files}))


if __name__ == "__main__":
    main()
