"""Sampler cost vs a width-64 training step at batch 512, per task at paper sizes."""
import time, statistics, jax
from depthscale import tasks
from depthscale.core import ensemble, program, train
from depthscale.core.ensemble import ModelSpec
def med(f, reps=7):
  jax.block_until_ready(f(0)); ts=[]
  for i in range(reps):
    t0=time.perf_counter(); jax.block_until_ready(f(i+1)); ts.append(time.perf_counter()-t0)
  return statistics.median(ts)
B=512
for name, opts, n in [("word_problem", {}, 128), ("khop", {}, 100), ("reachability", {}, 16), ("retrieval", {}, 5)]:
  task=tasks.make(name, **opts)
  samp=jax.jit(task.sample, static_argnums=(1,2))
  ts=med(lambda i: samp(jax.random.key(i), B, n))
  specs=[ModelSpec(2,64,4)]
  cfg=ensemble.group_config(specs, max_len=task.seq_len(n), output_dim=task.output_dim(n), vocab=task.input_vocab, input_dim=task.input_dim)
  tcfg=train.TrainConfig(batch_size=B, length=n, total_steps=100)
  st=train.init_state(ensemble.init_params(specs,cfg),tcfg); hp=train.stack_hparams(specs); ar=ensemble.stack_arch(specs,cfg)
  f=program.make_train_chunk(task,cfg,tcfg,1)
  box=[st]
  def step(i):
    box[0],m=f(box[0],hp,ar); return m['loss']
  tt=med(step)
  print(f"{name:13s} length {n:4d}: sample {ts*1e3:7.2f} ms ({B/ts:9.0f} ex/s) | width-64 depth-2 step {tt*1e3:8.1f} ms | sample/step {ts/tt*100:5.2f}%")
