"""tools/gpu/gpu_session.sh's four parts (issue 60) and tools/gpu/gpu_check.sh in quick mode
on this CPU (no benches: minutes on a CPU): every step the session runs passes at CPU
sizes, and the JSON's numbers agree with the files it merged (the plan JSON, the study's
results.csv); the merge of a bench JSON; the merge on a made-up work dir where the plan
step failed, or issue 60's steps broke: the error text is kept, "ok" is false.
"""
import csv
import json
import math
import os
import statistics
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tools", "gpu"), os.path.join(ROOT, "tools", "bench")]
import gpu_check  # noqa: E402  (tools/gpu/ is not a package)

STEP_NAMES = gpu_check.STEPS


# tools/gpu/gpu_session.sh's parts (issue 60's order) and the steps each must run in quick
# mode; part 4's JSON merges every part's steps (one work dir, as on one warm machine)
SESSION_PARTS = {"1": ("settings", "a5_kill_rerun"), "2": ("determinism", "gelu_paper"),
                 "3": ("plan_a5_flops", "devices_float32", "devices_bfloat16"),
                 "4": ("reach_plan", "reach_run", "plan", "plan_smoke_flops", "run")}


@pytest.mark.slow
def test_quick_mode_on_cpu(tmp_path):
  """tools/gpu/gpu_session.sh 1, 2, 3, 4 in quick mode, one after another: each part's steps
  run at CPU sizes and pass (a broken step fails here), and the last JSON's numbers agree
  with the files it merged (the plan JSON, the smoke study's results.csv)."""
  out, work = tmp_path / "out", tmp_path / "work"
  env = dict(os.environ, GPU_CHECK_QUICK="1", GPU_SESSION_WORK=str(work),
             PYTHON=sys.executable, GPU_SESSION_BUDGET="900")
  env.pop("GPU_CHECK_DEADLINE", None)
  # the determinism probe's first flag set is none: not the suite's run settings (conftest)
  env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                              if not f.startswith("--xla_gpu_deterministic_ops"))
  for part, names in SESSION_PARTS.items():
    p = subprocess.run(["bash", "tools/gpu/gpu_session.sh", part, str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=900)
    print(p.stdout)
    result = json.loads((out / "gpu_check.json").read_text())
    assert p.returncode == 0 and result["ok"] and result["failed"] == [], (
        part, p.stdout + json.dumps({k: s.get("error") for k, s in result["steps"].items()}))
    for name in names:
      assert result["steps"][name]["status"] == "ok", (part, name, result["steps"][name])
    assert "gpu_check: ok" in p.stdout and (out / "gc.tgz").stat().st_size > 0
  assert len(os.listdir(out)) <= 8  # what the device tool returns
  assert "jax " in (out / "env.txt").read_text()  # part 1's versions, kept by parts 2-4
  assert result["quick"] is True
  steps = result["steps"]
  for name in ("devices_float32", "devices_bfloat16", "plan", "run"):
    assert steps[name]["status"] == "ok" and steps[name]["rc"] == 0
    assert steps[name]["seconds"] > 0 and steps[name]["cmd"].startswith("depthscale ")
  assert steps["bench_medium"]["status"] == "skipped" and result["medium"].startswith("skipped")
  assert steps["bench_paper"]["status"] == steps["torch_paper"]["status"] == "skipped"
  assert steps["bench_mixed"]["status"] in ("absent", "skipped")
  for name in ("plan_a5_flops", "plan_smoke_flops"):  # the FLOPs plans run anywhere
    assert steps[name]["status"] == "ok", steps[name]
  assert result["smoke_plan"]["within_tolerance"] is None  # judged on a GPU only
  assert result["mixed"] == steps["bench_mixed"]["why"]

  # issue 60: run's settings, recorded and printed beside the figures
  settings = result["settings"]
  assert settings["deterministic_gpu_ops"] and "xla_gpu_deterministic_ops=true" in \
      settings["xla_flags"] and settings["matmul_precision"] == "highest"
  assert settings["options"]["attention"] == {"option": "auto", "resolved": "einsum"}  # CPU
  assert settings["options"]["remat"] == {"option": "auto", "resolved": "none"}
  assert "[deterministic ops, f32 highest, attention einsum, remat none, gelu xla]" in p.stdout
  # item 1: the A5 smoke study killed once and rerun, bit for bit
  kill = result["kill_rerun"]
  assert kill["ok"] and kill["same"] and kill["killed_mid_run"] and kill["differences"] == []
  assert kill["runs"]["killed"]["rc"] == -9 and kill["runs"]["killed"]["checkpoint_steps_at_kill"]
  assert "resumes from its step-" in kill["runs"]["rerun"]["resumed"][0]
  assert "results.csv" in kill["compared"] and any(c.startswith("groups/") for c in kill["compared"])
  assert "a5_depth.py:smoke" in steps["a5_kill_rerun"]["cmd"]
  # item 2: every flag set repeats on a CPU; item 4: the GELU A/B's two rows
  assert set(result["determinism"]["verdicts"].values()) == {"bit for bit"}
  gelu = result["gelu"]
  assert gelu["recompute_over_xla"] > 0 and gelu["failed"] == {}
  assert gelu["deterministic_gpu_ops"] and gelu["shape"]["depth"] == 2
  assert gelu["ablation"]["variants"]["gelu recompute"]["resolved"]["gelu"] == "recompute"
  assert "gelu recompute / xla" in p.stdout  # part 2's summary, merged again in part 4
  # item 5: reachability's smoke study, planned and run at the lengths that fit
  reach = result["reachability"]
  assert reach["run"]["ran"] and reach["run"]["rc"] == 0 and reach["run"]["lengths"] == [8]
  assert len(reach["run"]["rows"]) == 6 and reach["plan"]["groups"]
  assert "reachability [deterministic ops" in p.stdout

  f32, bf16 = result["devices"]["float32"], result["devices"]["bfloat16"]
  assert f32["platform"] == bf16["platform"] == "cpu" and f32["count"] == bf16["count"] >= 1
  assert (f32["dtype"], bf16["dtype"]) == ("float32", "bfloat16")
  assert f32["matmul_peak_gflops"] > 0 and bf16["matmul_peak_gflops"] > 0

  assert steps["bench_tiny"]["status"] == "skipped"  # its merge: the test below

  with open(work / "smoke" / "results.csv") as f:
    rows = list(csv.DictReader(f))
  train_s = {r["group"]: float(r["train_s"]) for r in rows}
  plan, est = result["plan"], result["estimate"]
  assert est["measured_train_s"] == pytest.approx(sum(train_s.values()))
  assert est["est_train_s"] == plan["est_train_s"] == pytest.approx(
      sum(g["est_train_s"] for g in plan["groups"]))
  assert est["est_over_measured"] == pytest.approx(est["est_train_s"] / est["measured_train_s"])
  assert est["same_groups"] and {g["id"] for g in est["groups"]} == set(train_s)
  assert sum(g["models"] for g in est["groups"]) == len(rows) == 6
  print(f"plan est/measured {est['est_over_measured']:.2f}")
  assert 0.1 < est["est_over_measured"] < 10  # a probed plan, on cores shared with others


def write_step(work, name, rc, out="", err="", cmd=("devices",)):
  (work / f"{name}.rc").write_text(f"{rc}\n")
  (work / f"{name}.s").write_text("100.0 102.5\n")
  (work / f"{name}.cmd").write_text("\n".join(("python", "-m", "depthscale.cli") + cmd) + "\n")
  (work / f"{name}.out").write_text(out)
  (work / f"{name}.err").write_text(err)


def test_a_failed_step_is_recorded_and_the_rest_merged(tmp_path, capsys):
  """The plan step failed (an older CLI without --json), the run step never started; the
  devices step still counts."""
  work = tmp_path
  devices = {"platform": "cpu", "kind": "cpu", "count": 2, "dtype": "float32",
             "matmul_peak_gflops": 80.0}
  for dtype in ("float32", "bfloat16"):
    write_step(work, f"devices_{dtype}", 0, out=json.dumps(dict(devices, dtype=dtype)))
  write_step(work, "bench_tiny", 0)  # exit 0 but no JSON written
  for name in ("bench_medium", "bench_paper", "torch_paper", "ablation_paper", "plan_a5",
               "torch_medium", "torch_tiny", "plan_a5_flops", "plan_smoke_flops", "settings",
               "a5_kill_rerun", "determinism", "gelu_paper", "reach_plan", "reach_run"):
    (work / f"{name}.skipped").write_text("skipped: quick mode\n")
  (work / "bench_mixed.skipped").write_text("absent\n")
  write_step(work, "plan", 2, err="depthscale: error: unrecognized arguments: --json x\n",
             cmd=("plan", "--json", "x"))
  assert gpu_check.main([str(work), str(tmp_path / "out.json"), "--quick", "1"]) == 1
  result = json.loads((tmp_path / "out.json").read_text())
  assert result["ok"] is False and result["failed"] == ["bench_tiny", "plan", "run"]
  steps = result["steps"]
  assert steps["plan"]["rc"] == 2 and steps["plan"]["seconds"] == 2.5
  assert "unrecognized arguments: --json" in steps["plan"]["error"]
  assert steps["plan"]["cmd"] == "depthscale plan --json x"
  assert "no JSON" in steps["bench_tiny"]["error"] and result["tiny"] is None
  assert "not run" in steps["run"]["error"] and result["estimate"] is None
  assert result["mixed"] == "absent" and steps["bench_mixed"]["status"] == "absent"
  assert result["devices"]["bfloat16"]["dtype"] == "bfloat16"
  assert "FAILED: bench_tiny, plan, run" in capsys.readouterr().out


def test_the_tiny_bench_is_merged_with_its_target(tmp_path):
  """A bench JSON as `depthscale bench` writes it (made up: 3 rounds on a GPU): the
  summary's ratio is the bench's median of per-round ratios, judged against 50x."""
  work = tmp_path
  rounds = [dict(engine_model_steps_per_s=e, sequential_model_steps_per_s=q)
            for e, q in ((6000.0, 100.0), (5800.0, 120.0), (6100.0, 110.0))]
  ratios = [r["engine_model_steps_per_s"] / r["sequential_model_steps_per_s"] for r in rounds]
  bench = {"preset": {"models": 256}, "device": {"platform": "gpu"}, "rounds": rounds,
           "engine": {"model_steps_per_s": 6000.0}, "sequential": {"model_steps_per_s": 110.0},
           "engine_over_sequential": statistics.median(ratios)}
  write_step(work, "bench_tiny", 0, cmd=("bench", "--preset", "tiny"))
  (work / "bench_tiny.json").write_text(json.dumps(bench))
  result = gpu_check.merge(str(work), quick=False)
  tiny = result["tiny"]
  assert tiny["models"] == 256 and tiny["bench"] == bench
  assert tiny["engine_over_sequential"] == pytest.approx(statistics.median(ratios))  # 52.7
  assert tiny["meets_target"] is True
  bench["engine_over_sequential"] = 40.0
  (work / "bench_tiny.json").write_text(json.dumps(bench))
  assert gpu_check.merge(str(work), quick=False)["tiny"]["meets_target"] is False


def _bench(rate, sequential, platform="gpu", models=3):
  return {"preset": {"models": models, "as_defined": True}, "device": {"platform": platform,
          "kind": "NVIDIA H100 80GB HBM3"}, "dtype": {"compute": "bfloat16"},
          "engine": {"model_steps_per_s": rate, "gflops": rate * 11600.0},
          "sequential": {"model_steps_per_s": sequential}, "engine_over_sequential": 1.1,
          "engine_fraction_of_peak": 0.3, "matmul_peak_gflops": 650e3}


def _torch(**rates):
  return {"variants": {v: ({"model_steps_per_s": r} if r else None) for v, r in rates.items()},
          "config": {"models": 3}, "dtype": "bfloat16", "gpu": "NVIDIA H100 80GB HBM3"}


def test_each_bench_is_merged_against_the_best_torch_variant(tmp_path):
  """Made-up paper and medium figures: the ratio is over the fastest PyTorch variant, the
  one-model step over torch eager's, each judged against its target on a GPU only."""
  work = tmp_path
  write_step(work, "bench_paper", 0)
  (work / "bench_paper.json").write_text(json.dumps(_bench(90.0, 50.0)))
  write_step(work, "torch_paper", 0)
  (work / "torch_paper.json").write_text(json.dumps(_torch(eager=43.4, compile=54.0,
                                                           func_vmap=31.8, compile_ro=None)))
  write_step(work, "bench_medium", 0)
  (work / "bench_medium.json").write_text(json.dumps(_bench(1319.0, 200.0, models=64)))
  write_step(work, "torch_medium", 0)
  (work / "torch_medium.json").write_text(json.dumps(_torch(eager=110.0, compile_ro=350.0,
                                                            func_vmap=1551.0)))
  result = gpu_check.merge(str(work), quick=False)
  paper = result["paper"]["versus_torch"]
  assert paper["best_torch"] == "compile"
  assert paper["engine_over_best_torch"] == pytest.approx(90.0 / 54.0)  # 1.67 >= 1.5
  assert paper["sequential_over_eager"] == pytest.approx(50.0 / 43.4)
  assert paper["meets_target"] is True
  medium = result["medium"]["versus_torch"]
  assert medium["best_torch"] == "func_vmap" and medium["meets_target"] is False  # 0.85
  assert medium["engine_over_best_torch"] == pytest.approx(1319.0 / 1551.0)
  (work / "bench_paper.json").write_text(json.dumps(_bench(90.0, 50.0, platform="cpu")))
  assert gpu_check.merge(str(work), quick=False)["paper"]["versus_torch"]["meets_target"] \
      is None  # a CPU's figure is not the GPU target's


def test_the_a5_sweep_is_summed_from_three_probed_depths(tmp_path):
  """s/step probed at depths 6, 12, 24 lie on 0.01 d (exactly linear): the sweep's 7
  groups of 800k steps then take 0.01 x (6 + 9 + ... + 24) x 800k s = 233.3 h; the FLOPs
  plan's 57 h is 0.24x of it, outside 25%."""
  work = tmp_path
  probed = {"device": {"platform": "gpu"},
            "groups": [{"shape": [d, 512, 1], "step_s": 0.01 * d} for d in (6, 12, 24)]}
  depths = range(6, 25, 3)
  flops = {"est_train_s": 57.0 * 3600, "groups": [
      {"id": f"g{d}", "shape": [d, 512, 1], "step_s": 1.0, "est_train_s": 800000.0}
      for d in depths]}
  for name, data in (("plan_a5", probed), ("plan_a5_flops", flops)):
    write_step(work, name, 0)
    (work / f"{name}.json").write_text(json.dumps(data))
  a5 = gpu_check.merge(str(work), quick=False)["a5_plan"]
  assert a5["s_per_step_per_layer"] == pytest.approx(0.01)
  assert a5["probed_h100_hours"] == pytest.approx(0.01 * sum(depths) * 800000 / 3600)
  assert a5["meets_target"] is False and a5["flops_within_tolerance"] is False
  assert a5["flops_over_probed"] == pytest.approx(57.0 / a5["probed_h100_hours"])


def test_the_option_ablation_parses_variants_and_tables_each_row():
  """tools/gpu/option_ablation.py (gpu_check's ablation_paper): a variant names only valid
  options, in one line otherwise; the table has one row per variant, a failed one with its
  error, and ratios as given."""
  import option_ablation  # tools/gpu/, beside gpu_check
  assert option_ablation.parse_variant("defaults=") == ("defaults", {})
  assert option_ablation.parse_variant("both=remat:none, attention:dot_product") == (
      "both", {"remat": "none", "attention": "dot_product"})
  for bad in ("noname", "=remat:none", "x=remat:some", "x=heads:4"):
    with pytest.raises(SystemExit):
      option_ablation.parse_variant(bad)
  row = {"options": {}, "resolved": {"attention": "dot_product", "remat": "none"},
         "model_steps_per_s": 77.0, "vs_first": 1.0, "tflops": 297.9,
         "fraction_of_peak": 0.468, "build_s": 11.2, "memory_gib": 13.92}
  result = {"preset": "paper", "device": "NVIDIA H200", "first": "defaults",
            "variants": {"defaults": row, "block": dict(row, vs_first=0.8)},
            "failed": {"cudnn": {"resolved": {"attention": "cudnn"},
                                 "error": "IndexError: absl::container_internal"}}}
  lines = option_ablation.table(result).splitlines()
  assert len(lines) == 5 and "| 77.0 | 1.00 | 297.9 | 46.8% |" in lines[2]
  assert "| 0.80 |" in lines[3] and "failed: IndexError" in lines[4]


def test_a_check_in_two_parts_keeps_the_first_parts_steps(tmp_path):
  """GPU_CHECK_STEPS (tools/gpu/gpu_session.sh's two calls): the named steps run, an earlier
  part's results in the same work dir stay, and a step neither part ran says why."""
  out, work = tmp_path / "check.json", tmp_path / "work"
  work.mkdir()
  devices = {"platform": "gpu", "kind": "NVIDIA H200", "count": 1, "dtype": "float32",
             "matmul_peak_gflops": 50063.0}
  for dtype in ("float32", "bfloat16"):  # part 1's, on "the machine"
    write_step(work, f"devices_{dtype}", 0, out=json.dumps(dict(devices, dtype=dtype)))
  (work / "plan_a5_flops.skipped").write_text("skipped: not in GPU_CHECK_STEPS\n")  # stale
  write_step(work, "ablation_paper", 0)  # tools/gpu/option_ablation.py's JSON, merged as is
  (work / "ablation_paper.json").write_text(json.dumps({"first": "defaults", "failed": {}}))
  write_step(work, "run", 0)  # an earlier part's smoke run: a later part keeps its workdir
  (work / "smoke").mkdir()
  (work / "smoke" / "results.csv").write_text("group,train_s,compile_s\ng0,3.5,1.0\n")
  env = dict(os.environ, GPU_CHECK_QUICK="1", GPU_CHECK_WORK=str(work), PYTHON=sys.executable,
             GPU_CHECK_STEPS="plan_a5_flops")
  p = subprocess.run(["bash", "tools/gpu/gpu_check.sh", str(out)], cwd=ROOT, env=env,
                     capture_output=True, text=True, timeout=300)
  result = json.loads(out.read_text())
  steps = result["steps"]
  assert steps["plan_a5_flops"]["status"] == "ok", p.stdout + p.stderr
  assert steps["devices_float32"]["status"] == "ok" and steps["devices_float32"]["seconds"] == 2.5
  assert result["devices"]["bfloat16"]["kind"] == "NVIDIA H200"  # part 1's, not rerun here
  assert steps["run"]["status"] == "ok" and result["smoke"]["measured_train_s"] == 3.5
  assert steps["plan"] == {"status": "skipped", "why": "skipped: not in GPU_CHECK_STEPS"}
  assert result["ablation"] == {"first": "defaults", "failed": {}}
  assert p.returncode == 0 and result["ok"]


def test_torch_paired_takes_each_pairs_own_best_torch():
  """tools/bench/torch_paired.py: the engine against the best PyTorch variant *of each pair*
  (the machine's speed moves both sides of a pair alike), medians over pairs."""
  import torch_paired  # tools/bench/; imports no torch itself
  rows = [dict(engine=90.0, **{"one model": 60.0}, eager=40.0, compile=45.0, func_vmap=60.0),
          dict(engine=45.0, **{"one model": 30.0}, eager=30.0, compile=20.0, func_vmap=25.0),
          dict(engine=100.0, **{"one model": 50.0}, eager=50.0, compile=80.0, func_vmap=40.0)]
  out = torch_paired.summarise(rows)
  assert out["engine_over_best_torch"] == pytest.approx(1.5)  # 1.5, 1.5, 1.25
  assert out["engine_over_best_torch_range"] == pytest.approx([1.25, 1.5])
  assert out["engine_over"]["func_vmap"] == pytest.approx(1.8)  # 1.5, 1.8, 2.5
  assert out["sequential_over_eager"] == pytest.approx(1.0)  # 1.5, 1.0, 1.0
  assert out["model_steps_per_s"]["engine"] == 90.0


def test_the_determinism_probe_compares_runs_within_and_across_processes(monkeypatch):
  """tools/gpu/determinism_probe.py's verdicts from its child processes' hashes: reproducible
  only if all four runs agree; a failing program is reported with its last lines."""
  import types
  import determinism_probe as dp  # tools/gpu/
  outputs = []

  def fake_run(cmd, env, capture_output, text):
    assert "--child" in cmd and "--xla_gpu_deterministic_ops=true" in env["XLA_FLAGS"]
    return outputs.pop(0)
  monkeypatch.setattr(dp.subprocess, "run", fake_run)
  ok = lambda *h: types.SimpleNamespace(returncode=0, stderr="", stdout=json.dumps(
      {"runs": [{"hash": x, "s": 1.0} for x in h], "device": "gpu"}))
  outputs[:] = [ok("a", "a"), ok("a", "a")]
  row = dp.probe("--xla_gpu_deterministic_ops=true", "cudnn", 3)
  assert row["same_in_a_process"] and row["same_across_processes"]
  outputs[:] = [ok("a", "a"), ok("b", "b")]  # another process autotuned differently
  row = dp.probe("--xla_gpu_deterministic_ops=true", "cudnn", 3)
  assert row["same_in_a_process"] and not row["same_across_processes"]
  outputs[:] = [ok("a", "c"), ok("a", "a")]  # atomics: two runs of one executable differ
  assert not dp.probe("--xla_gpu_deterministic_ops=true", "cudnn", 3)["same_in_a_process"]
  outputs[:] = [types.SimpleNamespace(returncode=1, stdout="", stderr=(
      "Traceback ...\nIndexError: absl::container_internal::raw_hash_map<>::at\n"))]
  row = dp.probe("--xla_gpu_deterministic_ops=true", "cudnn", 3)
  assert not row["ran"] and row["error"].endswith("raw_hash_map<>::at") and not outputs


def test_issue_60_steps_that_broke_fail_the_check(tmp_path):
  """Made up: the killed-and-rerun A5 study differed (kill_rerun.py wrote its JSON, exit 1),
  the GELU A/B crashed, the reachability run never started: each is a failed step with its
  reason, and the summary says so."""
  work = tmp_path
  for name in STEP_NAMES:
    (work / f"{name}.skipped").write_text("skipped: not in GPU_CHECK_STEPS\n")
  for name in ("a5_kill_rerun", "gelu_paper", "reach_run"):
    (work / f"{name}.skipped").unlink()
  write_step(work, "a5_kill_rerun", 1, cmd=("tools/gpu/kill_rerun.py",))
  (work / "a5_kill_rerun.json").write_text(json.dumps({
      "ok": False, "same": False, "killed_mid_run": True, "compared": ["results.csv"],
      "differences": ["/results.csv[0]/final_loss: ref '3.6', rerun '3.7'"],
      "runs": {"ref": {"rc": 0}, "killed": {"rc": -9, "checkpoint_steps_at_kill": [60]},
               "rerun": {"rc": 0, "resumed": ["group g resumes from its step-60 checkpoint"]}}}))
  write_step(work, "gelu_paper", 1, err="Traceback ...\nRuntimeError: every variant failed\n",
             cmd=("tools/gpu/option_ablation.py",))
  assert gpu_check.main([str(work), str(tmp_path / "out.json"), "--quick", "0"]) == 1
  result = json.loads((tmp_path / "out.json").read_text())
  assert result["failed"] == ["a5_kill_rerun", "gelu_paper", "reach_run"]
  steps = result["steps"]
  assert "final_loss" in steps["a5_kill_rerun"]["error"] and result["kill_rerun"]["same"] is False
  assert "every variant failed" in steps["gelu_paper"]["error"] and result["gelu"] is None
  assert "not run" in steps["reach_run"]["error"]
  assert result["settings"] is None and result["reachability"]["run"] is None


def test_a_kill_rerun_step_that_exits_0_with_a_difference_still_fails(tmp_path):
  """The merge reads the JSON's verdict, not only the exit status."""
  write_step(tmp_path, "a5_kill_rerun", 0)
  (tmp_path / "a5_kill_rerun.json").write_text(json.dumps(
      {"ok": False, "same": True, "killed_mid_run": False, "differences": []}))
  result = gpu_check.merge(str(tmp_path), quick=False)
  assert "a5_kill_rerun" in result["failed"]
  assert "killed mid-run False" in result["steps"]["a5_kill_rerun"]["error"]


def test_kill_rerun_compares_every_curve_and_row_but_no_timing(tmp_path):
  """tools/gpu/kill_rerun.py's comparison: the timing columns may differ, a loss curve's
  last bit may not."""
  import kill_rerun  # tools/gpu/
  for name, (loss, secs) in {"ref": (3.6063177585601807, 1.0),
                             "rerun": (3.6063177585601807, 2.5)}.items():
    d = tmp_path / name / "groups"
    d.mkdir(parents=True)
    (tmp_path / name / "results.csv").write_text(
        f"group,model,final_loss,train_s,started_at\ng,m0,{loss},{secs},{secs}\n")
    (d / "g.json").write_text(json.dumps({"rows": [{"model": "m0", "train_s": secs}],
                                          "curves": {"step": [10], "loss": [[loss]]}}))
  ref, rerun = kill_rerun.results(str(tmp_path / "ref")), kill_rerun.results(str(tmp_path / "rerun"))
  assert kill_rerun.differences(ref, rerun) == []
  last_bit = math.nextafter(3.6063177585601807, 0.0)
  (tmp_path / "rerun" / "groups" / "g.json").write_text(json.dumps(
      {"rows": [{"model": "m0"}], "curves": {"step": [10], "loss": [[last_bit]]}}))
  diffs = kill_rerun.differences(ref, kill_rerun.results(str(tmp_path / "rerun")))
  assert diffs == [f"/groups/g.json/curves/loss[0][0]: ref 3.6063177585601807, rerun {last_bit!r}"]


def test_science_run_picks_the_lengths_that_fit():
  """tools/gpu/science_run.py: a plan's groups summed per length, the shortest first, as
  many as fit the budget with the safety factor and the start-up."""
  import science_run  # tools/gpu/
  plan = {"groups": [{"length": n, "est_train_s": s, "compile_s": 20.0}
                     for n, s in ((16, 106.0), (8, 54.0), (64, 900.0), (32, 400.0))]}
  assert science_run.per_length(plan) == [(8, 74.0), (16, 126.0), (32, 420.0), (64, 920.0)]
  fit = lambda budget: science_run.pick(plan, budget)[0]
  start, safety = science_run.START_S, science_run.SAFETY
  assert fit(start + safety * 200.0) == [8, 16] and fit(start + safety * 199.0) == [8]
  assert fit(start + safety * 73.0) == []
  assert science_run.pick(plan, 1e6) == ([8, 16, 32, 64], 1540.0)
