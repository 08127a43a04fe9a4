"""A single-node SLURM cluster for tests: munge + slurmctld + slurmd started as root in a
private directory (Debian's slurm-wlm and munge; see ../shared/SLURM.md)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

CONF = """ClusterName=test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket.2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
SlurmctldPort={port}
SlurmdPort={port2}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
KillWait=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def available() -> str | None:
  """None if a cluster can be started here, else why not."""
  if os.geteuid() != 0:
    return "needs root to start slurmctld/slurmd/munged"
  for exe in ("munged", "slurmctld", "slurmd", "sbatch", "squeue"):
    if shutil.which(exe) is None and not os.path.exists(f"/usr/sbin/{exe}"):
      return f"{exe} not installed (apt-get install slurm-wlm munge)"
  if not os.path.exists("/etc/munge/munge.key"):
    return "no /etc/munge/munge.key"
  return None


class Cluster:
  def __init__(self, directory: str, port: int = 16817, cpus: int | None = None):
    self.d = directory
    self.env = dict(os.environ, SLURM_CONF=os.path.join(directory, "slurm.conf"))
    self.port, self.cpus = port, cpus or os.cpu_count() or 2

  def _run(self, *cmd):
    return subprocess.run(cmd, env=self.env, check=True, capture_output=True, text=True)

  def start(self) -> "Cluster":
    d = self.d
    for sub in ("munge", "state", "spool"):
      os.makedirs(os.path.join(d, sub), exist_ok=True)
    os.chmod(os.path.join(d, "munge"), 0o755)
    key = os.path.join(d, "munge.key")
    shutil.copy("/etc/munge/munge.key", key)
    os.chmod(key, 0o600)
    self._run("munged", f"--socket={d}/munge/munge.socket.2", f"--key-file={key}",
              f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid",
              f"--seed-file={d}/munged.seed", "--force")
    with open(self.env["SLURM_CONF"], "w") as f:
      f.write(CONF.format(d=d, port=self.port, port2=self.port + 1, cpus=self.cpus))
    self._run("slurmctld")
    self._run("slurmd", "-N", "localhost")
    deadline = time.time() + 60
    while time.time() < deadline:
      out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True,
                           text=True).stdout.strip()
      if out in ("idle", "mix", "alloc"):
        return self
      time.sleep(0.5)
    raise RuntimeError(f"SLURM node never became idle (sinfo: {out!r}); see {d}/*.log")

  def stop(self) -> None:
    for name in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
      try:
        with open(os.path.join(self.d, name)) as f:
          os.kill(int(f.read().strip()), signal.SIGTERM)
      except (OSError, ValueError):
        pass
    time.sleep(1)
