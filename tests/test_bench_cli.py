"""Every bench preset through `depthscale bench --preset P --json F`, on its success path,
at a tiny size (the presets' shapes and step counts shrunk in-process; the CLI's code,
its summary line and the JSON are the real ones). No timing is asserted, only that the
command ends well, prints its summary and writes finite, positive figures."""
import dataclasses
import json
import math
import os

import pytest

from depthscale import bench, cli, devices
from depthscale.bench import design as design_bench
from depthscale.bench import mixed, shapes, studies
from depthscale.cli import app

TINY = dict(width=16, depth=1, seq=8, batch=4, heads=2, engine_k=2, sequential_steps=2,
            rounds=1, models_per_chunk=0)


@pytest.fixture
def tiny_presets(monkeypatch, tmp_path):
  for name, p in shapes.PRESETS.items():  # each keeps its grid, dtype and CPU size's use
    monkeypatch.setitem(shapes.PRESETS, name, dataclasses.replace(
        p, **TINY, cpu=dict(width=8, heads=2) if p.cpu else None))
  monkeypatch.setattr(mixed, "MIXED", dataclasses.replace(
      shapes.Preset(**TINY), depth=2, sequential_steps=0))
  monkeypatch.setattr(mixed, "MIXED_DEPTHS", (1, 2))
  monkeypatch.setattr(mixed, "MIXED_SEEDS", (0,))
  monkeypatch.setattr(mixed, "MIXED_LRS", (1e-3, 3e-3))
  monkeypatch.setattr(devices, "probe_size", lambda _platform: 64)
  small = ["grid.depth=[1, 2]", "grid.seed=[0, 1]", "train.steps=40", "eval.size=64",
           "train.warmup=0"]
  monkeypatch.setattr(studies, "SHRINK", {  # depths 1-2 x 2 seeds, 40 steps
      "refill": small + ["train.steps_per_call=20", "checkpoint_every=20", "train.slots=2",
                         "train.stop_every=20"],  # 2 slots
      "halving": small + ["train.steps_per_call=10", "checkpoint_every=20",
                          "train.stop_every=10"]})  # x 3 lrs: the rung at step 10
  # not the split into one device per core: set before JAX starts in this test process,
  # it would give every later test in it 2 devices (tests/test_cli.py tests the split)
  monkeypatch.setattr(app, "split_host_into_cores", lambda: None)
  monkeypatch.setattr(design_bench, "REPLAYS", 4)  # the recorded pool, 4 replays
  monkeypatch.setattr(design_bench, "PLOT", str(tmp_path / "design_replay.png"))


def _positive(x):
  return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.parametrize("preset", bench.names())
def test_each_preset_runs_through_the_cli(preset, tiny_presets, tmp_path, capsys):
  out = tmp_path / "bench.json"
  given = {"models": ["--models", "4"], "devices": ["--devices", "1"]}  # those it reads
  uses = [a for k, v in given.items() if k in bench.get(preset).uses for a in v]
  assert cli.main(["bench", "--preset", preset, "--json", str(out), *uses]) == 0
  last = capsys.readouterr().out.strip().splitlines()[-1]
  assert last.endswith(f"wrote {out}"), last
  got = json.loads(out.read_text())
  if preset == "refill":
    for way in ("static", "continuous"):
      assert _positive(got[way]["wall_s"]) and got[way]["models"] == 4, got[way]
      assert got[way]["budget"] == 4 * 40
    assert got["static"]["model_steps"] == 160 and got["continuous"]["model_steps"] <= 160
    assert got["wall_ratio"] == got["static"]["wall_s"] / got["continuous"]["wall_s"]
    assert f"continuous {got['continuous']['wall_s']:.1f} s" in last
  elif preset == "halving":  # 2 depths x 3 lrs x 2 seeds; per depth: 3 scouts to the rung
    for way in ("full", "halving"):  # (10 steps), the kept one on (40), its 2nd seed (40)
      assert _positive(got[way]["wall_s"]) and got[way]["models"] == 12, got[way]
      assert got[way]["budget"] == 12 * 40
    assert got["full"]["model_steps"] == 480 and got["halving"]["model_steps"] == 2 * 100
    assert got["model_steps_share"] == 200 / 480
    assert set(got["full"]["best_k_star"]) == {"1", "2"}  # JSON keys
    assert got["same_best_k_star"] == (got["full"]["best_k_star"]
                                       == got["halving"]["best_k_star"])
    assert f"halving {got['halving']['wall_s']:.1f} s" in last
  elif preset == "design":  # 4 replays of the recorded pool: the table, the JSON, the plot
    assert got["replays"] == 4 and set(got["rules"]) == {"adaptive", "grid_order", "random",
                                                         "ends"}
    for r in got["rules"].values():
      assert set(r["rmse_by_share"]) == {"0.25", "0.5", "0.75", "1.0"}
      assert 0 < r["share_to_grid"] <= 1 and 0 <= r["verdicts_match"] <= 1
    assert got["plot"].endswith("design_replay.png") and os.path.getsize(got["plot"]) > 0
    assert f"truth slope {got['truth']['slope']:.3f}" in last
  elif preset == "mixed":
    for way in ("compact", "pad", "bucket"):
      assert _positive(got[way]["model_steps_per_s"]), got[way]
      assert f"{way} {got[way]['model_steps_per_s']:.1f}" in last
    assert _positive(got["compact_over_pad"]) and _positive(got["compact_over_bucket"])
    assert got["layers"]["useful"] == (1 + 2) * 2  # depths 1-2, 2 models per depth
    assert got["layers"]["pad"] == 2 * 4           # 4 models padded to depth 2
  else:
    e, s = got["engine"], got["sequential"]
    for x in (e["model_steps_per_s"], e["gflops"], s["model_steps_per_s"], s["gflops"],
              got["engine_over_sequential"], got["matmul_peak_gflops"]):
      assert _positive(x), got
    assert f"engine {e['model_steps_per_s']:.1f} model-steps/s" in last
    assert f"ratio {got['engine_over_sequential']:.2f}" in last


def test_the_paper_preset_runs_its_own_grid_at_the_size_it_names_on_a_cpu(tiny_presets,
                                                                         tmp_path, capsys):
  """No --models or --dtype: the paper's 3 seeds at its one lr, in bfloat16; on a CPU at the
  size its `cpu` field names, said in the log and the JSON."""
  out = tmp_path / "paper.json"
  assert cli.main(["bench", "--preset", "paper", "--json", str(out)]) == 0
  log = capsys.readouterr().out
  got = json.loads(out.read_text())
  assert got["preset"]["models"] == 3 and got["preset"]["grid"]["lrs"] == [1e-4]
  assert got["dtype"]["compute"] == "bfloat16" and got["preset"]["as_defined"] is False
  assert got["preset"]["width"] == 8 and "on a CPU at width 8" in log
  assert "defined: width 16" in log
  assert shapes.PAPER["width"] == 512 and shapes.PAPER["depth"] == 12  # the paper's shape
  assert (shapes.PAPER["seq"], shapes.PAPER["batch"], shapes.PAPER["heads"]) == (128, 128, 8)


def test_a_preset_chunks_its_models_on_a_cpu_only():
  """The medium preset's chunks of 2 are a CPU measurement; on an H200 they ran at 0.45x
  of all models at once (BUILD_NOTES, the first GPU check), so elsewhere none."""
  medium = shapes.PRESETS["medium"]
  assert medium.models_per_chunk == 2
  assert [medium.chunk_on(p) for p in ("cpu", "gpu", "tpu")] == [2, 0, 0]
