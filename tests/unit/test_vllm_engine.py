"""vLLM's release lines and its automatic-prefetch rule, as read from each release's wheel (ckptprof/engines/vllm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint import fs
from ckptprof.engines import vllm
from ckptprof.engines.vllm import decide_prefetch, profile_for_version

GiB = 2**30


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("0.9.0", "0.10.2 - 0.16"),  # older than any release read: the oldest line
        ("0.10.2", "0.10.2 - 0.16"),
        ("0.16.0", "0.10.2 - 0.16"),
        ("0.17.0", "0.17"),
        ("0.18.1", "0.18"),
        ("0.19.0", "0.19"),
        ("0.21.0", "0.20 - 0.21"),
        ("0.22.0", "0.22 - 0.32"),
        ("0.32.0", "0.22 - 0.32"),
        ("0.33.0", "0.33"),
        ("0.33.9", "0.33"),
        ("0.34.0", "0.34 and later"),
        ("0.40.0rc1", "0.34 and later"),
    ],
)
def test_each_release_maps_to_its_line(version: str, line: str) -> None:
    assert profile_for_version(version).name == line


def test_a_release_number_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a release number"):
        profile_for_version("latest")


@pytest.mark.parametrize(
    ("version", "strategy", "fs_type", "size_gib", "available_gib", "prefetch", "words"),
    [
        # unset strategy: prefetch on a network file system when 90% of the available RAM holds the checkpoint
        ("0.33.0", None, "nfs4", 50, 100, True, "NFS4 is a network file system and the checkpoint fits"),
        ("0.33.0", None, "lustre", 50, 100, True, "LUSTRE is a network file system"),
        ("0.33.0", None, "nfs", 91, 100, False, "exceeds 90% of available RAM"),
        (
            "0.33.0",
            None,
            "ext4",
            1,
            100,
            False,
            "the file system (EXT4) is not one vLLM prefetches on (LUSTRE/NFS/NFS4)",
        ),
        ("0.33.0", None, "fuse.sshfs", 1, 100, False, "FUSE.SSHFS) is not one vLLM prefetches on"),
        ("0.33.0", None, "", 1, 100, False, "the file system (unknown)"),
        # 0.19 knew NFS only; 0.18 never prefetched unasked
        ("0.19.0", None, "lustre", 1, 100, False, "not one vLLM prefetches on (NFS/NFS4)"),
        ("0.19.0", None, "nfs", 1, 100, True, "NFS is a network file system"),
        ("0.18.0", None, "nfs", 1, 100, False, "never prefetches unless asked"),
        # an explicit strategy wins over the rule
        ("0.33.0", "prefetch", "ext4", 1, 100, True, "asked for"),
        ("0.33.0", "prefetch", "ext4", 95, 100, True, "does not fit in 90% of available RAM"),
        ("0.33.0", "lazy", "nfs4", 1, 100, False, "--safetensors-load-strategy lazy never prefetches"),
        ("0.33.0", "eager", "nfs4", 1, 100, False, "eager never prefetches"),
    ],
)
def test_the_automatic_prefetch_rule(
    version: str,
    strategy: str | None,
    fs_type: str,
    size_gib: float,
    available_gib: float,
    prefetch: bool,
    words: str,
) -> None:
    decision = decide_prefetch(
        profile_for_version(version), strategy, fs_type, int(size_gib * GiB), int(available_gib * GiB)
    )
    assert decision.prefetch is prefetch
    assert words in decision.reason
    assert decision.to_dict()["fs_type"] == fs_type


def test_the_rule_is_at_90_percent_of_the_available_ram() -> None:
    profile = vllm.NEWEST
    assert decide_prefetch(profile, None, "nfs", 90 * GiB, 100 * GiB).prefetch is True
    assert decide_prefetch(profile, None, "nfs", 90 * GiB + 1, 100 * GiB).prefetch is False


def test_the_file_system_is_the_longest_mount_point_that_holds_the_path(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/vda1 / ext4 rw 0 0\n"
        "server:/export /data nfs4 rw,vers=4.2 0 0\n"
        "/dev/nvme0n1 /data/local ext4 rw 0 0\n"
        "user@host:/srv /mnt/my\\040models fuse.sshfs rw 0 0\n"
        "garbage\n"
    )
    assert vllm.mount_fs_type("/data/ckpt/model.safetensors", str(mounts)) == "nfs4"
    assert vllm.mount_fs_type("/data/local/ckpt", str(mounts)) == "ext4"
    assert vllm.mount_fs_type("/datafoo/x", str(mounts)) == "ext4"  # a prefix of the name is not the mount
    assert vllm.mount_fs_type("/mnt/my models/ckpt", str(mounts)) == "fuse.sshfs"
    assert vllm.mount_fs_type("/x", str(tmp_path / "missing")) == ""


def test_the_file_system_here_is_what_the_kernel_says(tmp_path: Path) -> None:
    assert vllm.mount_fs_type(tmp_path) == fs.fs_type(tmp_path)


def test_the_note_measures_prefetching_only_in_a_controlled_cache_mode() -> None:
    decision = decide_prefetch(vllm.NEWEST, None, "ext4", GiB, 100 * GiB)
    walls = {"vllm": 2.0, "vllm-prefetch": 1.5}
    cold = vllm.prefetch_note(vllm.NEWEST, decision, walls, "cold")
    assert cold.startswith("vLLM 0.34 and later would not prefetch this checkpoint on its own here")
    assert "prefetching saves 0.50 s (25% of the lazy path's 2.00 s" in cold
    warm = vllm.prefetch_note(vllm.NEWEST, decision, {"vllm": 1.0, "vllm-prefetch": 1.1}, "warm")
    assert "(warm cache), prefetching costs 0.10 s" in warm
    as_is = vllm.prefetch_note(vllm.NEWEST, decision, walls, "as-is")
    assert "run with --cache cold to measure" in as_is and "prefetching saves" not in as_is
    assert "measured" not in vllm.prefetch_note(vllm.NEWEST, decision, {"vllm": 2.0}, "cold")


def test_the_default_pair_puts_the_path_vllm_takes_here_first() -> None:
    nfs = decide_prefetch(vllm.NEWEST, None, "nfs", GiB, 100 * GiB)
    local = decide_prefetch(vllm.NEWEST, None, "xfs", GiB, 100 * GiB)
    assert [name for name, _ in vllm.default_strategies(nfs)] == ["vllm-prefetch", "vllm"]
    assert [name for name, _ in vllm.default_strategies(local)] == ["vllm", "vllm-prefetch"]


def test_flags_are_spelled_as_the_release_takes_them() -> None:
    assert vllm.load_strategy("eager") == "--safetensors-load-strategy eager"
    assert vllm.prefetch_flags(vllm.NEWEST, 16, 16 << 20) == (
        "--safetensors-load-strategy prefetch --safetensors-prefetch-num-threads 16"
    )
    # 0.18 - 0.21 had no such flags: the defaults are all they can run
    assert (
        vllm.prefetch_flags(profile_for_version("0.20.0"), 16, 8 << 20)
        == "--safetensors-load-strategy prefetch"
    )
    assert (
        vllm.multithread(8)
        == '--model-loader-extra-config \'{"enable_multithread_load": true, "num_threads": 8}\''
    )


def test_available_ram_is_positive_with_and_without_the_cgroup_cap() -> None:
    plain = vllm.available_ram_bytes(cgroup=False)
    capped = vllm.available_ram_bytes(cgroup=True)
    assert 0 < capped <= plain


def test_a_vllm_comparison_measures_against_vllms_default_path() -> None:
    from ckptprof.analysis.strategies import compare_strategies
    from ckptprof.session import Session

    def session(strategy: str, wall: float) -> Session:
        from ckptprof.session import RankModel, RankResult, ShardTiming

        shard = ShardTiming(file="a.safetensors", bytes=1_000_000_000, wall_s=wall, read_s=wall)
        rank = RankResult(
            rank=0, device="cpu", wall_s=wall, models=[RankModel(role="target", wall_s=wall, shards=[shard])]
        )
        return Session(
            config={"strategy": strategy, "vllm_release": {"profile": "0.34 and later"}}, ranks=[rank]
        )

    comparison = compare_strategies(
        [session("sglang", 3.0), session("vllm", 2.0), session("vllm-prefetch", 1.0)]
    )
    assert "2.00x faster than vLLM's default (2.000 s)" in comparison.summary
    assert comparison.fastest_sglang == "vllm-prefetch"  # the fastest a vLLM server can select


REAL_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"


@pytest.mark.parametrize(
    ("log", "version"),
    [
        ("vllm-agentic-ai-eks-qwen72b-tp4.log", "0.19.0"),  # "Initializing a V1 LLM engine (v0.19.0) ..."
        ("vllm-guardkit-qwen3-run1.log", "0.13.0+faa43dbf.nv26.01"),  # an NVIDIA container's build
        ("vllm-multiagentsdebate-qwen25-tp4.log", "0.9.2"),
        ("vllm-LLM-Learning-llama3-v0.log", "0.4.1"),
    ],
)
def test_the_release_a_real_servers_log_names(log: str, version: str) -> None:
    assert vllm.version_from_log(str(REAL_LOGS / log)) == version


def test_the_log_is_read_in_chunks_and_its_last_banner_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm, "_LOG_CHUNK", 64)
    log = tmp_path / "server.log"
    # a restart after an upgrade: the second banner is cut by the first chunk's end
    log.write_bytes(
        b"x" * 40 + b"INFO vLLM API server version 0.18.0\n" + b"y" * 30 + b"vLLM API server version 0.22.1\n"
    )
    assert vllm.version_from_log(str(log)) == "0.22.1"
    assert vllm.version_from_log(str(tmp_path / "missing.log")) is None
    (tmp_path / "none.log").write_text("INFO 12-01 10:00:00 nothing here\n")
    assert vllm.version_from_log(str(tmp_path / "none.log")) is None


def test_the_profile_is_chosen_by_flag_then_install_then_log() -> None:
    assert vllm.choose_profile("0.20.0", "0.33.0", "0.18.0")[1] == "--vllm-version 0.20.0"
    assert vllm.choose_profile(None, "0.33.0", "0.18.0")[1] == "the installed vllm 0.33.0"
    profile, why, version = vllm.choose_profile(None, None, "0.9.2")
    assert profile.name == "0.10.2 - 0.16" and version == "0.9.2"
    assert (
        why
        == "the vLLM release the server's log names (0.9.2); older than any release read, replayed as the oldest line"
    )
    assert vllm.choose_profile(None, None, None)[0] is vllm.NEWEST
