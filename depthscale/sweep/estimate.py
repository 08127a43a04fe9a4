"""Price a plan: per group, compile seconds, seconds per step, training time and memory
per device. Probed: each distinct program compiled and timed on the devices JAX sees
(sweep/probe.py). Not probed: the planner's FLOPs (plan.group_cost) at a known device's
table peak times the fraction measured for the nearest shape class (sweep/rates.py), or
at this CPU's measured matmul peak times plan.mfu; plus plan.compile_s and the memory
formula. Every group row says whether its s/step was measured or estimated, and from what. Takes the Study; prints nothing (the CLI
formats).
"""
from __future__ import annotations

from depthscale import devices as devices_lib
from depthscale.core import lengths
from depthscale.model import transformer
from depthscale.sweep import plan, probe, rates


def _row(study, g, platform: str):
  c = study.config
  computed, useful = plan.group_cost(g, study.seq_len(g.length), c.train.batch_size,
                                     c.train.steps, c.model.mlp_ratio, study.output_dim)
  return dict(id=g.id, models=len(g.cells), length=g.length, shape=list(g.padded_shape()),
              computed_flops=computed, useful_flops=useful,
              models_per_chunk=g.models_per_chunk,
              remat=transformer.remat_policy(study.model_options(g)["remat"], platform),
              layout=g.layout)


def _flops(study, g, seq: int) -> float:
  c = study.config
  return plan.group_cost(g, seq, c.train.batch_size, 1, c.model.mlp_ratio,
                         study.output_dim)[0]


def by_bucket(study, g, step_s: float) -> list[dict]:
  """Group g's s/step at each length bucket its steps may run at (core/lengths.py
  length_buckets: a curriculum's stages, growth past the grid), from `step_s` at the
  bucket of the grid's last stage (lengths.timed_positions: what a probe times) scaled by
  the planner's FLOPs; one row without buckets."""
  tcfg = study.train_config(g)
  ref = _flops(study, g, lengths.timed_positions(study.task, tcfg))
  return [dict(positions=t, step_s=step_s * _flops(study, g, t) / ref)
          for t in lengths.length_buckets(study.task, tcfg)]


def _with_buckets(study, g, row: dict) -> dict:
  """The row with its s/step per bucket and, with growth, its training time if every
  step ran at length_max (est_train_s prices every step at the grid's last stage: no
  growth, every curriculum stage at the grid's length)."""
  rows = by_bucket(study, g, row["step_s"])
  out = dict(row, buckets=rows)
  if study.train_config(g).length_max:
    out["est_train_s_grown"] = rows[-1]["step_s"] * study.config.train.steps
  return out


def from_probes(study, groups, devs, progress=lambda it, total: it) -> dict:
  """Every group's program compiled and timed here (the probe cache reused)."""
  c, rows = study.config, []
  for g in progress(groups, len(groups)):
    p = probe.of_group(study, g, devs)
    rows.append(_with_buckets(study, g, dict(
        _row(study, g, devs[0].platform), compile_s=p.compile_s, step_s=p.step_s,
        est_train_s=p.step_s * c.train.steps, memory_bytes=p.memory_bytes,
        memory_source="compiled", step_source="measured: compiled and timed here")))
  d = devs[0]
  return dict(device=dict(kind=d.device_kind, platform=d.platform, count=len(devs),
                          source="probe: compiled and timed here"), groups=rows)


def from_flops(study, groups, device: str | None) -> dict:
  """FLOP-model estimate for `device` (a devices.TABLE name, or cpu / None: this host's
  CPU with its matmul peak measured now)."""
  c, dtype = study.config, study.peak_dtype
  spec = devices_lib.lookup(device) if device else None
  if spec is None:
    peak = devices_lib.matmul_peak_gflops(dtype) * 1e9
    dev = dict(kind="cpu (this host)", platform="cpu", count=1,
               source=f"FLOPs at the measured {dtype} matmul peak "
                      f"({peak / 1e9:.0f} GFLOP/s) x plan.mfu {c.plan.mfu:g}")
    limit = c.plan.device_memory_gb * 2**30 or None
  else:
    peak = spec.peak_flops(dtype)
    dev = dict(kind=spec.name, platform=spec.platform, count=1,
               source=f"estimated: FLOPs at the table's {dtype} peak ({peak / 1e12:g} "
                      "TFLOP/s) x the fraction measured for the nearest shape class "
                      "(sweep/rates.py; per group below)")
    limit = spec.memory_gb * 1e9
  rows = []
  for g in groups:
    r = _row(study, g, "cpu" if spec is None else spec.platform)
    flops = r["computed_flops"] / c.train.steps
    if spec is None:
      step_s, how = flops / devices_lib.rate(peak, c.plan.mfu), f"plan.mfu {c.plan.mfu:g}"
    else:
      d, w, _ = g.padded_shape()
      tokens = len(g.cells) * c.train.batch_size * study.seq_len(g.length)
      rate = rates.rate(spec.name, dtype, w, d, tokens, c.plan.mfu)
      step_s, how = rates.step_seconds(rate, flops, peak), rate.source
    tcfg = study.train_config(g)  # buckets off with growth: every step at the full length
    step_s *= _flops(study, g, lengths.timed_positions(study.task, tcfg)) / _flops(
        study, g, study.seq_len(g.length))
    buckets = len(lengths.length_buckets(study.task, tcfg))  # each bucket compiles its step
    full = tcfg.full_length  # growth: the longest bucket's memory
    mem = plan.memory_bytes(g, study.seq_len(full), c.train.batch_size,
                            c.model.mlp_ratio, study.vocab, study.output_dim)
    rows.append(_with_buckets(study, g, dict(
        r, compile_s=c.plan.compile_s * buckets, step_s=step_s,
        est_train_s=step_s * c.train.steps,
        memory_bytes=mem, memory_source="formula", over_memory=bool(limit and mem > limit),
        step_source=f"estimated: {how}")))
  return dict(device=dev, groups=rows)


def totals(est: dict, workers: int = 1) -> dict:
  rows = est["groups"]
  if any("est_train_s_grown" in r for r in rows):
    est["est_train_s_grown"] = sum(r.get("est_train_s_grown", r["est_train_s"]) for r in rows)
  est.update(est_train_s=sum(r["est_train_s"] for r in rows),
             compile_s=sum(r["compile_s"] for r in rows), workers=workers,
             per_worker_s=plan.makespan([r["est_train_s"] + r["compile_s"] for r in rows],
                                        workers))
  return est
