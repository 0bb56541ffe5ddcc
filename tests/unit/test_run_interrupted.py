"""An interrupted replay keeps what it measured and says where it stopped (ckptprof.run.interrupted)."""

from __future__ import annotations

from ckptprof.loader import ranks as ranks_mod
from ckptprof.loader.plan import ReplayPlan
from ckptprof.run.interrupted import keep_partial
from ckptprof.session import ModelInfo, RankResult, Session


def cold_session() -> Session:
    session = Session(config={"cache": "cold"})
    session.models = [ModelInfo(role="target", path="/ckpt", fs_type="ext4", total_bytes=1, shards=[])]
    session.ranks = [RankResult(rank=0, device="cpu")]
    return session


def test_a_warm_pass_cut_short_keeps_the_cold_load_and_says_storages_cost_is_missing() -> None:
    # GIVEN a cold load that finished, and its warm referee interrupted
    session = cold_session()
    keep_partial(session, ReplayPlan(models=[]), "warm pass", ranks_mod.Interrupted([]))
    # THEN the cold load's ranks stand, and the notes say what is missing (not a faithful pass that never ran)
    assert [r.rank for r in session.ranks] == [0]
    assert session.extra["interrupted"]["stage"] == "warm pass"
    assert any("the warm pass was interrupted: the cold load is complete" in n for n in session.notes)
    assert not any("faithful pass" in n for n in session.notes)


def test_a_faithful_pass_cut_short_says_so() -> None:
    session = cold_session()
    keep_partial(session, ReplayPlan(models=[]), "faithful pass", ranks_mod.Interrupted([]))
    assert any(n.startswith("the faithful pass was interrupted") for n in session.notes)
