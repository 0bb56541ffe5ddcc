"""The rank count is held to what the machine can hold before a rank is spawned (issue #32 item 7)."""

from __future__ import annotations

import pytest

from ckptprof.errors import UsageError
from ckptprof.run.capacity import CPU_RANK_BYTES, CUDA_RANK_BYTES, HostLimits, check_spawn, max_ranks

GB = 10**9


def test_memory_bounds_the_count_with_a_tenth_kept_free() -> None:
    most, why = max_ranks(HostLimits(available_bytes=10 * GB, tasks_left=None, cores=2), CPU_RANK_BYTES)
    assert most == int(9 * GB) // CPU_RANK_BYTES
    assert "memory available" in why


def test_a_pids_limit_binds_when_it_is_the_tighter() -> None:
    # GIVEN a container that allows 100 more tasks, each rank running ~8 loader threads + one per core + 2
    most, why = max_ranks(HostLimits(available_bytes=100 * GB, tasks_left=100, cores=4), CPU_RANK_BYTES)
    assert most == 100 // (8 + 4 + 2)
    assert "tasks" in why


def test_nothing_known_refuses_nothing() -> None:
    assert max_ranks(HostLimits(None, None, 2), CPU_RANK_BYTES) == (None, "")
    check_spawn(10**6, "cpu", HostLimits(None, None, 2))


def test_cpu_ranks_are_held_to_the_cpu_figure_and_cuda_ranks_to_the_cuda_one() -> None:
    limits = HostLimits(available_bytes=10 * GB, tasks_left=None, cores=2)
    fits_cpu = int(9 * GB) // CPU_RANK_BYTES
    check_spawn(fits_cpu, "cpu", limits)
    with pytest.raises(UsageError, match=f"at most {int(9 * GB) // CUDA_RANK_BYTES} rank"):
        check_spawn(fits_cpu, ("cuda:0",), limits)
    with pytest.raises(UsageError, match=f"--tp {fits_cpu + 1}: this machine can hold at most {fits_cpu} "):
        check_spawn(fits_cpu + 1, "cpu", limits)
