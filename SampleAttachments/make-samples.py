#!/usr/bin/env python3
"""Regenerate the sample mail attachments in this folder.

Every file is synthesised from scratch with the Python 3 standard library
only (no Pillow, no network, no copied files).  The output is deterministic:
there is no randomness and every timestamp is fixed, so running

    python3 SampleAttachments/make-samples.py

twice produces byte-identical files.
"""

import io
import math
import os
import struct
import unicodedata
import zipfile
import zlib

OUT = os.path.dirname(os.path.abspath(__file__))


def write(relpath, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = os.path.join(OUT, relpath)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def crlf(text):
    """Normalise a text block to CRLF line endings."""
    return "\r\n".join(text.split("\n"))


# ---------------------------------------------------------------------------
# PDF
# ---------------------------------------------------------------------------

def pdf_escape(s):
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(title, content_ops):
    """Build a one-page A4 PDF 1.4 with a correct xref table.

    content_ops is the raw page content stream (str, ASCII).
    """
    stream = content_ops.encode("ascii")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842]"
        b" /Resources << /Font << /F1 5 0 R /F2 6 0 R >> >>"
        b" /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica"
        b" /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold"
        b" /Encoding /WinAnsiEncoding >>",
        ("<< /Title (%s) /Author (Acme Widgets Ltd.) /Producer (make-samples.py)"
         " /CreationDate (D:20261101090000Z) /ModDate (D:20261101090000Z) >>"
         % pdf_escape(title)).encode("ascii"),
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for num, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % num + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += (b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\n"
            % (len(objects) + 1, len(objects)))
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def text_op(font, size, x, y, s):
    return "BT /%s %d Tf %d %d Td (%s) Tj ET\n" % (font, size, x, y, pdf_escape(s))


def invoice_pdf():
    ops = []
    ops.append("0.13 0.29 0.53 rg 0 782 595 60 re f\n")      # header band
    ops.append("1 1 1 rg\n")
    ops.append(text_op("F2", 24, 56, 804, "INVOICE"))
    ops.append(text_op("F1", 11, 400, 812, "Acme Widgets Ltd."))
    ops.append(text_op("F1", 9, 400, 798, "12 Harbour Road, Bristol BS1 4QA"))
    ops.append("0 0 0 rg\n")
    ops.append(text_op("F2", 11, 56, 740, "Invoice no.: 2026-11-0042"))
    ops.append(text_op("F1", 11, 56, 724, "Invoice date: 1 November 2026"))
    ops.append(text_op("F1", 11, 56, 708, "Due date: 1 December 2026"))
    ops.append(text_op("F2", 11, 340, 740, "Bill to:"))
    ops.append(text_op("F1", 11, 340, 724, "Jane Doe, Example Corp."))
    ops.append(text_op("F1", 11, 340, 708, "5 Market Street, Leeds LS1 6DT"))
    # table
    ops.append("0.9 0.9 0.9 rg 56 650 483 20 re f 0 0 0 rg\n")
    ops.append(text_op("F2", 10, 62, 656, "Description"))
    ops.append(text_op("F2", 10, 330, 656, "Qty"))
    ops.append(text_op("F2", 10, 390, 656, "Unit price"))
    ops.append(text_op("F2", 10, 480, 656, "Amount"))
    items = [
        ("Widget, standard (blue)", 12, "4.50", "54.00"),
        ("Widget, deluxe (red)", 3, "19.90", "59.70"),
        ("Mounting bracket kit", 4, "7.25", "29.00"),
        ("Express delivery", 1, "12.00", "12.00"),
    ]
    y = 634
    for desc, qty, unit, amount in items:
        ops.append(text_op("F1", 10, 62, y, desc))
        ops.append(text_op("F1", 10, 330, y, str(qty)))
        ops.append(text_op("F1", 10, 390, y, "GBP " + unit))
        ops.append(text_op("F1", 10, 480, y, "GBP " + amount))
        y -= 18
    ops.append("0.5 w 56 %d m 539 %d l S\n" % (y + 8, y + 8))
    y -= 10
    ops.append(text_op("F1", 10, 390, y, "Subtotal"))
    ops.append(text_op("F1", 10, 480, y, "GBP 154.70"))
    ops.append(text_op("F1", 10, 390, y - 16, "VAT 20%"))
    ops.append(text_op("F1", 10, 480, y - 16, "GBP 30.94"))
    ops.append(text_op("F2", 11, 390, y - 36, "Total due"))
    ops.append(text_op("F2", 11, 480, y - 36, "GBP 185.64"))
    ops.append(text_op("F1", 9, 56, 120,
                       "Payment by bank transfer to sort code 12-34-56, account 87654321."))
    ops.append(text_op("F1", 9, 56, 106,
                       "Please quote the invoice number as the payment reference. Thank you!"))
    return make_pdf("Invoice 2026-11-0042", "".join(ops))


def page_pdf(title, lines):
    ops = [text_op("F2", 16, 72, 760, title)]
    y = 730
    for line in lines:
        ops.append(text_op("F1", 11, 72, y, line))
        y -= 16
    return make_pdf(title, "".join(ops))


# ---------------------------------------------------------------------------
# PNG
# ---------------------------------------------------------------------------

def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def team_photo_png(w=64, h=48):
    raw = bytearray()
    # a few "heads" standing in front of a sky-to-grass gradient
    heads = [(14, 22, 6), (28, 20, 7), (42, 23, 6), (54, 21, 5)]
    for y in range(h):
        raw.append(0)  # filter type: None
        for x in range(w):
            if y < 30:
                r, g, b = 90 + y * 3, 150 + y * 2, 235 - x // 2
            else:
                r, g, b = 40 + x // 2, 120 + (y - 30) * 3, 50
            for cx, cy, rad in heads:
                d2 = (x - cx) ** 2 + (y - cy) ** 2
                if d2 <= rad * rad:
                    r, g, b = 224 - d2 * 2, 180 - d2 * 2, 150 - d2 * 2
                elif y > cy + rad and abs(x - cx) <= rad + 2:
                    r, g, b = 60 + cx * 2, 60, 140 - cx  # shirts
            raw += bytes((r & 0xFF, g & 0xFF, b & 0xFF))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n"
            + png_chunk(b"IHDR", ihdr)
            + png_chunk(b"tEXt", b"Title\x00Team photo, offsite 2026")
            + png_chunk(b"IDAT", zlib.compress(bytes(raw), 9))
            + png_chunk(b"IEND", b""))


# ---------------------------------------------------------------------------
# Baseline JPEG encoder (JFIF, YCbCr 4:4:4, Annex K tables)
# ---------------------------------------------------------------------------

# Annex K.1 / K.2 quantisation tables, natural (row-major) order.
Q_LUMA = [
    16, 11, 10, 16, 24, 40, 51, 61,
    12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77,
    24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103, 99,
]
Q_CHROMA = [
    17, 18, 24, 47, 99, 99, 99, 99,
    18, 21, 26, 66, 99, 99, 99, 99,
    24, 26, 56, 99, 99, 99, 99, 99,
    47, 66, 99, 99, 99, 99, 99, 99,
] + [99] * 32

# Annex K.3 Huffman tables: (BITS[1..16], HUFFVAL)
DC_LUMA = ([0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], list(range(12)))
DC_CHROMA = ([0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], list(range(12)))
AC_LUMA = ([0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D], [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12,
    0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xA1, 0x08,
    0x23, 0x42, 0xB1, 0xC1, 0x15, 0x52, 0xD1, 0xF0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0A, 0x16,
    0x17, 0x18, 0x19, 0x1A, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2A, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
    0x3A, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4A, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
    0x5A, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6A, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79,
    0x7A, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8A, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
    0x99, 0x9A, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7,
    0xA8, 0xA9, 0xAA, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6,
    0xB7, 0xB8, 0xB9, 0xBA, 0xC2, 0xC3, 0xC4, 0xC5,
    0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xD2, 0xD3, 0xD4,
    0xD5, 0xD6, 0xD7, 0xD8, 0xD9, 0xDA, 0xE1, 0xE2,
    0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9, 0xEA,
    0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8,
    0xF9, 0xFA,
])
AC_CHROMA = ([0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77], [
    0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21,
    0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
    0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91,
    0xA1, 0xB1, 0xC1, 0x09, 0x23, 0x33, 0x52, 0xF0,
    0x15, 0x62, 0x72, 0xD1, 0x0A, 0x16, 0x24, 0x34,
    0xE1, 0x25, 0xF1, 0x17, 0x18, 0x19, 0x1A, 0x26,
    0x27, 0x28, 0x29, 0x2A, 0x35, 0x36, 0x37, 0x38,
    0x39, 0x3A, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
    0x49, 0x4A, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
    0x59, 0x5A, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6A, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,
    0x79, 0x7A, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8A, 0x92, 0x93, 0x94, 0x95, 0x96,
    0x97, 0x98, 0x99, 0x9A, 0xA2, 0xA3, 0xA4, 0xA5,
    0xA6, 0xA7, 0xA8, 0xA9, 0xAA, 0xB2, 0xB3, 0xB4,
    0xB5, 0xB6, 0xB7, 0xB8, 0xB9, 0xBA, 0xC2, 0xC3,
    0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xD2,
    0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8, 0xD9, 0xDA,
    0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9,
    0xEA, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8,
    0xF9, 0xFA,
])


def zigzag_order():
    """ZIGZAG[k] = natural index of the k-th coefficient in zig-zag order."""
    order = []
    for s in range(15):
        rows = range(min(s, 7), max(0, s - 7) - 1, -1) if s % 2 == 0 \
            else range(max(0, s - 7), min(s, 7) + 1)
        for r in rows:
            order.append(r * 8 + (s - r))
    return order


ZIGZAG = zigzag_order()


def huffman_codes(table):
    bits, vals = table
    assert sum(bits) == len(vals)
    codes, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(bits[length - 1]):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


class BitWriter:
    def __init__(self):
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, value, length):
        for i in range(length - 1, -1, -1):
            self.acc = (self.acc << 1) | ((value >> i) & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0x00)  # byte stuffing
                self.acc = 0
                self.n = 0

    def flush(self):
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)  # pad with 1-bits
        return bytes(self.out)


COS = [[math.cos((2 * x + 1) * u * math.pi / 16) for x in range(8)] for u in range(8)]


def fdct_quant(block, qtable):
    """Forward 8x8 DCT (block is 64 level-shifted samples) + quantisation."""
    out = [0] * 64
    for v in range(8):
        for u in range(8):
            s = 0.0
            for y in range(8):
                cy = COS[v][y]
                row = block[y * 8:(y + 1) * 8]
                for x in range(8):
                    s += row[x] * COS[u][x] * cy
            cu = math.sqrt(0.5) if u == 0 else 1.0
            cv = math.sqrt(0.5) if v == 0 else 1.0
            coef = 0.25 * cu * cv * s
            q = coef / qtable[v * 8 + u]
            out[v * 8 + u] = int(math.floor(q + 0.5)) if q >= 0 else -int(math.floor(-q + 0.5))
    return out


def magnitude(v):
    size = abs(v).bit_length()
    bits = v if v >= 0 else v + (1 << size) - 1
    return size, bits


def encode_block(bw, coefs, prev_dc, dc_codes, ac_codes):
    zz = [coefs[ZIGZAG[k]] for k in range(64)]
    diff = zz[0] - prev_dc
    size, bits = magnitude(diff)
    bw.put(*dc_codes[size])
    if size:
        bw.put(bits, size)
    run = 0
    for k in range(1, 64):
        v = zz[k]
        if v == 0:
            run += 1
            continue
        while run > 15:
            bw.put(*ac_codes[0xF0])  # ZRL
            run -= 16
        size, bits = magnitude(v)
        bw.put(*ac_codes[(run << 4) | size])
        bw.put(bits, size)
        run = 0
    if run:
        bw.put(*ac_codes[0x00])  # EOB
    return zz[0]


def segment(marker, payload):
    return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload


def dht_payload(tc_th, table):
    bits, vals = table
    return bytes([tc_th]) + bytes(bits) + bytes(vals)


def encode_jpeg(width, height, pixel):
    """pixel(x, y) -> (r, g, b).  Width/height are multiples of 8."""
    assert width % 8 == 0 and height % 8 == 0
    codes = {
        "dc": (huffman_codes(DC_LUMA), huffman_codes(DC_CHROMA)),
        "ac": (huffman_codes(AC_LUMA), huffman_codes(AC_CHROMA)),
    }
    planes = ([], [], [])
    for y in range(height):
        for x in range(width):
            r, g, b = pixel(x, y)
            planes[0].append(0.299 * r + 0.587 * g + 0.114 * b)
            planes[1].append(-0.168736 * r - 0.331264 * g + 0.5 * b + 128)
            planes[2].append(0.5 * r - 0.418688 * g - 0.081312 * b + 128)
    bw = BitWriter()
    prev = [0, 0, 0]
    for by in range(0, height, 8):
        for bx in range(0, width, 8):
            for c in range(3):  # interleaved MCU: Y, Cb, Cr (1x1 sampling)
                block = [planes[c][(by + j) * width + bx + i] - 128.0
                         for j in range(8) for i in range(8)]
                t = 0 if c == 0 else 1
                coefs = fdct_quant(block, Q_LUMA if t == 0 else Q_CHROMA)
                prev[c] = encode_block(bw, coefs, prev[c],
                                       codes["dc"][t], codes["ac"][t])
    scan = bw.flush()

    out = bytearray(b"\xFF\xD8")  # SOI
    out += segment(0xE0, b"JFIF\x00" + struct.pack(">BBBHHBB", 1, 1, 1, 150, 150, 0, 0))
    out += segment(0xFE, b"Scanned receipt - make-samples.py")  # COM
    out += segment(0xDB, bytes([0x00]) + bytes(Q_LUMA[ZIGZAG[k]] for k in range(64))
                   + bytes([0x01]) + bytes(Q_CHROMA[ZIGZAG[k]] for k in range(64)))
    out += segment(0xC0, struct.pack(">BHHB", 8, height, width, 3)
                   + bytes([1, 0x11, 0, 2, 0x11, 1, 3, 0x11, 1]))
    out += segment(0xC4, dht_payload(0x00, DC_LUMA) + dht_payload(0x10, AC_LUMA)
                   + dht_payload(0x01, DC_CHROMA) + dht_payload(0x11, AC_CHROMA))
    out += segment(0xDA, bytes([3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0]))
    out += scan
    out += b"\xFF\xD9"  # EOI
    return bytes(out)


def receipt_scan_jpg():
    w, h = 48, 64

    def pixel(x, y):
        # off-white, slightly warm paper with a faint vertical shading
        base = 236 - abs(x - 24) // 4
        r, g, b = base, base - 3, base - 12
        # "printed" text lines: dark strokes of varying length
        lengths = [30, 22, 34, 18, 34, 26, 12, 34, 20]
        line = (y - 6) // 6
        if 0 <= line < len(lengths) and (y - 6) % 6 in (1, 2) \
                and 7 <= x < 7 + lengths[line] and (x * 7 + y) % 5 != 0:
            r, g, b = 40, 40, 48
        if y in (60, 61) and 7 <= x < 41:  # total underline
            r, g, b = 30, 30, 30
        return r, g, b

    return encode_jpeg(w, h, pixel)


# ---------------------------------------------------------------------------
# GIF89a with a hand-written LZW encoder
# ---------------------------------------------------------------------------

def lzw_encode(indices, min_code_size):
    clear = 1 << min_code_size
    eoi = clear + 1
    out = bytearray()
    acc = 0
    nbits = 0

    def emit(code, size):
        nonlocal acc, nbits
        acc |= code << nbits
        nbits += size
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8

    def reset():
        return {(i,): i for i in range(clear)}, eoi + 1, min_code_size + 1

    table, next_code, size = reset()
    emit(clear, size)
    w = (indices[0],)
    for k in indices[1:]:
        wk = w + (k,)
        if wk in table:
            w = wk
            continue
        emit(table[w], size)
        if next_code < 4096:
            table[wk] = next_code
            if next_code == (1 << size) and size < 12:
                size += 1
            next_code += 1
        else:
            emit(clear, size)
            table, next_code, size = reset()
        w = (k,)
    emit(table[w], size)
    # The decoder lags one entry behind; mirror its code-size growth for EOI.
    if next_code == (1 << size) and size < 12:
        size += 1
    emit(eoi, size)
    if nbits:
        out.append(acc & 0xFF)
    return bytes(out)


def party_invite_gif(w=48, h=32):
    palette = [
        (255, 255, 255), (0, 0, 0), (230, 57, 70), (241, 250, 238),
        (168, 218, 220), (69, 123, 157), (29, 53, 87), (255, 183, 3),
        (251, 133, 0), (142, 202, 230), (33, 158, 188), (2, 48, 71),
        (255, 0, 110), (131, 56, 236), (58, 134, 255), (6, 214, 160),
    ]
    pixels = []
    for y in range(h):
        for x in range(w):
            c = 3  # background
            if (x * 7 + y * 13) % 23 == 0:
                c = 12 + (x + y) % 4  # confetti
            # balloon
            if (x - 14) ** 2 + (y - 11) ** 2 <= 36:
                c = 2
            if (x - 33) ** 2 + (y - 10) ** 2 <= 30:
                c = 7
            if x in (14, 33) and 17 <= y < 27:
                c = 6  # strings
            if y >= 28:
                c = 5 if (x // 4) % 2 == 0 else 10  # bunting strip
            pixels.append(c)
    min_code_size = 4
    data = lzw_encode(pixels, min_code_size)
    out = bytearray(b"GIF89a")
    out += struct.pack("<HHBBB", w, h, 0x80 | 0x30 | 0x03, 0, 0)  # GCT, 16 colours
    for r, g, b in palette:
        out += bytes((r, g, b))
    comment = b"You're invited! Friday 20 Nov 2026, 18:00"
    out += b"\x21\xFE" + bytes([len(comment)]) + comment + b"\x00"
    out += b"\x21\xF9\x04\x00\x00\x00\x00\x00"  # graphic control extension
    out += b"\x2C" + struct.pack("<HHHHB", 0, 0, w, h, 0)
    out += bytes([min_code_size])
    for i in range(0, len(data), 255):
        chunk = data[i:i + 255]
        out += bytes([len(chunk)]) + chunk
    out += b"\x00\x3B"
    return bytes(out)


# ---------------------------------------------------------------------------
# Text formats
# ---------------------------------------------------------------------------

MEETING_NOTES = """\
Weekly sync - meeting notes
Date: Tuesday, 3 November 2026, 10:00-10:45
Attendees: Jane Doe, Omar Haddad, Li Wei, Sofia Rossi

1. Release planning
The 2.4 release is on track for 17 November. Omar will finish the attachment
preview work by Friday; Li is still chasing the flaky sync test on Linux and
will pair with Sofia on Thursday if it is not fixed by then.

2. Offsite
The team offsite is confirmed for 20 November at the Riverside Loft. Jane will
send the calendar invite today (see attached .ics). Please fill in the dietary
requirements form by Monday.

3. Expenses
Q3 expense reports are due this week. The summary spreadsheet is attached as
expenses-q3.csv - shout if anything looks wrong before finance closes the
quarter.

Action items
- Omar: attachment preview PR ready for review (Fri)
- Li + Sofia: flaky sync test (Thu)
- Jane: offsite invite + dietary form (today)
- Everyone: check your Q3 expenses (Fri)
"""

EXPENSES_CSV = [
    ["date", "employee", "category", "description", "amount", "currency"],
    ["2026-07-03", "Jane Doe", "Travel", "Train London - Bristol (return)", "86.40", "GBP"],
    ["2026-07-03", "Jane Doe", "Meals", "Client lunch, 3 people", "74.25", "GBP"],
    ["2026-07-15", "Omar Haddad", "Software", "IDE licence renewal", "199.00", "GBP"],
    ["2026-07-28", "Li Wei", "Hardware", "USB-C dock", "129.99", "GBP"],
    ["2026-08-06", "Sofia Rossi", "Travel", "Flight BRS-MXP", "142.10", "GBP"],
    ["2026-08-07", "Sofia Rossi", "Lodging", "Hotel Milano Centrale, 2 nights", "268.00", "GBP"],
    ["2026-08-19", "Jane Doe", "Office", "Printer paper, toner", "38.70", "GBP"],
    ["2026-09-02", "Omar Haddad", "Training", "Conference ticket \"SwiftConf 2026\"", "350.00", "GBP"],
    ["2026-09-10", "Li Wei", "Meals", "Team dinner", "212.35", "GBP"],
    ["2026-09-24", "Jane Doe", "Travel", "Taxi, airport transfer", "45.00", "GBP"],
]


def csv_text(rows):
    def field(s):
        if any(ch in s for ch in ',"\r\n'):
            return '"' + s.replace('"', '""') + '"'
        return s
    return "".join(",".join(field(c) for c in row) + "\r\n" for row in rows)


TEAM_OFFSITE_ICS = crlf("""\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Example Corp//make-samples.py//EN
CALSCALE:GREGORIAN
METHOD:REQUEST
BEGIN:VEVENT
UID:20261120T090000Z-offsite@example.com
DTSTAMP:20261101T090000Z
DTSTART:20261120T090000Z
DTEND:20261120T170000Z
SUMMARY:Team offsite 2026
LOCATION:Riverside Loft\\, 1 Wharf Lane\\, Bristol BS1 5DB
DESCRIPTION:Full-day team offsite: roadmap review in the morning\\, worksh
 ops after lunch\\, dinner at 18:00.
ORGANIZER;CN=Jane Doe:mailto:jane.doe@example.com
ATTENDEE;CN=Omar Haddad;RSVP=TRUE:mailto:omar.haddad@example.com
ATTENDEE;CN=Li Wei;RSVP=TRUE:mailto:li.wei@example.com
STATUS:CONFIRMED
SEQUENCE:0
END:VEVENT
END:VCALENDAR
""")

JANE_DOE_VCF = crlf("""\
BEGIN:VCARD
VERSION:3.0
N:Doe;Jane;;;
FN:Jane Doe
ORG:Example Corp.;Engineering
TITLE:Engineering Manager
EMAIL;TYPE=INTERNET,WORK,PREF:jane.doe@example.com
TEL;TYPE=WORK,VOICE:+44 117 496 0123
TEL;TYPE=CELL:+44 7700 900123
ADR;TYPE=WORK:;;5 Market Street;Leeds;;LS1 6DT;United Kingdom
URL:https://www.example.com/
NOTE:Met at the 2026 team offsite.
REV:20261101T090000Z
END:VCARD
""")

RESUME_TXT = """\
Ångström Résumé 2026
====================

Name:      Zoë Ångström-Müller
Location:  Malmö, Sweden
E-mail:    zoe.angstrom@example.com

Profile
Software engineer with eight years of experience building mail clients,
sync engines and file-handling pipelines. Fluent in Swedish, English and
French (niveau C1 - très bien).

Experience
2022–2026  Senior Engineer, Nordmail AB, Göteborg
           Led the attachment-storage rewrite; cut disk usage by 40 %.
2018–2022  Engineer, Café Crème Software SARL, Lyon
           Built the iCalendar/vCard import for the desktop client.

Education
M.Sc. Computer Science, Lunds universitet (2018)
"""

FORWARDED_EML = crlf("""\
From: Jane Doe <jane.doe@example.com>
To: Omar Haddad <omar.haddad@example.com>
Subject: Fwd: Offsite venue confirmation
Date: Sun, 01 Nov 2026 09:00:00 +0000
Message-ID: <20261101090000.4711@mail.example.com>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: 7bit

Hi Omar,

FYI - the venue is confirmed, see below.

Jane

---------- Forwarded message ---------
From: Riverside Loft Events <events@riverside-loft.example>
Date: Sat, 31 Oct 2026 16:42:10 +0000
Subject: Offsite venue confirmation
To: Jane Doe <jane.doe@example.com>

Dear Jane,

We are happy to confirm your booking of the Loft Room on Friday
20 November 2026 from 09:00 to 17:00 for 12 guests, including lunch
and afternoon coffee.

Kind regards,
Riverside Loft Events
""")


# ---------------------------------------------------------------------------
# DOCX (Office Open XML)
# ---------------------------------------------------------------------------

DOCX_CONTENT_TYPES = """\
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">\
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>\
<Default Extension="xml" ContentType="application/xml"/>\
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>\
<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>\
</Types>
"""

DOCX_RELS = """\
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">\
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>\
<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>\
</Relationships>
"""

DOCX_CORE = """\
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" \
xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\
<dc:title>Quarterly Report Q3 2026</dc:title>\
<dc:creator>Jane Doe</dc:creator>\
<dcterms:created xsi:type="dcterms:W3CDTF">2026-11-01T09:00:00Z</dcterms:created>\
<dcterms:modified xsi:type="dcterms:W3CDTF">2026-11-01T09:00:00Z</dcterms:modified>\
</cp:coreProperties>
"""


def docx_paragraph(text, bold=False, size=None):
    rpr = ""
    if bold or size:
        rpr = "<w:rPr>%s%s</w:rPr>" % ("<w:b/>" if bold else "",
                                       '<w:sz w:val="%d"/>' % size if size else "")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return '<w:p><w:r>%s<w:t xml:space="preserve">%s</w:t></w:r></w:p>' % (rpr, text)


def quarterly_report_docx():
    paras = [
        docx_paragraph("Quarterly Report - Q3 2026", bold=True, size=36),
        docx_paragraph("Prepared by Jane Doe, 1 November 2026", size=20),
        docx_paragraph("Summary", bold=True, size=28),
        docx_paragraph("Revenue grew 12 % quarter on quarter to GBP 1.84 million, driven "
                       "mainly by the new team plan. Churn fell to 2.1 %, the lowest "
                       "figure since the product launched."),
        docx_paragraph("Engineering", bold=True, size=28),
        docx_paragraph("The team shipped releases 2.2 and 2.3, including offline "
                       "attachment previews and faster mailbox sync. Crash-free sessions "
                       "rose to 99.7 %."),
        docx_paragraph("Outlook for Q4", bold=True, size=28),
        docx_paragraph("We expect to ship release 2.4 in November and to start the "
                       "calendar integration work after the team offsite on 20 November."),
    ]
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        "<w:body>" + "".join(paras) +
        '<w:sectPr><w:pgSz w:w="11906" w:h="16838"/>'
        '<w:pgMar w:top="1440" w:right="1440" w:bottom="1440" w:left="1440" '
        'w:header="708" w:footer="708" w:gutter="0"/></w:sectPr>'
        "</w:body></w:document>\n"
    )
    parts = [
        ("[Content_Types].xml", DOCX_CONTENT_TYPES),  # must be the first entry
        ("_rels/.rels", DOCX_RELS),
        ("word/document.xml", document),
        ("docProps/core.xml", DOCX_CORE),
    ]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in parts:
            info = zipfile.ZipInfo(name, date_time=(2026, 11, 1, 9, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, independent of the host OS
            info.external_attr = 0o100644 << 16
            zf.writestr(info, text.encode("utf-8"), compresslevel=9)
    return buf.getvalue()


# ---------------------------------------------------------------------------

def main():
    write("invoice-2026-11.pdf", invoice_pdf())
    write("team-photo.png", team_photo_png())
    write("receipt-scan.jpg", receipt_scan_jpg())
    write("party-invite.gif", party_invite_gif())
    write("meeting-notes.txt", MEETING_NOTES)
    write("expenses-q3.csv", csv_text(EXPENSES_CSV))
    write("team-offsite.ics", TEAM_OFFSITE_ICS)
    write("jane-doe.vcf", JANE_DOE_VCF)
    write("quarterly-report.docx", quarterly_report_docx())
    write(unicodedata.normalize("NFC", "Ångström résumé 2026.txt"),
          unicodedata.normalize("NFC", RESUME_TXT))
    write(os.path.join("scans", "page.pdf"), page_pdf("Scanned page 1 of 1", [
        "Delivery note DN-88213",
        "Received 12 boxes of widgets in good condition.",
        "Signed: J. Doe, 2 November 2026",
    ]))
    write(os.path.join("drafts", "page.pdf"), page_pdf("DRAFT - Project proposal", [
        "Working title: Smarter attachment handling",
        "Status: draft, not for distribution.",
        "Next review: 9 November 2026",
    ]))
    write("empty.txt", b"")
    write("forwarded-message.eml", FORWARDED_EML)
    write(os.path.join("mail", "quarterly-mail.eml"), quarterly_mail_eml())


def quarterly_mail_eml():
    """A multipart message for `inbox import`: a text body, two attachments (the invoice PDF and the team photo,
    base64), and a forwarded message that carries the offsite invitation. Built by hand with fixed boundaries,
    so the bytes are the same on every run."""
    import base64

    def b64(data):
        text = base64.b64encode(data).decode("ascii")
        return "\r\n".join(text[i:i + 76] for i in range(0, len(text), 76))

    forwarded = crlf(
        "From: Omar Haddad <omar@example.org>\n"
        "To: Team <team@example.org>\n"
        "Subject: Team offsite\n"
        "Date: Thu, 05 Nov 2026 16:20:00 +0000\n"
        "Message-ID: <offsite-2026@example.org>\n"
        "MIME-Version: 1.0\n"
        "Content-Type: multipart/mixed; boundary=\"inner-2026\"\n"
        "\n"
        "--inner-2026\n"
        "Content-Type: text/plain; charset=utf-8\n"
        "\n"
        "The invitation is attached.\n"
        "--inner-2026\n"
        "Content-Type: text/calendar; charset=utf-8; name=\"team-offsite.ics\"\n"
        "Content-Disposition: attachment; filename=\"team-offsite.ics\"\n"
        "\n"
    ) + TEAM_OFFSITE_ICS + "\r\n--inner-2026--\r\n"
    message = crlf(
        "From: Jane Doe <jane@example.org>\n"
        "To: Me <me@example.org>\n"
        "Subject: Q3: invoice, photo and the offsite\n"
        "Date: Fri, 06 Nov 2026 09:30:00 +0000\n"
        "Message-ID: <q3-mail-2026@example.org>\n"
        "MIME-Version: 1.0\n"
        "Content-Type: multipart/mixed; boundary=\"outer-2026\"\n"
        "\n"
        "--outer-2026\n"
        "Content-Type: text/plain; charset=utf-8\n"
        "\n"
        "Hi, the invoice and the team photo are attached, and Omar's invitation below.\n"
        "--outer-2026\n"
        "Content-Type: application/pdf; name=\"invoice-2026-11.pdf\"\n"
        "Content-Disposition: attachment; filename=\"invoice-2026-11.pdf\"\n"
        "Content-Transfer-Encoding: base64\n"
        "\n"
    ) + b64(invoice_pdf()) + crlf(
        "\n--outer-2026\n"
        "Content-Type: image/png\n"
        "Content-Disposition: attachment; filename=\"team-photo.png\"\n"
        "Content-Transfer-Encoding: base64\n"
        "\n"
    ) + b64(team_photo_png()) + crlf(
        "\n--outer-2026\n"
        "Content-Type: message/rfc822\n"
        "\n"
    ) + forwarded + "--outer-2026--\r\n"
    return message.encode("utf-8")


if __name__ == "__main__":
    main()
