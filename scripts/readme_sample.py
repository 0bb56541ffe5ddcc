"""Run the README's quick start (`ckptprof run` on the built-in synthetic checkpoint, as on a fresh machine) and
write what it printed into README.md, between the readme-sample markers; optionally take the README's picture.

Usage (from the repository root)::

    python scripts/readme_sample.py                                  # rewrite the README's sample
    python scripts/readme_sample.py --screenshot docs/report.png     # and the HTML report's screenshot

The run gets a fresh cache folder ($CKPTPROF_CACHE), so it generates the checkpoint and measures the ceilings as a
first run does; the cache path is then written as `~/.cache/ckptprof`, the default a user gets. Progress bars
(redrawn with carriage returns) are left out; standard output and standard error are kept together,
in the order a terminal shows it.

tests/integration/test_readme_sample.py holds the README's sample to the current output format: it runs the same
command on a smaller checkpoint and compares `skeleton()` of both - every line's labels and table headers with
numbers, paths and column padding masked - so new numbers pass and a changed layout fails.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- readme-sample:begin -->"
END = "<!-- readme-sample:end -->"
COMMAND = "ckptprof run"
USER_CACHE = "~/.cache/ckptprof"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def run_quick_start(workdir: Path, cache: Path, extra: Sequence[str] = ()) -> tuple[str, Path]:
    """What `ckptprof run` prints in ``workdir`` with a fresh ``cache``: the terminal text and the session's path."""
    # One pipe for both streams, unbuffered, so the lines keep the order a terminal shows them in.
    env = dict(os.environ, CKPTPROF_CACHE=str(cache), COLUMNS="100", PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "-m", "ckptprof", "run", *extra],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"`{COMMAND}` exited {proc.returncode}:\n{proc.stdout}")
    # A progress bar redraws itself with carriage returns: what a terminal keeps of a line is its last frame, and
    # the bar itself is gone once the run ends.
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in proc.stdout.split("\n")]
    text = "\n".join(line for line in lines if "shard/s]" not in line).strip("\n") + "\n"
    # The bar's cleared line leaves blank lines behind it that a terminal would have written over.
    text = re.sub(r"\n{3,}", "\n\n", text)
    sessions = sorted(workdir.glob("ckptprof-runs/*/session.json"))
    if not sessions:
        raise RuntimeError(f"`{COMMAND}` saved no session under {workdir}")
    return text.replace(str(cache), USER_CACHE), sessions[-1]


# Lines that are findings of the run, not its format: which remedies and caveats apply (none, on a load that nothing
# would speed up; a storage note only when a replay outran the probe) depends on what was measured.
FINDINGS = {"try", "note"}
NUMBER = re.compile(r"\d+(?:\.\d+)?")
PATH = re.compile(r"(?<!\S)[~/]\S*|(?<!\S)\S+/\S+/\S+")
DASHES = re.compile(r"^[\s-]*-[\s-]*$")


def skeleton(text: str) -> list[str]:
    """The output's format without its values: one label per line, numbers, paths and padding masked.

    A line with a ``label: ...`` keeps its label (its sentence says this run's findings, which change from run to
    run); a table keeps its header line whole and its rows as one ``<rows>``; other lines are kept masked. Repeats
    in a row collapse; ``try`` and ``note`` lines are left out: whether a remedy or a caveat applies is a finding.
    """
    labels: list[str] = []
    in_table = False
    for raw in text.splitlines():
        line = " ".join(PATH.sub("<path>", NUMBER.sub("#", raw)).split())
        if not line:
            in_table = False
            label = ""
        elif DASHES.match(line):
            in_table = True
            label = "<dashes>"
        elif in_table and ": " not in line:
            label = "<rows>"
        else:
            in_table = False if ": " in line else in_table
            label = line.split(": ", 1)[0] if ": " in line else line
        if label in FINDINGS:
            continue
        if not labels or labels[-1] != label:
            labels.append(label)
    return labels


def readme_sample(readme: str) -> str:
    """The sample between the markers, without its code fence and the command line."""
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    lines = block.strip("\n").splitlines()
    body = [line for line in lines if not line.startswith("```")]
    if body and body[0] == f"$ {COMMAND}":
        body = body[1:]
    return "\n".join(body) + "\n"


def with_sample(readme: str, sample: str) -> str:
    block = f"{BEGIN}\n```\n$ {COMMAND}\n{sample.rstrip()}\n```\n{END}"
    head, rest = readme.split(BEGIN, 1)
    return head + block + rest.split(END, 1)[1]


def screenshot(session: Path, png: Path, workdir: Path, cache: Path) -> None:
    """`ckptprof report SESSION --format html`, photographed by headless Chromium (its first screen and a bit)."""
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if exe is None:
        raise RuntimeError("headless Chromium not found (apt-get install -y chromium)")
    html = workdir / "report.html"
    subprocess.run(
        [sys.executable, "-m", "ckptprof", "report", str(session), "--format", "html", "-o", str(html)],
        check=True,
        capture_output=True,
    )
    # The checkpoint's path as the README's sample shows it: the user's default cache, not this run's scratch one.
    html.write_text(html.read_text(encoding="utf-8").replace(str(cache), USER_CACHE), encoding="utf-8")
    shot = workdir / "shot.png"
    subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         f"--user-data-dir={workdir / 'profile'}", "--hide-scrollbars", "--window-size=1200,1180",
         f"--screenshot={shot}", html.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    png.write_bytes(shot.read_bytes())
    print(f"wrote {png} ({png.stat().st_size} bytes)")


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description="Write the README's quick-start sample from a real run.")
    cli.add_argument("--screenshot", type=Path, help="also write the HTML report's screenshot here (PNG)")
    args = cli.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ckptprof-readme-") as tmp:
        work = Path(tmp)
        text, session = run_quick_start(work, work / "cache")
        README.write_text(with_sample(README.read_text(encoding="utf-8"), text), encoding="utf-8")
        print(f"wrote the sample into {README.relative_to(ROOT)} ({len(text.splitlines())} lines)")
        if args.screenshot:
            screenshot(session, args.screenshot.resolve(), work, work / "cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
