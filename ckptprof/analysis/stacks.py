"""Top frames per replay phase from py-spy speedscope profiles (pure: parsed JSON in, counts out)."""

from __future__ import annotations

from typing import Any

# A sample belongs to the phase of the innermost ckptprof function on its stack.
PHASE_MARKERS: tuple[tuple[str, str], ...] = (
    ("fault_in", "read"),
    ("touch_pages", "read"),
    ("read_header_region", "read"),
    ("copy", "h2d"),
    ("get_tensor", "deserialize"),
    ("safe_open", "deserialize"),
    ("narrow", "deserialize"),
    ("_load_shard", "other"),
    ("load_model", "other"),
)


def phase_of(stack_names: list[str]) -> str | None:
    """The phase a Python stack (frame names, root to leaf) is in: its innermost frame that names one, else None.
    The run's py-spy attribution and ``ckptprof watch`` classify with this one rule."""
    for name in reversed(stack_names):  # innermost first
        for marker, phase in PHASE_MARKERS:
            if name == marker or name.endswith("." + marker):
                return phase
    return None


def _short(name: str, limit: int = 120) -> str:
    # C++ template frames run to kilobytes; the head says what the frame is.
    return name if len(name) <= limit else name[: limit - 3] + "..."


def top_frames(speedscope: dict[str, Any], top: int = 5) -> dict[str, list[tuple[str, float]]]:
    """For each phase, the leaf frames sampled most while the rank was in it, with seconds (sample weights)."""
    frames = speedscope.get("shared", {}).get("frames", [])
    names = [
        _short(f"{f.get('name', '?')} ({str(f.get('file', '?')).rsplit('/', 1)[-1]}:{f.get('line', '?')})")
        for f in frames
    ]
    bare = [str(f.get("name", "?")) for f in frames]
    seconds: dict[str, dict[str, float]] = {}
    for profile in speedscope.get("profiles", []):
        samples = profile.get("samples", [])
        # py-spy writes sampled profiles whose weights are seconds (1 / rate each); samples run root to leaf.
        weights = profile.get("weights") or [1.0] * len(samples)
        for stack, weight in zip(samples, weights, strict=False):
            if not stack:
                continue
            phase = phase_of([bare[i] for i in stack if 0 <= i < len(bare)])
            if phase is None:
                continue
            leaf = stack[-1]
            if 0 <= leaf < len(names):
                bucket = seconds.setdefault(phase, {})
                bucket[names[leaf]] = bucket.get(names[leaf], 0.0) + float(weight)
    return {
        phase: [(name, round(sec, 4)) for name, sec in sorted(b.items(), key=lambda kv: -kv[1])[:top]]
        for phase, b in sorted(seconds.items())
    }
