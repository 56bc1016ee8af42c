"""What a browser shows of an ascend-check HTML page: headless Chromium's screenshot, read back as pixels."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from ascend_ready.checks.html_report import CURVE_COLOURS


def chromium() -> str | None:
    found = (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome"))
    return next((path for path in found if path), None)


def png_rgb(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _c, _f, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for k, v in enumerate(line) if k % 4 != 3))
    return width, height, rows


def screenshot(page: Path, tmp: Path, size: tuple[int, int] = (1200, 800)) -> Path:
    """Headless Chromium's screenshot of `page` (kept in `tmp`: the CI artefact)."""
    shot = tmp / (page.stem + ".png")
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp / 'profile'}", f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp)},
    )
    assert shot.exists(), result.stdout + result.stderr
    return shot


def curve_pixels(shot: Path, colour: str) -> int:
    """How many pixels of the screenshot are drawn in `colour` (#rrggbb, exactly)."""
    want = bytes(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    width, _height, rows = png_rgb(shot)
    return sum(1 for row in rows for x in range(width) if row[3 * x:3 * x + 3] == want)


def assert_curves_shown(page: Path, tmp: Path) -> None:
    """The page's curves (its first curve colour) are drawn where a browser shows them; skipped without
    Chromium."""
    import pytest

    if chromium() is None:
        pytest.skip("chromium is not installed (scripts/system-deps.sh installs it, as root)")
    assert "<svg" in page.read_text() and "<polyline" in page.read_text()
    shot = screenshot(page, tmp, (1200, 6000))
    assert curve_pixels(shot, CURVE_COLOURS[0]) > 100, "no curve drawn in the screenshot"
