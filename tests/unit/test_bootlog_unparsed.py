"""Boot records whose prefix the reader could not read are counted, and above a small share the report says
part of the log was not understood and shows a few (#33 item 3)."""

from __future__ import annotations

import json

from ckptprof.bootlog import analyze_bytes


def test_boot_records_behind_an_unread_prefix_are_counted_and_shown() -> None:
    # GIVEN boot records whose prefix is no form the reader knows (a collector's `host|` then a bare time)
    log = b"".join(
        f"node7|10:00:0{n} TP{n} Load weight begin. avail mem=22.46 GB\n".encode() for n in range(4)
    )
    report = analyze_bytes(log)
    assert report.unparsed_records == 4
    warning = next(w for w in report.warnings if "not understood" in w)
    assert "4 of 4" in warning and "node7|10:00:00 TP0 Load weight begin" in warning
    assert json.loads(json.dumps(report.to_dict()))["unparsed_records"] == 4


def test_a_log_read_whole_has_no_such_warning() -> None:
    log = b"[2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB\n"
    report = analyze_bytes(log)
    assert report.unparsed_records == 0
    assert not any("not understood" in warning for warning in report.warnings)
