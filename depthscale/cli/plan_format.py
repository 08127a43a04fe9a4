"""`depthscale plan`'s table: each group's shape, compile time, s/step, training time and
memory, where each s/step came from, the length buckets and growth's bounds, the totals,
and for an adaptive design the grid's price beside its budget's."""
from __future__ import annotations


def format_plan(est: dict, c) -> str:
  d = est["device"]
  lines = [f"device: {d['count']} x {d['kind']} ({d['source']})",
           f"{'group':28s} {'models':>6s} {'shape (d,w,r)':>13s} {'useful/comp.':>12s} "
           f"{'compile':>8s} {'s/step':>9s} {'est. train':>10s} {'memory/dev':>11s}  options"]
  for r in est["groups"]:
    opts = ", ".join(x for x in (f"models_per_chunk={r['models_per_chunk']}"
                                 if r["models_per_chunk"] else "",
                                 f"remat={r['remat']}" if r["remat"] != "none" else "",
                                 "OVER the device memory" if r.get("over_memory") else "") if x)
    lines.append(f"{r['id']:28s} {r['models']:6d} {str(tuple(r['shape'])):>13s} "
                 f"{r['useful_flops'] / r['computed_flops']:12.0%} {r['compile_s']:7.1f}s "
                 f"{r['step_s']:9.3g} {_hours(r['est_train_s']):>10s} "
                 f"{r['memory_bytes'] / 2**20:8.0f} MB{' (formula)' if r['memory_source'] == 'formula' else ''}  {opts}")
  lines += _step_sources(est["groups"])
  lines += _bucket_lines(est, c)
  useful = sum(r["useful_flops"] for r in est["groups"])
  computed = sum(r["computed_flops"] for r in est["groups"])
  lines.append(f"total: {_hours(est['est_train_s'])} training + {_hours(est['compile_s'])} "
               f"compiling; {useful / computed:.0%} of computed FLOPs useful; "
               f"{est['workers']} worker(s): {_hours(est['per_worker_s'])} wall each")
  if c.design.kind == "adaptive":  # the grid's price beside the design's
    from depthscale.bench import design as design_bench
    lines.append(design_bench.plan_line(est["est_train_s"], c.design.budget,
                                         bool(c.design.reserve)))
  return "\n".join(lines)


def _bucket_lines(est: dict, c) -> list[str]:
  """s/step at each length bucket (a curriculum's stages: how long a model stays at each
  is learned, so the total prices every step at the grid's length), and growth's bounds."""
  lines = [f"  {r['id']:26s} s/step at " + ", ".join(
      f"{b['positions']}: {b['step_s']:.3g}" for b in r["buckets"]) + " positions"
      for r in est["groups"] if len(r.get("buckets", ())) > 1]
  if lines:
    lines.insert(0, "length buckets (s/step scaled by FLOPs from the grid's length; the total "
                    "below prices every step at the grid's length: without growth, an upper "
                    "bound):")
  if "est_train_s_grown" in est:
    lines.append(f"growth to train.length_max={c.train.length_max}: training between "
                 f"{_hours(est['est_train_s'])} (no model grows) and "
                 f"{_hours(est['est_train_s_grown'])} (every model at length_max for all "
                 "its steps)")
  return lines


def _step_sources(rows) -> list[str]:
  """Which s/step figures were measured and which estimated, and from what."""
  by_source: dict[str, list[str]] = {}
  for r in rows:
    by_source.setdefault(r.get("step_source", "estimated"), []).append(r["id"])
  if len(by_source) == 1:
    return [f"s/step, every group: {next(iter(by_source))}"]
  return [f"s/step {source}: {', '.join(ids)}" for source, ids in by_source.items()]


def _hours(s: float) -> str:
  return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"
