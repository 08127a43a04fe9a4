"""`depthscale status WORKDIR`: where a sweep stands, from the workdir alone.

Each group of the study (planned from the workdir's config.json) is done (its results
file exists), running (a live lease: holder, host, step, steps/s, ETA, lease age; with a stopping rule
or a queue the slots busy, models queued and stopped, and an ETA from the stopping seen
so far), stale
(a lease not renewed for lease_s: it will be taken over), or pending (never leased, or
released; with the step of its latest checkpoint if it has one).
Reads the workdir through io/workdir.py and its study through sweep/study.py; never
starts JAX work.
"""
from __future__ import annotations

import time

from depthscale.io import leases
from depthscale.io import workdir as workdir_lib
from depthscale.report import fits
from depthscale.sweep import design_rounds, plan, study as study_lib


def status(workdir: str, now: float | None = None) -> dict:
  study = study_lib.load_saved(workdir)
  workdir_lib.check_contents(workdir)  # damaged files: one line, before reading them
  c = study.config
  if workdir_lib.read_plan(workdir) is not None:  # the plan its workers share
    groups = design_rounds.all_groups(study, workdir)
  else:
    groups = plan.make_plan(design_rounds.first_study(study))
  now = time.time() if now is None else now
  lease_s = c.lease_s
  out, stopping = [], c.train.stop != "none" or c.train.slots > 0
  for g in groups:
    row = dict(id=g.id, models=len(g.cells), steps=study.group_steps(g))
    if workdir_lib.is_done(workdir, g.id):
      row["state"] = "done"
      if stopping:  # the model-steps its models trained, of their budget
        row["trained"], row["budget"] = fits.model_steps(
            workdir_lib.read_group(workdir_lib.group_path(workdir, g.id))["rows"])
    else:
      gen, rec = leases.latest(workdir, g.id)
      st = leases.state(rec, lease_s, now)
      row["state"] = {"held": "running", "stale": "stale", "free": "pending"}[st]
      row["checkpoint_step"] = workdir_lib.checkpoint_step(workdir, g.id)
      if rec is not None and st != "free":
        rate, step, sl = rec.get("steps_per_s"), rec.get("step"), rec.get("slots")
        left = sl["steps_left"] if sl else (row["steps"] - step if step is not None else None)
        row.update(holder=rec.get("owner"), host=rec.get("host"), pid=rec.get("pid"),
                   step=step, steps_per_s=rate, lease_age_s=now - rec.get("heartbeat", now),
                   lease_generation=gen, slots=sl,
                   eta_s=left / rate if rate and left is not None else None)
    out.append(row)
  counts = {s: sum(r["state"] == s for r in out) for s in ("done", "running", "stale", "pending")}
  total = sum(r["models"] * r["steps"] for r in out)  # an upper bound with stopping
  trained = sum(r["models"] * (r["steps"] if r["state"] == "done"
                               else (r.get("step") or r.get("checkpoint_step") or 0))
                for r in out)
  saved = None
  if stopping and counts["done"]:
    done = [r for r in out if r["state"] == "done"]
    saved = dict(trained=sum(r["trained"] for r in done), budget=sum(r["budget"] for r in done))
  return dict(workdir=workdir, study=c.name, lease_s=lease_s, groups=out, counts=counts,
              progress=trained / total if total else 1.0, model_steps=saved,
              design=design_rounds.status(study, workdir) if design_rounds.is_adaptive(study)
              else None)


def _dur(s) -> str:
  if s is None:
    return "-"
  s = int(s)
  return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def format_status(report: dict) -> str:
  n = report["counts"]
  lines = [f"{report['study']}: {len(report['groups'])} groups: {n['done']} done, "
           f"{n['running']} running, {n['stale']} stale, {n['pending']} pending; "
           f"{100 * report['progress']:.1f}% of model-steps (lease {report['lease_s']:g} s)"]
  if report.get("model_steps"):
    t, b = report["model_steps"]["trained"], report["model_steps"]["budget"]
    lines.append(f"  finished groups: {t} model-steps trained of a {b} budget, {b - t} "
                 f"({100 * (b - t) / b:.0f}%) saved by stopping")
  if report.get("design"):
    lines.append(design_line(report["design"], report["counts"]))
  for r in report["groups"]:
    line = f"  {r['id']:28s} {r['models']:3d} models  {r['state']:8s}"
    if r["state"] in ("running", "stale"):
      rate = f"{r['steps_per_s']:.1f} steps/s" if r.get("steps_per_s") else "- steps/s"
      line += (f" step {r.get('step') if r.get('step') is not None else '-'}/{r['steps']}  "
               f"{rate}  ETA {_dur(r.get('eta_s'))}  {r.get('host')} pid {r.get('pid')} "
               f"({r.get('holder')}), heartbeat {r['lease_age_s']:.0f} s ago")
      if r.get("slots"):
        sl = r["slots"]
        line += (f"\n  {'':28s} slots {sl['busy']}/{sl['slots']} busy, {sl['queued']} "
                 f"queued, {sl['stopped']} stopped; ETA from the stopping seen so far")
    elif r["state"] == "pending" and r.get("checkpoint_step"):
      line += f" resumes from step {r['checkpoint_step']}"
    lines.append(line)
  return "\n".join(lines)


def design_line(d: dict, counts: dict) -> str:
  """An adaptive design's state: the interval now and its target, compute spent of the
  budget, models chosen and pending."""
  fit = d.get("fit") or {}
  ci = fit.get("ci95") or [None, None]
  now = (f"slope {fit['slope']:.3g}, 95% interval [{_f(ci[0])}, {_f(ci[1])}] "
         f"(width {_f(fit.get('rel_width'))} of the slope)" if fit.get("slope") is not None
         else f"no slope yet, at most {fit['slope_max']:.3g} (one-sided 95%: the deepest "
         "cell's models all reached their length)" if fit.get("slope_max") is not None
         else "no slope yet")
  target = f"target {d['target']:g}" if d["target"] else "no interval target"
  spent = f"{100 * d['spent']:.0f}%" if d["spent"] is not None else "the first round's"
  state = (f"stopped ({d['stop']}) after {d['rounds']} decision(s)" if d["stop"] else
           f"round {d['rounds'] + 1} after {d['rounds']} decision(s)")
  return (f"  design: adaptive, {state}: {now}, {target}; compute {spent} of the grid's "
          f"spent, budget "
          f"{100 * d['budget']:.0f}%; {d['chosen']} models chosen, "
          f"{counts['pending'] + counts['running'] + counts['stale']} group(s) pending")


def _f(v) -> str:
  return "-" if v is None else f"{v:.3g}"
