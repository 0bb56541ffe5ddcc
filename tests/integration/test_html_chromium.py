"""The HTML report of a real run, opened in headless Chromium: it renders, is not blank, fetches nothing.

Chromium comes from Debian (`apt-get install -y chromium`). Without it the test skips, except with CI=true,
where it fails: CI installs chromium, so a missing browser there is a broken CI image, not a reason to skip.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptprof.cli.main import main
from ckptprof.render import rows
from ckptprof.session import Session

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120


def browser() -> str:
    found = next((p for p in (shutil.which(b) for b in BROWSERS) if p), None)
    if found:
        return found
    message = "headless Chromium not found (apt-get install -y chromium)"
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{message}: CI must install it", pytrace=False)
    pytest.skip(message)


def chromium(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", "--enable-logging=stderr", f"--user-data-dir={profile}",
    ]  # fmt: skip
    return subprocess.run(
        [exe, *flags, *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def _png_chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at = 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        yield data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        at += 12 + length


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def png_pixels(data: bytes, max_rows: int) -> tuple[int, list[tuple[int, ...]]]:
    """(width, pixels of the first ``max_rows`` rows) of an 8-bit RGB/RGBA non-interlaced PNG.

    A minimal decoder (zlib + the five scanline filters) so the test needs no imaging library; PIL is used
    instead when it is installed (it comes with matplotlib)."""
    chunks = list(_png_chunks(data))
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    try:
        from PIL import Image
    except ImportError:
        pass
    else:
        import io

        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
            return width, [rgb.getpixel((x, y)) for y in range(min(max_rows, height)) for x in range(width)]
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * bpp
    prev = bytearray(stride)
    pixels: list[tuple[int, ...]] = []
    for y in range(min(max_rows, height)):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up_left = prev[i - bpp] if i >= bpp else 0
            predictor = (0, left, prev[i], (left + prev[i]) // 2, _paeth(left, prev[i], up_left))[kind]
            line[i] = (line[i] + predictor) & 0xFF
        pixels += [tuple(line[x : x + 3]) for x in range(0, stride, bpp)]
        prev = line
    return width, pixels


@pytest.fixture(scope="module")
def exe() -> str:
    """Looked up before the report is built, so a missing browser skips (or fails in CI) at once."""
    return browser()


@pytest.fixture(scope="module")
def report(small_draft: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Session]:
    """A real 2-rank run with the probes (so the ceilings are drawn), written by `run --html`."""
    out = tmp_path_factory.mktemp("html")
    argv = ["run", str(small_draft), "--tp", "2", "--devices", "cpu", "--probe-sample", "16MB", "-q"]
    code = main([*argv, "-o", str(out / "run"), "--html", str(out / "report.html")])
    assert code == 0
    return out / "report.html", Session.load(out / "run" / "session.json")


def test_report_renders_in_chromium_and_is_not_blank(
    exe: str, report: tuple[Path, Session], tmp_path: Path
) -> None:
    html_path, _ = report
    png = tmp_path / "report.png"
    # WHEN headless Chromium takes a screenshot of the report
    proc = chromium(
        exe, tmp_path / "profile", f"--screenshot={png}", "--window-size=1400,2000", html_path.as_uri()
    )
    # THEN it succeeded, and nothing was blocked: the page needs nothing from outside (CSP would log it)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert png.exists() and png.stat().st_size > 10_000, proc.stderr[-2000:]
    assert "Content Security Policy" not in proc.stderr and "ERR_" not in proc.stderr, proc.stderr[-2000:]
    # AND the top of the page (header, verdict, timeline) has real content: many colours, not all white
    width, pixels = png_pixels(png.read_bytes(), max_rows=600)
    assert width == 1400
    colours = set(pixels)
    non_white = sum(1 for p in pixels if min(p) < 235) / len(pixels)
    assert len(colours) > 50, f"only {len(colours)} distinct colours"
    assert non_white > 0.05, f"{non_white:.1%} non-white pixels"
    # the phase colours of the timeline and the verdict badge are on screen
    assert {(0x4C, 0x78, 0xA8), (0x9E, 0xCA, 0xE9)} & colours  # read: from storage or from the page cache


def test_dom_shows_the_verdict(exe: str, report: tuple[Path, Session], tmp_path: Path) -> None:
    html_path, session = report
    proc = chromium(exe, tmp_path / "profile", "--dump-dom", html_path.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    # THEN the parsed page carries the verdict's summary and the recommendations, and both SVG charts
    assert session.verdict.summary[:60] in dom.replace("&amp;", "&")
    assert 'class="badge"' in dom and dom.count("<svg") == 2
    # the badge: "storage-bound", or "no single bottleneck" when the top shares are within the noise
    assert f'class="badge">{rows.headline(session)}<' in dom
