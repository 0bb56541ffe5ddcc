"""SGLang release profiles: which line a release belongs to, how the profile is chosen, and what the verdict then
recommends. The boundaries are the releases whose wheels changed the loader (read from each wheel)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.bootlog import analyze_path
from ckptprof.engines.sglang import (
    NEWEST,
    PROFILES,
    choose_profile,
    multithread_extra_config,
    profile_for_version,
    profile_named,
)
from ckptprof.engines.versions import installed_version, parse_version
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

REAL_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"


@pytest.mark.parametrize(
    ("version", "profile", "strategy"),
    [
        ("0.4.6.post5", "0.4.x", "sglang"),
        ("0.5.1", "0.5.1 - 0.5.8", "sglang"),
        ("0.5.8.post1", "0.5.1 - 0.5.8", "sglang"),
        ("0.5.9", "0.5.9", "sglang"),
        ("0.5.10", "0.5.10 - 0.5.12", "sglang-mt"),
        ("0.5.10.post1", "0.5.10 - 0.5.12", "sglang-mt"),
        ("0.5.13", "0.5.13 - 0.5.15", "sglang-mt"),
        ("0.5.15.post1", "0.5.13 - 0.5.15", "sglang-mt"),
        ("0.5.16", "0.5.16 and later", "sglang-mt"),
        ("0.5.23", "0.5.16 and later", "sglang-mt"),
        ("0.6.0rc1", "0.5.16 and later", "sglang-mt"),
    ],
)
def test_a_release_belongs_to_the_line_that_loads_as_it_does(
    version: str, profile: str, strategy: str
) -> None:
    chosen = profile_for_version(version)
    assert (chosen.name, chosen.default_strategy) == (profile, strategy)


def test_release_numbers_compare_as_numbers() -> None:
    assert parse_version("0.5.10") > parse_version("0.5.9") > parse_version("0.5.9rc1")
    assert parse_version("0.4.6.post5") > parse_version("0.4.6")
    with pytest.raises(ValueError, match="not a release number"):
        parse_version("latest")


def test_the_profiles_are_in_release_order_and_the_multithread_default_starts_at_0_5_10() -> None:
    firsts = [parse_version(profile.first) for profile in PROFILES]
    assert firsts == sorted(firsts)
    assert [p.multithread_default for p in PROFILES] == [False, False, False, True, True, True]
    assert [p.sorted_files for p in PROFILES] == [False, False, False, False, True, True]
    assert dict(NEWEST.default_params) == {"num_threads": 8}


def test_the_flag_given_wins_over_the_installed_release_and_the_log() -> None:
    profile, why, version = choose_profile(version="0.5.4", installed="0.5.23", log_loader="multithread")
    assert (profile.name, why, version) == ("0.5.1 - 0.5.8", "--sglang-version 0.5.4", "0.5.4")


def test_the_installed_distribution_is_read_from_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN an sglang 0.5.9 installed (its dist-info only: the package itself is never imported) THEN its line."""
    info = tmp_path / "sglang-0.5.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("sglang") == "0.5.9"
    assert "sglang" not in sys.modules
    profile, why, version = choose_profile(installed=installed_version("sglang"), log_loader="multithread")
    assert (profile.name, why, version) == ("0.5.9", "the installed sglang 0.5.9", "0.5.9")


@pytest.mark.parametrize(
    ("log", "profile", "bar"),
    [
        # PR #7277's TP8 boot: the multithread bar (opted in then, the default since 0.5.10).
        ("sglang-sglang-7277.log", NEWEST.name, "Multi-thread loading shards"),
        # PR #15426's TP1 boot: the single-thread bar, the default up to 0.5.9.
        ("sglang-sglang-15426.log", "0.5.9", "Loading safetensors checkpoint shards"),
    ],
)
def test_a_server_log_picks_the_line_by_its_loaders_bar(log: str, profile: str, bar: str) -> None:
    loader = analyze_path(str(REAL_LOGS / log)).loader
    chosen, why, version = choose_profile(log_loader=loader)
    assert (chosen.name, why, version) == (profile, f"the server log's bar `{bar}`", None)


def test_with_nothing_to_go_by_the_newest_profile_is_used_and_says_so() -> None:
    profile, why, version = choose_profile()
    assert profile is NEWEST and version is None
    assert why.startswith("default, the newest line read (sglang 0.5.23)")


def test_multithread_flags_are_spelled_as_each_line_accepts_them() -> None:
    """From 0.5.10 enable_multithread_load is on already: recommending it would be recommending the default."""
    assert multithread_extra_config(NEWEST, 16) == "--model-loader-extra-config '{\"num_threads\": 16}'"
    old = profile_for_version("0.5.9")
    assert multithread_extra_config(old, 16) == (
        '--model-loader-extra-config \'{"enable_multithread_load": true, "num_threads": 16}\''
    )


def _storage_bound_session(profile_name: str | None) -> Session:
    """A cold 4 GB load spending most of its time in page faults, with the ceilings measured beside it."""
    total = 4 * 10**9
    shard = ShardTiming(
        file="s",
        bytes=total,
        read_s=2.9,
        deserialize_s=0.09,
        h2d_s=0.3,
        h2d_bytes=total,
        wall_s=3.3,
        nonresident_bytes=total,
    )
    session = Session(
        config={"tp": 1, "devices": ["cuda:0"]},
        models=[
            ModelInfo(
                role="target",
                path="/c",
                fs_type="ext4",
                total_bytes=total,
                shards=[ShardInfo("s", total)],
                resident_bytes_before=0,
            )
        ],
        ranks=[
            RankResult(rank=0, device="cuda:0", models=[RankModel(role="target", wall_s=3.3, shards=[shard])])
        ],
        ceilings=Ceilings.from_dict(
            {
                "storage_read_GBps": 1.45,
                "storage_read_1_stream_GBps": 1.4,
                "storage_read_n_streams_GBps": 1.84,
                "storage_streams": 4,
                "page_cache_read_GBps": 7.0,
                "h2d_pageable_GBps": {"cuda:0": 8.7},
                "h2d_pinned_GBps": {"cuda:0": 55.2},
            }
        ),
    )
    if profile_name is not None:
        profile = profile_named(profile_name)
        assert profile is not None
        session.config["sglang_release"] = profile.to_dict("test", None)
    return session


def test_the_verdict_recommends_only_what_the_release_has_and_does_not_already_do() -> None:
    flags = lambda session: [p.flags for p in compute_verdict(session).predictions]  # noqa: E731
    newest = flags(_storage_bound_session(NEWEST.name))
    assert "--weight-loader-prefetch-checkpoints" in newest
    assert "--model-loader-extra-config '{\"num_threads\": 16}'" in newest
    assert not any("enable_multithread_load" in flag for flag in newest)
    prefetch = next(
        p
        for p in compute_verdict(_storage_bound_session(NEWEST.name)).predictions
        if p.flags == "--weight-loader-prefetch-checkpoints"
    )
    assert "turns the default multithread loader off" in prefetch.why
    oldest = flags(_storage_bound_session("0.4.x"))
    assert not any(
        flag.startswith("--weight-loader") or "extra-config" in flag or "fastsafetensors" in flag
        for flag in oldest
    ), oldest
    unknown = flags(_storage_bound_session(None))  # a session from before profiles: every flag, as before
    assert '--model-loader-extra-config \'{"enable_multithread_load": true, "num_threads": 16}\'' in unknown
