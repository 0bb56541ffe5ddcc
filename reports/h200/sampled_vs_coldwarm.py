"""The kernel-sampled storage share of SGLang's own load against what a cold/warm pair says (issue 20 item 5).

For each configuration run cold and warm by `campaign.sh OUT sampled` (OUT/sampled-tpT-DEV-{cold,warm}/session.json):
the faithful walls of the slowest rank (median of the passes), (cold - warm) / cold, and the sampled shares of the
cold and the warm faithful passes of that rank. Prints a Markdown table.

Usage: python3 reports/h200/sampled_vs_coldwarm.py OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

from ckptprof.analysis.attribution import sampled_attribution
from ckptprof.session import RankModel, Session


def slowest(session: Session) -> RankModel | None:
    models = [m for r in session.ranks for m in r.models if m.faithful_wall_s]
    return max(models, key=lambda m: m.faithful_wall_s or 0.0, default=None)


def main(out: Path) -> None:
    print(
        "| config | cold faithful s | warm faithful s | (cold - warm) / cold | sampled storage, cold | "
        "sampled page cache / cpu / waiting, cold | sampled storage, warm | points apart |"
    )
    print("|---|---|---|---|---|---|---|---|")
    per_rank: list[tuple[str, Session, Session]] = []
    for cold_dir in sorted(out.glob("sampled-*-cold")):
        warm_dir = cold_dir.with_name(cold_dir.name[: -len("cold")] + "warm")
        try:
            cold, warm = Session.load(cold_dir / "session.json"), Session.load(warm_dir / "session.json")
        except Exception as exc:  # a configuration that did not finish: say so, go on
            print(f"| {cold_dir.name} | not read: {exc} |")
            continue
        c, w = slowest(cold), slowest(warm)
        if c is None or w is None or not c.faithful_wall_s or not w.faithful_wall_s:
            print(f"| {cold_dir.name} | no faithful wall |")
            continue
        paid = (c.faithful_wall_s - w.faithful_wall_s) / c.faithful_wall_s
        cs, ws = c.faithful_sampled_shares or {}, w.faithful_sampled_shares or {}
        storage = cs.get("storage", 0.0)
        rest = " / ".join(f"{100 * cs.get(k, 0.0):.0f}%" for k in ("page_cache", "cpu", "waiting"))
        print(
            f"| {cold_dir.name[len('sampled-') : -len('-cold')]} | {c.faithful_wall_s:.3f} | {w.faithful_wall_s:.3f} | "
            f"{100 * paid:.0f}% | {100 * storage:.0f}% | {rest} | {100 * ws.get('storage', 0.0):.0f}% | "
            f"{100 * (storage - paid):+.0f} |"
        )
        per_rank.append((cold_dir.name[len("sampled-") : -len("-cold")], cold, warm))
    # Every rank, not only the slowest: the warm storage share of each (0% where nothing was fetched).
    print()
    print("| config | cache | sampled storage per rank |")
    print("|---|---|---|")
    for name, cold, warm in per_rank:
        for cache, session in (("cold", cold), ("warm", warm)):
            shares = [
                f"{r.rank}: {100 * (m.faithful_sampled_shares or {}).get('storage', 0.0):.0f}%"
                for r in session.ranks
                for m in r.models
                if m.faithful_sampled_shares is not None
            ]
            print(f"| {name} | {cache} | {', '.join(shares)} |")
    # The copies of SGLang's sequence timed in the faithful pass: their part of the wall, and the verdict's sampled
    # h2d / deserialize from the ticks inside and outside them, beside what the decomposed replay's split would say.
    print()
    print(
        "| config | cache | inside copies (clock) | sampled h2d / deserialize (copy spans) | "
        "same without the spans (decomposed split) |"
    )
    print("|---|---|---|---|---|")
    for name, cold, warm in per_rank:
        for cache, session in (("cold", cold), ("warm", warm)):
            m = slowest(session)
            if m is None or not m.faithful_wall_s:
                continue
            inside = (
                "-" if m.faithful_copy_s is None else f"{100 * m.faithful_copy_s / m.faithful_wall_s:.0f}%"
            )
            with_spans = sampled_attribution(session) or {}
            saved = [(mm, mm.faithful_sampled_copy_shares) for r in session.ranks for mm in r.models]
            for mm, _ in saved:
                mm.faithful_sampled_copy_shares = None
            without = sampled_attribution(session) or {}
            for mm, kept in saved:
                mm.faithful_sampled_copy_shares = kept
            pair = " / ".join(
                f"{100 * d.get(k, 0.0):.0f}%" for d in (with_spans,) for k in ("h2d", "deserialize")
            )
            old = " / ".join(f"{100 * without.get(k, 0.0):.0f}%" for k in ("h2d", "deserialize"))
            print(f"| {name} | {cache} | {inside} | {pair} | {old} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
