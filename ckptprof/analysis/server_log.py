"""The server's own load-weights time (from ``run --log``) beside the replay's, per model: computed once here for
every view (terminal, Markdown, HTML, and the JSON's ``extra.server_vs_replay``). Pure: reads a Session."""

from __future__ import annotations

from ckptprof.session import Session
from ckptprof.session_config import ServerVsReplay

KEY = "server_vs_replay"
__all__ = ["KEY", "ServerVsReplay", "server_log_heading", "server_vs_replay"]


def server_vs_replay(session: Session) -> list[ServerVsReplay] | None:
    """One row per load-weights phase the server's log shows; None when the run read no log (``--log``)."""
    log = session.server_log
    if log is None:
        return None
    rows = []
    for phase in log.load_weights:
        role = phase.model or "target"
        replay = max((m.wall_s for r in session.ranks for m in r.models if m.role == role), default=None)
        server = phase.seconds
        rows.append(
            ServerVsReplay(
                model=role,
                server_s=server,
                server_ranks=phase.ranks,
                replay_s=replay,
                ratio=round(server / replay, 4) if server and replay else None,
            )
        )
    return rows


def server_log_heading(session: Session) -> str | None:
    """'server log PATH (sglang, state ready); the log set the path: target replayed with ...'; None without --log."""
    log = session.server_log
    if log is None:
        return None
    head = f"server log {log.path} ({log.framework}, state {log.state})"
    followed = [
        f"{role} replayed with {strategy} (its load-weights bar)"
        for role, strategy in (("target", log.strategy_from_log), ("draft", log.draft_strategy_from_log))
        if strategy
    ]
    if followed:
        head += "; the log set the path: " + ", ".join(followed)
    return head
