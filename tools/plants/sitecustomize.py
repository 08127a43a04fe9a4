# planted fault (issue 50 demo): a resumed halving/queued group forgets its slot table
import os
if os.environ.get("DEPTHSCALE_PLANT") == "forget_table":
  from depthscale.sweep.schedules import queue
  queue.Queue.restore = lambda self, saved: (None, None)
if os.environ.get("DEPTHSCALE_PLANT") == "status_blind":  # status ignores a live lease
  import types
  from depthscale.io import leases as real
  from depthscale.sweep import status
  status.leases = types.SimpleNamespace(latest=lambda *a: (0, None), state=real.state)
