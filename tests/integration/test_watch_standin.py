"""A stand-in for a tensor-parallel server, for ``ckptprof watch``'s tests and benchmark: run as a script, it is a
launcher that starts one "scheduler" process per rank, titled as SGLang titles them (``sglang::scheduler_TP0``,
in the command line as setproctitle would leave it), each reading its share of a safetensors checkpoint through
safetensors' own mmap reader, slowly enough to be sampled, and printing SGLang's boot records; the launcher says
ready once every rank has loaded, then "serves" for a while and stops its ranks.

    python test_watch_standin.py --model-path CKPT --tp 2 [--delay-s 0.02] [--die-rank 1] [--serve-s 1] [--passes 1]

Imported by pytest, it holds one check of its own: unwatched, the stand-in loads and ends cleanly.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
_PR_SET_PDEATHSIG = 1


def _stamp() -> str:
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def shards_of(ckpt: Path, rank: int, tp: int) -> list[Path]:
    """Rank r reads shards r, r + tp, ...: disjoint shares, so each rank's storage bytes are its own shards'."""
    files = sorted(ckpt.glob("*.safetensors"))
    return files[rank::tp]


def child(title: str, rank: int, tp: int, ckpt: Path, delay_s: float, die: bool, passes: int) -> int:
    from safetensors import safe_open

    with open("/proc/self/comm", "w") as fh:  # what prctl(PR_SET_NAME) leaves: the first 15 bytes
        fh.write(title[:15])
    # Ended with its launcher, however the launcher ends (SGLang's schedulers watch their parent too): a test that
    # kills the launcher leaves no rank behind.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:
        return 1
    print(f"[{_stamp()} TP{rank}] Load weight begin. avail mem=10.00 GB", flush=True)
    mine = shards_of(ckpt, rank, tp) * passes
    total = 0
    for k, path in enumerate(mine):
        if die and k == len(mine) // 2:
            print(f"[{_stamp()} TP{rank}] Scheduler hit an exception: RuntimeError: injected", flush=True)
            os._exit(1)
        with safe_open(str(path), framework="np") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open's handle is not a dict
                total += int(f.get_tensor(name).sum() != 0.5)  # touch every page of the tensor
                time.sleep(delay_s)
        if (
            rank == 0
        ):  # SGLang's tqdm bar, drawn by rank 0 only, one frame per shard (the form of its real logs)
            n = len(mine)
            print(
                f"Loading safetensors checkpoint shards: {100 * (k + 1) // n:3d}% Completed | {k + 1}/{n} "
                "[00:00<00:00,  1.00it/s]",
                flush=True,
            )
    print(f"[{_stamp()} TP{rank}] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.sigwait({signal.SIGTERM})  # "serving" until the launcher stops it
    return 0


def launcher(args: argparse.Namespace) -> int:
    began = time.perf_counter()
    procs = []
    for rank in range(args.tp):
        cmd = [sys.executable, str(HERE), "--child", f"sglang::scheduler_TP{rank}", "--rank", str(rank)]
        cmd += ["--tp", str(args.tp), "--model-path", args.model_path, "--delay-s", str(args.delay_s)]
        cmd += ["--passes", str(args.passes)]
        if args.die_rank == rank:
            cmd.append("--die")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    loaded = [False] * args.tp

    def forward(rank: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if "Load weight end" in line:
                loaded[rank] = True

    readers = [threading.Thread(target=forward, args=(r, p), daemon=True) for r, p in enumerate(procs)]
    for t in readers:
        t.start()
    failed = False
    while not all(loaded):
        if any(p.poll() is not None for p in procs):
            failed = True
            if all(loaded[r] or procs[r].poll() is not None for r in range(args.tp)):
                break
        time.sleep(0.05)
    if not failed:
        # the load's wall as the launcher saw it, for the benchmark (watched vs not)
        print(f"[{_stamp()}] stand-in load took {time.perf_counter() - began:.4f} s", flush=True)
        print(f"[{_stamp()}] The server is fired up and ready to roll!", flush=True)
        time.sleep(args.serve_s)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait()
    for t in readers:
        t.join(timeout=2)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--delay-s", type=float, default=0.02)
    parser.add_argument("--die-rank", type=int, default=None)
    parser.add_argument("--serve-s", type=float, default=1.5)
    parser.add_argument("--child", default=None)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--die", action="store_true")
    parser.add_argument("--passes", type=int, default=1, help="read the rank's shards this many times")
    args = parser.parse_args()
    if args.child:
        return child(
            args.child, args.rank, args.tp, Path(args.model_path), args.delay_s, args.die, args.passes
        )
    return launcher(args)


def test_the_standin_loads_its_shards_and_ends_cleanly_unwatched(tmp_path: Path) -> None:
    from ckptprof.checkpoint.synth import synthesize

    ckpt = tmp_path / "ckpt"
    synthesize(ckpt, preset="llama", shards=4, size=16_000_000, seed=9, dtype="fp32")
    cmd = [
        sys.executable,
        str(HERE),
        "--model-path",
        str(ckpt),
        "--tp",
        "2",
        "--delay-s",
        "0",
        "--serve-s",
        "0",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert sum("Load weight end" in line for line in out) == 2
    assert "took" in out[-2] and out[-1].endswith("The server is fired up and ready to roll!")


if __name__ == "__main__":
    sys.exit(main())
