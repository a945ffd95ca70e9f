"""What a build and a warm-up may use, and the embedded server's settings sized from the
machine (internal.vectord.storage.memory_plan, internal.pg.embedded: no I/O but /proc)."""

from __future__ import annotations

from internal.pg import embedded, memory
from internal.vectord.storage import memory_plan

MIB = 2**20
GIB = 2**30


def test_a_vector_is_half_the_bytes_in_float16() -> None:
    assert memory_plan.vector_bytes(384, "float32") == 1544
    assert memory_plan.vector_bytes(384, "float16") == 776


def test_a_build_gets_its_graph_within_half_the_memory_available() -> None:
    # 1M x 384 float16 at m 16: the graph (~1.3 GB with its bookkeeping) fits in 8 GB free.
    want = memory_plan.build_memory(1_000_000, 384, "float16", 16, 8 * GIB)
    assert 1.0 * GIB < want < 1.6 * GIB
    assert memory_plan.build_memory(1_000_000, 384, "float32", 16, 8 * GIB) > want
    # Capped by half of what is free; never below PostgreSQL's own default.
    assert memory_plan.build_memory(1_000_000, 384, "float32", 16, 2 * GIB) == GIB
    assert memory_plan.build_memory(10, 384, "float16", 16, 8 * GIB) == 64 * MIB
    assert memory_plan.setting(1170 * MIB + 5) == "1170MB"


def test_a_warm_up_reads_its_budget_or_half_the_memory_available() -> None:
    assert memory_plan.warm_budget(300, 8 * GIB) == 300 * MIB
    assert memory_plan.warm_budget(0, 8 * GIB) == 4 * GIB


def test_the_planner_expects_three_quarters_of_the_machine_in_cache() -> None:
    total, _ = memory.machine()
    got = int(embedded.machine_settings()["effective_cache_size"].removesuffix("MB"))
    assert got == max(128, int(total * 0.75) // MIB)
