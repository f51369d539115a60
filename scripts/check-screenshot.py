#!/usr/bin/env python3
"""Checks a screenshot of the preview page (a PNG from headless Chromium): the map panel is drawn (the fix's blue
marker and the POIs' red ones), below the notification's text. Prints what it found as JSON; exit 1 if the
layout is not the expected one. Standard library only (zlib), so it runs on a fresh machine."""
import json, struct, sys, zlib

def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6), f"unsupported PNG: depth {depth} color {color}"
            channels = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], (prev[x - channels] if x >= channels else 0)
            if kind == 1: line[x] = (line[x] + a) & 255
            elif kind == 2: line[x] = (line[x] + b) & 255
            elif kind == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line); prev = line
    return width, height, channels, rows

width, height, channels, rows = read_png(sys.argv[1])
def near(p, rgb, tolerance=40): return all(abs(p[k] - rgb[k]) <= tolerance for k in range(3))
red, blue = [], []
for y, row in enumerate(rows):
    for x in range(width):
        p = row[x * channels:x * channels + 3]
        if near(p, (214, 39, 40)): red.append((x, y))
        elif near(p, (37, 99, 235)): blue.append((x, y))
found = {"red_pixels": len(red), "blue_pixels": len(blue), "width": width, "height": height}
# The text: dark pixels on the card's light grey, in the rows above the map and the columns the map spans (the
# phone's dark frame is outside the card).
ok = len(red) >= 30 and len(blue) >= 30
if ok:
    top = min(y for _, y in blue + red)
    left, right = min(x for x, _ in blue + red), max(x for x, _ in blue + red)
    middle = (left + right) // 2
    card_rows = [y for y in range(top) if near(rows[y][middle * channels:middle * channels + 3], (242, 242, 247), 8)]
    dark = sum(1 for y in card_rows for x in range(left, right + 1)
               if max(rows[y][x * channels:x * channels + 3]) < 110)
    found.update({"card_rows_above_map": len(card_rows), "text_pixels_above_map": dark})
    ok = len(card_rows) >= 20 and dark >= 50
print(json.dumps(found))
sys.exit(0 if ok else 1)
