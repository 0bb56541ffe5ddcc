"""GPU memory per device in a watch session, from a fake NVML provider: per device its used bytes at the start, at the
end, at their peak and at each change; per rank process NVML's peak for its pid; on a host without a GPU, "no GPU"
rather than zeros."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ckptprof.render.watch_report import render
from ckptprof.watch import gpu
from ckptprof.watch.counters import ProcCounters
from ckptprof.watch.gpu import DeviceReading, GpuTracker, choose
from ckptprof.watch.procs import RankProcess, classify_process
from ckptprof.watch.record import RankTrack, WatchRecord
from ckptprof.watch.view import lines
from ckptprof.watch.watcher import Watcher, attach

GB = 10**9


class FakeProvider:
    """Two devices; device 0 fills as rank pid 4242 loads onto it (its readings in turn, the last one repeated)."""

    source = "fake-nvml"

    def __init__(self, used0: list[int]) -> None:
        self._used0: Iterator[int] = iter(used0)
        self._last = used0[0]
        self.closed = False

    def read(self) -> list[DeviceReading]:
        self._last = next(self._used0, self._last)
        return [
            DeviceReading(0, "H200", self._last, 141 * GB, {4242: self._last - GB}),
            DeviceReading(1, "H200", GB, 141 * GB, {}),
        ]

    def close(self) -> None:
        self.closed = True


def record_with(tracker: GpuTracker) -> WatchRecord:
    role = classify_process("sglang::schedul", ["sglang::scheduler_TP0"])
    assert role is not None
    c = ProcCounters(0.0, 0, 0, 0, 0, 0.0, 0.0, 1, 1)
    track = RankTrack(RankProcess(4242, role, 0.0), 0.0, c, c, [c, c])
    return WatchRecord(
        pid=1, command=[], started_by_watch=True, interval_s=0.5, started_at="t", ranks=[track], gpu=tracker
    )


def test_each_device_keeps_its_start_end_peak_and_changes() -> None:
    tracker = GpuTracker(FakeProvider([GB, 5 * GB, 5 * GB, 9 * GB, 7 * GB]), None)
    for t in (0.0, 0.5, 1.0, 1.5, 2.0):
        tracker.sample(t)
    d0, d1 = tracker.to_dict()["devices"]
    assert (d0["used_at_start"], d0["used_at_end"], d0["peak_used_bytes"]) == (GB, 7 * GB, 9 * GB)
    assert d0["points"] == [[0.0, GB], [0.5, 5 * GB], [1.5, 9 * GB], [2.0, 7 * GB]]  # only where it changed
    assert d1["points"] == [[0.0, GB]] and d1["total_bytes"] == 141 * GB
    assert tracker.peak_by_pid == {4242: 8 * GB}


def test_the_session_view_and_report_show_the_devices_and_the_ranks_peak() -> None:
    tracker = GpuTracker(FakeProvider([GB, 9 * GB]), None)
    tracker.sample(0.0)
    tracker.sample(0.5)
    record = record_with(tracker)
    doc = record.to_dict()
    assert doc["gpus"]["source"] == "fake-nvml" and doc["gpus"]["note"] is None
    assert doc["ranks"][0]["gpu_peak_bytes"] == 8 * GB
    assert "  GPU memory used: 0 9.00 GB, 1 1.00 GB of 141.00 GB each" in lines(record, 1.0, None)
    table = render(doc, "table")
    assert "GPU memory (GPU memory per device, from fake-nvml" in table
    assert "GPU peak" in table and "8.00 GB" in table


def test_without_a_gpu_the_session_says_no_gpu_rather_than_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu.NvmlProvider, "open", classmethod(lambda cls: None))
    monkeypatch.setattr(gpu, "gpu_present", lambda: False)
    tracker = GpuTracker(*choose())
    tracker.sample(0.0)
    doc = record_with(tracker).to_dict()
    assert doc["gpus"] == {"source": None, "note": "no GPU", "devices": []}
    assert doc["ranks"][0]["gpu_peak_bytes"] is None
    assert "GPU memory: no GPU" in render(doc, "table") and "GPU peak" not in render(doc, "table")
    # a GPU the driver shows but NVML cannot read: said so, with the fix
    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    assert choose() == (None, gpu.NOT_SAMPLED)


def test_the_watcher_samples_the_provider_from_start_to_end() -> None:
    fake = FakeProvider([GB, 2 * GB, 3 * GB])
    watcher = Watcher(attach(os.getpid()), interval_s=0.05, timeout_s=0.4, gpu=GpuTracker(fake, None))
    record = watcher.run()
    assert record.end_reason == "timeout"
    d0 = record.to_dict()["gpus"]["devices"][0]
    assert d0["points"][0] == [0.0, GB]  # sampled as watch began
    assert (d0["used_at_end"], d0["peak_used_bytes"]) == (3 * GB, 3 * GB)
    assert fake.closed
