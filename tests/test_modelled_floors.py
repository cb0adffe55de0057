"""Modelled floors (lnbench/modelled/floors.py) on hand-made launches and targets: each floor's formula, the tail
when workgroups do not divide over the CUs, the hot/cold memory floor, occupancy limits, and what is left out
when a figure is not published."""
import dataclasses

import pytest

from lnbench import settings as cfg
from lnbench.modelled.floors import Launch, floors, occupancy
from lnbench.modelled.targets import Target, all_targets

T = Target(name="t", arch="gfx942", cus=4, clock_mhz=1000.0, hbm_gbps=1000.0, lds_kib=64.0, simds=4, wave_slots=8,
           vgprs=512, sgprs=800, llc_mib=1.0, llc_gbps=4000.0, lds_bytes_per_clk=128.0, simd_lanes=16)


def launch(**kw):
    base = dict(workgroups=4, waves_per_group=4, wave_instructions={"valu": 1600, "salu": 160},
                unique_bytes=1_000_000, lds_bank_cycles=0, vgprs=64, sgprs=32)
    return Launch(**{**base, **kw})


def test_memory_floor_cold_uses_hbm_and_hot_uses_the_llc_when_the_working_set_fits():
    assert floors(launch(), T, "cold").memory_us == pytest.approx(1.0)           # 1e6 B / 1e12 B/s
    assert floors(launch(), T, "hot").memory_us == pytest.approx(0.25)
    big = launch(unique_bytes=4 * 2 ** 20)                  # 3 MiB beyond the 1 MiB cache come from HBM at least
    assert floors(big, T, "hot").memory_us == pytest.approx(3 * 2 ** 20 / 1e12 * 1e6)
    l2 = dataclasses.replace(T, l2_mib=2.0)                 # fits the L2: its bandwidth is not published
    f = floors(launch(), l2, "hot")
    assert f.memory_us is None and any("fits the L2" in n for n in f.notes)
    no_bw = dataclasses.replace(T, llc_gbps=None)
    f = floors(launch(), no_bw, "hot")
    assert f.memory_us is None and any("not published" in n for n in f.notes)


def test_valu_floor_counts_the_busiest_simd_and_the_tail_of_workgroups():
    # 4 workgroups on 4 CUs: one each; its 4 waves on 4 SIMDs; 100 VALU per wave × 4 clocks = 400 clocks
    assert floors(launch(), T, "cold").issue_us["valu"] == pytest.approx(0.4)
    # 5 workgroups: one CU runs two, so 8 waves on 4 SIMDs: 2 × 100 × 4 clocks
    five = launch(workgroups=5, wave_instructions={"valu": 2000})
    assert floors(five, T, "cold").busiest_cu_workgroups == 2
    assert floors(five, T, "cold").issue_us["valu"] == pytest.approx(0.8)


def test_classes_without_a_published_rate_are_left_out_and_said_so():
    f = floors(launch(), T, "cold")
    assert "salu" not in f.issue_us and any("salu" in n and "no published issue rate" in n for n in f.notes)
    f = floors(launch(), dataclasses.replace(T, issue={"salu": 1.0}), "cold")
    assert f.issue_us["salu"] == pytest.approx(160 / 4 / 1e3)                      # 40 clocks at 1 GHz


def test_lds_floor_scales_counted_bank_clocks_to_the_target_bandwidth():
    l = launch(lds_bank_cycles=4000)
    assert floors(l, T, "cold").lds_us == pytest.approx(1.0)
    assert floors(l, dataclasses.replace(T, lds_bytes_per_clk=256.0), "cold").lds_us == pytest.approx(0.5)


def test_bound_is_the_largest_floor_and_names_it():
    f = floors(launch(lds_bank_cycles=8000), T, "cold")
    assert (f.bound_by, f.bound_us) == ("lds", pytest.approx(2.0))
    f = floors(launch(), T, "cold")
    assert (f.bound_by, f.bound_us) == ("memory", pytest.approx(1.0))


def test_occupancy_is_limited_by_registers_lds_or_slots():
    assert occupancy(launch(vgprs=64), T).waves_per_simd == 8 and occupancy(launch(vgprs=64), T).limiter == "slots"
    o = occupancy(launch(vgprs=130), T)                                              # 136 allocated: 3 waves
    assert (o.waves_per_simd, o.limiter) == (3, "vgprs")
    o = occupancy(launch(lds_alloc=40 * 1024), T)
    assert (o.workgroups_per_cu, o.limiter) == (1, "lds")


def test_floors_of_a_real_emulated_launch_on_every_packaged_target():
    pytest.importorskip("tinygrad")
    from lnbench.flydsl.inspect import execute_variant
    (k,) = execute_variant("fwd", "bf16", 8, 256, "pointer", "gfx942")
    for t in all_targets(cfg.load_config()).values():
        f = floors(k.as_launch(), t, "cold")
        assert f.memory_us == pytest.approx((sum(k.unique_bytes())) / (t.hbm_gbps * 1e9) * 1e6)
        assert f.issue_us["valu"] > 0 and f.bound_us == max(f.candidates.values())
