"""The calibrated plan: probes (compiled, timed, cached) reused by `run`; the memory fit from
XLA's compiled analysis; the FLOP-model estimate for a device this host lacks."""
import dataclasses
import json
import types

import jax
import numpy as np
import pytest

from depthscale import cli, config
from conftest import planned
from depthscale.core import program
from depthscale.sweep import plan, probe, rates, runner, study as study_lib

SMOKE = "experiments/quickstart.py:smoke"
TINY = ["train.steps=40", "train.steps_per_call=20", "checkpoint_every=20",
        "grid.depth=[1, 2]", "eval.size=64", "wandb.mode=disabled"]


def test_plan_json_fields_and_the_probe_reused_by_run(tmp_path, capsys):
  out = tmp_path / "plan.json"
  assert cli.main(["plan", "--config", SMOKE, "--json", str(out), "--no-progress",
                   *[f"--config.{o}" for o in TINY]]) == 0
  est = json.loads(out.read_text())
  assert est["device"]["kind"] == jax.local_devices()[0].device_kind
  assert est["device"]["count"] == jax.local_device_count()
  (g,) = est["groups"]
  for k in ("id", "models", "compile_s", "step_s", "est_train_s", "memory_bytes"):
    assert k in g
  assert g["models"] == 4 and g["step_s"] > 0 and g["memory_bytes"] > 0
  assert g["est_train_s"] == pytest.approx(g["step_s"] * 40)
  assert est["est_train_s"] == pytest.approx(g["est_train_s"])
  # the same program compiled independently: XLA's memory analysis, as the plan reports
  c = config.load(SMOKE, TINY)
  st = study_lib.resolve(c)
  task, groups = planned(c)
  compiled = program.build(program.Blueprint.of(task, groups[0].specs,
                                                st.train_config(length=16),
                                                st.model_options(), 20),
                           jax.local_devices()).run
  m = compiled.memory_analysis()
  assert g["memory_bytes"] == (m.argument_size_in_bytes + m.output_size_in_bytes
                               - m.alias_size_in_bytes + m.temp_size_in_bytes)
  # run finds the probe (same signature) and uses its rate; its own compile agrees
  rows = runner.run(study_lib.resolve(c), str(tmp_path / "w"), progress=False, report=False,
                    signals=False)
  assert {r["probe_step_s"] for r in rows} == {g["step_s"]}
  assert {r["memory_bytes"] for r in rows} == {g["memory_bytes"]}
  saved = json.loads((tmp_path / "w" / "plan.json").read_text())
  assert [x["id"] for x in saved["groups"]] == [g["id"]]


def fake_group(m, length=8):
  from depthscale.core.ensemble import ModelSpec
  from depthscale.sweep.grid import Cell
  return plan.Group(tuple(Cell(ModelSpec(depth=2, width=32, heads=2, seed=s), length)
                          for s in range(m)), length)


def test_fit_tries_chunks_then_remat_then_splits():
  c = config.defaults()
  # bytes: 1 MB per model resident, plus 4 MB of activations per model run at once
  # (halved by remat)
  def measure(g):
    m = len(g.cells)
    at_once = g.models_per_chunk or m
    return (m + 4 * at_once * (0.5 if g.remat else 1.0)) * 2**20
  seq = lambda n: n
  log = []
  study = types.SimpleNamespace(config=c, seq_len=seq, vocab=0, output_dim=0)
  fits = lambda limit: plan.fit_memory([fake_group(8)], limit * 2**20, measure, study,
                                       log=log.append)
  (g,) = fits(40)
  assert (g.models_per_chunk, g.remat) == (0, "")          # 8 + 32 fits 40
  (g,) = fits(30)
  assert (g.models_per_chunk, g.remat) == (4, "")          # 8 + 16
  (g,) = fits(10.5)
  assert (g.models_per_chunk, g.remat) == (1, "block")     # 8 + 2
  parts = fits(7)                                          # halves of 4: 4 + 2 at chunk 1
  assert [len(p.cells) for p in parts] == [4, 4]
  assert all(p.models_per_chunk == 1 and p.remat == "block" for p in parts)
  assert [x.key for p in parts for x in p.cells] == [x.key for x in fake_group(8).cells]
  with pytest.raises(config.ConfigError, match="plan.device_memory_gb"):
    fits(2.5)  # one model: 1 + 2 MB even with remat


def test_memory_limit_chunks_a_real_group_by_its_compiled_size(tmp_path):
  c = config.load(SMOKE, TINY)
  st = study_lib.resolve(c)
  task, (g,) = planned(c)
  devs = jax.local_devices()[:1]
  assert probe.fit(st, [g], devs) == [g]  # no limit on a CPU: no fit
  whole = probe.measure_memory(st.program(g), devs)
  halves = probe.measure_memory(st.program(dataclasses.replace(g, models_per_chunk=2)), devs)
  assert halves < whole
  c.plan.device_memory_gb = (halves + whole) / 2 / 2**30
  (fit,) = probe.fit(st, [g], devs)
  assert fit.models_per_chunk == 2 and fit.remat == "" and fit.id == g.id


def test_an_adaptive_round_is_fitted_to_the_device_memory_as_the_first_was():
  """A later round of an adaptive design may hold more or deeper models than the first
  (here six at the deepest depth, against the first round's four at the two ends): its
  groups are fitted to the memory of the share that trains them, as plan.json's were,
  not given the first round's chunking (which fit only the first round)."""
  from depthscale.sweep import design_rounds
  c = config.load(SMOKE, TINY + ["grid.seed=[0, 1, 2, 3]", "design.kind='adaptive'",
                                 "design.round_size=6"])
  st = study_lib.resolve(c)
  devs = jax.local_devices()[:1]
  first = design_rounds.first_study(st)
  (g1,) = plan.make_plan(first)
  rows = [dict(depth=x.spec.depth, seed=x.spec.seed, n_star=4, length=x.length)
          for x in first.cells]
  cells = design_rounds.law_cells(st, rows)
  picks = [{"cell": len(cells) - 1}] * 6
  (whole,) = design_rounds._groups(st, cells, picks, devs)  # CPU: no limit
  assert len(whole.cells) == 6 and not whole.models_per_chunk and not whole.remat
  assert {x.spec.seed for x in whole.cells} == {2, 3, 4, 5, 6, 7}  # after the first two
  first_need = probe.measure_memory(first.program(g1), devs)
  need = probe.measure_memory(st.program(whole), devs)
  assert first_need < need
  c.plan.device_memory_gb = limit = (first_need + need) / 2 / 2**30
  assert probe.fit(first, [g1], devs) == [g1]  # the first round fits whole
  fitted = design_rounds._groups(st, cells, picks, devs)
  assert fitted != [whole]
  assert [x.key for g in fitted for x in g.cells] == [x.key for x in whole.cells]
  for g in fitted:
    assert probe.measure_memory(st.program(g), devs) <= limit * 2**30


def test_no_probe_prices_a5_depth_on_an_h100_at_its_measured_rates(tmp_path, capsys):
  """`plan --device h100` of a5_depth: each group's FLOPs at the bf16 peak times the
  fraction measured for its class (sweep/rates.py), within 25% of the probed plan of the
  same code (238.2 H100-hours, issue 48); every row says its s/step is estimated, and from
  which measurement."""
  out = tmp_path / "p.json"
  capsys.readouterr()
  assert cli.main(["plan", "--no-probe", "--device", "h100", "--config",
                   "experiments/a5_depth.py", "--json", str(out)]) == 0
  printed = capsys.readouterr().out
  est = json.loads(out.read_text())
  c = config.load("experiments/a5_depth.py")
  task, groups = planned(c)
  for g, row in zip(groups, est["groups"]):
    flops = plan.group_cost(g, task.seq_len(g.length), 128, 1, 4, task.output_dim(128))[0]
    r = rates.rate("h100", "bfloat16", 512, g.padded_shape()[0], 3 * 128 * 128, 0.4)
    assert row["step_s"] == pytest.approx(flops / (989e12 * r.fraction))
    assert row["step_source"].startswith("estimated: ") and "on an H100" in row["step_source"]
  probed_h = 238.2
  assert abs(est["est_train_s"] / 3600 / probed_h - 1) <= 0.25
  assert "s/step estimated:" in printed and "a5_depth depth 12" in printed
  assert cli.main(["plan", "--no-probe", "--device", "v100", "--config",
                   "experiments/a5_depth.py"]) == 2
  assert "valid: h100" in capsys.readouterr().err


def test_measured_rates_predict_a_depth_left_out():
  """Each a5_depth depth priced from the others alone (leave one out): the sweep's total
  comes within 25% of the measured one, so the classes carry to shapes not measured."""
  a5 = [m for m in rates.MEASURED if m.name.startswith("a5_depth")]
  assert len(a5) == 7
  total_est = 0.0
  for m in a5:
    others = tuple(x for x in rates.MEASURED if x is not m)
    r = rates.rate("h100", "bfloat16", m.width, m.depth, m.models * m.batch * m.seq, 0.4,
                   measured=others)
    flops = m.models * plan.step_flops(m.depth, m.width, 1, m.seq, m.batch, out_dim=m.out_dim)
    total_est += rates.step_seconds(r, flops, 989e12)
  total = sum(m.step_s for m in a5)
  assert abs(total_est / total - 1) <= 0.25, (total_est, total)


def test_a_device_without_measured_rates_falls_back_to_plan_mfu_and_says_so():
  r = rates.rate("a100", "bfloat16", 512, 12, 3 * 128 * 128, 0.4)
  assert r.fraction == 0.4 and r.floor_s == 0.0 and "plan.mfu 0.4" in r.source
  small = rates.rate("h100", "float32", 32, 2, 8 * 16 * 17, 0.4)  # the hopper floor
  assert small.floor_s == pytest.approx(0.35 / 300)
  assert rates.step_seconds(small, 1.0, 67e12) == small.floor_s  # launch-bound


@pytest.mark.parametrize("layout", ["pad", "compact"])
def test_the_probe_times_the_program_that_trains(layout):
  """The probe and train_group build one group's program through the same builder
  (core/program.py): their lowered programs have the same fingerprint."""
  from depthscale.sweep.train_group import train_group
  c = config.load(SMOKE, TINY + ["grid.depth=[1, 2]", "grid.seed=[0]",
                                 f"plan.strategy='{layout}'"])
  st = study_lib.resolve(c)
  (g,) = plan.make_plan(st)
  assert g.layout == layout
  devs = jax.local_devices()[:1]
  probed = probe.of_group(st, g, devs, use_cache=False)
  res = train_group(st.task, g.specs, st.train_config(g), steps_per_call=c.train.steps_per_call,
                    eval_size=8, model_options=st.model_options(g), progress=False,
                    devices=devs)
  assert len(probed.fingerprint) == 16 and res.fingerprint == probed.fingerprint


def test_a_program_built_again_is_neither_traced_nor_compiled_again():
  """program.build of an equal Blueprint again (as `run` does after the probe): JAX
  neither traces, lowers nor compiles (compiled.kept_function, compile_lowered), the
  executable is the first one and its compile cost is the first build's, tracing
  included. Another train config is a new function: traced and compiled."""
  from depthscale import tasks
  from depthscale.core import train
  from depthscale.core.ensemble import ModelSpec
  events = []

  def listen(event, secs, fun_name=None, **_):
    if fun_name == "run":  # the train function's name (core/program.py)
      events.append((event.rsplit("/", 1)[-1], secs))
  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    task = tasks.make("word_problem", group="S3")
    tcfg = train.TrainConfig(batch_size=4, length=4, total_steps=8)
    bp = program.Blueprint.of(task, [ModelSpec(1, 16, 2, seed=3)], tcfg, None, 4)
    first = program.build(bp)
    traced = [s for e, s in events if e == "jaxpr_trace_duration"]
    assert len(traced) == 1 and first.compile_cost_s > traced[0]
    events.clear()
    again = program.build(dataclasses.replace(bp, models=(ModelSpec(1, 16, 2, seed=4),)))
    assert events == []  # seeds are data: nothing traced, lowered or compiled
    assert again.run is first.run and again.compile_cost_s == first.compile_cost_s
    other = program.build(dataclasses.replace(
        bp, tcfg=dataclasses.replace(tcfg, total_steps=9)))
    assert other.run is not first.run
    assert [e for e, _ in events].count("jaxpr_trace_duration") == 1
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)


def test_a_program_of_fewer_slots_traces_the_model_once(monkeypatch):
  """A queue's program rebuilt with fewer slots (one padded shape, 3 models then 2) traces
  one model's step once for both (core/program._one_step, kept and jitted inline), and
  each program is the one built from the step vmapped as it is, without that: the same
  fingerprint (the lowered text's)."""
  from depthscale import tasks
  from depthscale.core import compiled, train
  from depthscale.core.ensemble import ModelSpec
  make_step, traced = train.make_step, []

  def counted(*args):
    step = make_step(*args)
    return lambda *x: traced.append(1) or step(*x)  # called once per trace
  monkeypatch.setattr(train, "make_step", counted)
  task = tasks.make("word_problem", group="S3")
  tcfg = train.TrainConfig(batch_size=4, length=4, total_steps=13)  # a key of its own
  specs = [ModelSpec(1, 16, 2, seed=s) for s in range(3)]
  bp = program.Blueprint.of(task, specs, tcfg, None, 4)
  fewer = dataclasses.replace(bp, models=tuple(specs[:2]))
  three, two = program.build(bp), program.build(fewer)
  assert (len(three.specs), len(two.specs), three.cfg) == (3, 2, two.cfg)
  assert len(traced) == 1
  compiled.clear()  # the reference: the step vmapped as made, traced for each program
  monkeypatch.setattr(program, "_one_step", lambda *args: make_step(*args))
  assert program.build(bp).fingerprint == three.fingerprint
  assert program.build(fewer).fingerprint == two.fingerprint


def test_an_evaluation_of_fewer_models_traces_the_model_once(monkeypatch):
  """metrics.make_evaluate's `one`, jitted inline: evaluating 3 models and then 2 of one
  padded shape traces one model's evaluation once, and the first two models' numbers
  are those they got among the 3."""
  from depthscale import tasks
  from depthscale.core import metrics, train
  from depthscale.core.ensemble import ModelSpec
  loss, traced = metrics.per_token_loss, []
  monkeypatch.setattr(metrics, "per_token_loss",
                      lambda *a: traced.append(1) or loss(*a))  # once per trace of `one`
  task = tasks.make("word_problem", group="S3")
  specs = [ModelSpec(1, 16, 2, seed=s) for s in range(3)]
  tcfg = train.TrainConfig(batch_size=4, length=4, total_steps=8)
  cfg = program.model_config(task, specs, tcfg)
  evaluate = metrics.make_evaluate(task, cfg)
  batch = metrics.held_out(task, 4, 16)
  got = {}
  for m in (3, 2):
    state, _, arch = program.init_inputs(specs[:m], cfg, tcfg, jax.local_devices()[:1])
    got[m] = evaluate(state.params, arch, batch)
  assert len(traced) == 1
  for key in ("loss", "per_position_acc"):
    np.testing.assert_allclose(got[2][key], got[3][key][:2], rtol=1e-6, err_msg=key)


@pytest.mark.parametrize("devices,groups,share", [
    (4, [3, 3, 3, 3], 1),  # 4 one-device shares side by side, no filler copy
    (2, [3, 3], 1),        # tests/test_devices.py's run: 2 shares of 1
    (8, [6], 8),           # one group: every device on it (2 filler copies)
    (4, [4], 4),           # one group of 4: one model per device
    (4, [4, 4], 4),        # 2 groups of 4: 2 shares of 2 tie with 1 of 4: the larger
    (4, [5, 3], 2),        # makespan 3 on 2 shares of 2 (2 fillers) or 1 of 4 (4)
    (1, [3, 5], 1)])
def test_devices_are_dealt_into_shares_with_the_shortest_makespan(devices, groups, share):
  """plan.share_size against makespans counted by hand: a share of s devices trains a
  group of M models in ceil(M / s) model-steps per step, n_devices / s shares pull the
  groups largest first; ties go to fewer filler copies, then larger shares."""
  assert plan.share_size(devices, groups) == share
