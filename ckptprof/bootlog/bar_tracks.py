"""Progress bars in a boot: which phase each bar belongs to, its newest frame, and when it last moved.

A bar is tqdm's line, redrawn in place; its frames carry no time, so the log's clock says when a bar moved. Both
engines draw bars on global rank 0 only. A bar whose phase no record opened (vLLM V1 logs none when graph capture
begins, an excerpt may start inside a load) opens that phase itself, provisionally.
"""

from __future__ import annotations

import re

from ckptprof.bootlog.bars import bar_kind
from ckptprof.bootlog.boot import Boot
from ckptprof.bootlog.parse import Bar
from ckptprof.bootlog.state import BarTrack
from ckptprof.bootlog.words import PhaseKey

MAX_BARS_KEPT = 64
# The phase each bar opens when a log has bars but no boot records (a CI log, a worker's own output).
_BAR_SLOTS = {"load-weights": "load", "cuda-graph": "graph"}
_DESC_DETAIL_RE = re.compile(r"\s*\(.*\)\s*$")


def on_bar(boot: Boot, bar: Bar) -> None:
    """A bar frame: a new bar (or a bar drawn again from the start), or the bar it continues moving on."""
    desc, phase = _bar_identity(boot, bar)
    identity = (desc, phase)
    track = boot.current_bars.get(identity)
    if track is None or bar.total != track.total or bar.done < track.done:
        kind = bar_kind(bar.desc)
        if kind is not None and kind.engine is not None:
            boot.evidence[kind.engine] += 1  # a new bar only one engine draws, as a record only it writes
        if kind is not None and kind.phase == "ready":
            boot.mark_served()
        track = BarTrack(desc, phase, bar, boot.clock.now)
        boot.bars.append(track)
        del boot.bars[:-MAX_BARS_KEPT]
        if len(boot.current_bars) > 4 * MAX_BARS_KEPT:
            boot.current_bars.clear()
        boot.current_bars[identity] = track
        return
    if bar.done > track.done:
        track.moved_at = boot.clock.now
    if not bar.rate_text and track.last.rate_text:
        # A frame cut inside its timings (an excerpt's last line) keeps the bar's speed as its last frame showed it.
        bar = bar._replace(rate_text=track.last.rate_text)
    track.last = bar


def _bar_identity(boot: Boot, bar: Bar) -> tuple[str, PhaseKey | None]:
    """(normalised description, owning phase), cached until the next phase event: a log can hold
    millions of frames and the answer only changes when a phase begins or ends."""
    if boot.bar_cache_seq != boot.clock.seq or len(boot.bar_cache) > 1024:
        boot.bar_cache.clear()
        boot.bar_cache_seq = boot.clock.seq
    cache_key = (bar.desc, bar.rank)
    identity = boot.bar_cache.get(cache_key)
    if identity is None:
        desc = bar_desc(bar.desc)
        identity = (desc, _phase_for_bar(boot, bar))
        _note_model_loader(boot, bar, identity[1])
        # Opening a phase moved the sequence: cache under the new one.
        if boot.bar_cache_seq != boot.clock.seq:
            boot.bar_cache.clear()
            boot.bar_cache_seq = boot.clock.seq
        boot.bar_cache[cache_key] = identity
    return identity


def _note_model_loader(boot: Boot, bar: Bar, key: PhaseKey | None) -> None:
    """A load-weights bar names its model's loader: the target and a draft may load through different ones
    (SGLang's --speculative-draft-load-format)."""
    kind = bar_kind(bar.desc)
    if kind is not None and kind.loader is not None and key is not None and key[0] == "load-weights":
        model = key[1]
        if model:
            boot.model_loaders[model] = kind.loader


def _phase_for_bar(boot: Boot, bar: Bar) -> PhaseKey | None:
    """The phase a bar belongs to: the one open on the rank drawing it (global rank 0 under SGLang)."""
    kind = bar_kind(bar.desc)
    if kind is None:
        return boot.current_key()
    if kind.loader is not None:
        boot.loader = kind.loader
    name = kind.phase
    rank = boot.ranks.get(bar.rank or boot.lead_rank or "")
    candidates = [key for key in rank.open.values() if key[0] == name] if rank else []
    if not candidates:
        candidates = [key for key in boot.phases if key[0] == name]
    if candidates:
        return max(candidates, key=lambda key: boot.phases[key].order)
    if name in _BAR_SLOTS and not boot.ready and (kind.opens_phase or boot.record_phases == 0):
        # No record opened this phase (vLLM V1 logs none when capture begins; an excerpt or a CI log may
        # hold the bar alone): the bar is the evidence, and its time the phase's start.
        slot = _BAR_SLOTS[name]
        label = bar.rank or boot.lead_rank or ""
        model = boot.model_for(boot.rank_state(label), slot, name, "nth")
        # A bar met mid-way (its first frame in the log has counted some) shows the phase was already under way:
        # not progress after a crash logged above it. tqdm draws a last frame as a crash unwinds the loader's loop
        # (vllm#23025: a worker's KeyError in load_weights, then the bar's only frame, 7/15). So is the bar of the
        # step the rank's traceback above names: the step that crashed, its bar printed late (a paste of stderr
        # after stdout: SafeAILab/EAGLE#130's draft load, its 0/1 frame after the KeyError), whose model the
        # traceback's frames say.
        crashed = boot.failures.traceback_of(label)
        if crashed is not None and crashed.frame_phase != name:
            crashed = None
        if crashed is not None and crashed.frame_model is not None:
            model = crashed.frame_model
        key = (name, model, None)
        boot.begin(
            label, slot, key, boot.clock.now, provisional=True, progress=bar.done == 0 and crashed is None
        )
        if not label:
            boot.untagged_bar_phases.append(key)
        if not kind.opens_phase:
            boot.word_bar_phases.append((key, label, slot))
        return key
    return None


def continues(frame: Bar, later: Bar) -> bool:
    """Whether ``later`` redraws the bar that ``frame`` drew, moved on or not. Descriptions that differ only in
    their parenthesised detail name one bar ("Capturing batches (bs=8 avail_mem=7.19 GB)"), as they do for
    ``_bar_identity``."""
    return (
        later.total == frame.total
        and later.done >= frame.done
        and later.rank == frame.rank
        and (later.desc == frame.desc or bar_desc(later.desc) == bar_desc(frame.desc))
    )


def bar_desc(desc: str) -> str:
    """A bar's description without its parenthesised detail, which changes from frame to frame."""
    # No detail to take off (the pattern needs one): most bars, and a sub costs ten times more than this test.
    if "(" not in desc:
        return desc
    return _DESC_DETAIL_RE.sub("", desc) or desc
