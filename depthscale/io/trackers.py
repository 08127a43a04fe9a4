"""Experiment trackers: one W&B run per trained model plus one summary run per sweep,
or plain JSON lines. Run ids are derived from (sweep, model), so a rerun resumes them.
Each tracker adds the time spent inside it to `self.seconds`.
Never imports core/ or model/.
"""
from __future__ import annotations

import hashlib
import json
import math
import netrc
import os
import pathlib
import time
from urllib.parse import urlsplit
from depthscale.errors import UserError

MODES = ("online", "offline", "disabled")
_MODE_ALIASES = {"dryrun": "offline", "run": "online"}
_DEFAULT_HOST = "https://api.wandb.ai"


def _netrc_path() -> pathlib.Path | None:
  """The .netrc wandb reads: $NETRC, else ~/.netrc, else ~/_netrc (wbauth.wbnetrc)."""
  if os.environ.get("NETRC"):
    return pathlib.Path(os.environ["NETRC"]).expanduser()
  for name in ("~/.netrc", "~/_netrc"):
    path = pathlib.Path(name).expanduser()
    if path.exists():
      return path
  return None


def has_credentials() -> bool:
  """True if wandb would find an API key without prompting: the env or a netrc entry.

  Mirrors wandb.sdk.lib.wbauth.authenticate._use_system_auth (WANDB_API_KEY,
  WANDB_IDENTITY_TOKEN_FILE, then the netrc machine of WANDB_BASE_URL), without
  importing wandb (0.4 s) or touching its private API.
  """
  if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
    return True
  path = _netrc_path()
  host = urlsplit(os.environ.get("WANDB_BASE_URL") or _DEFAULT_HOST).netloc
  if path is None or not host:
    return False
  try:
    creds = netrc.netrc(path).authenticators(host)
  except (netrc.NetrcParseError, OSError):
    return False
  return bool(creds and creds[2])


def wandb_mode() -> str:
  """WANDB_MODE if set (WANDB_DISABLED=true means disabled); else online iff logged in."""
  mode = os.environ.get("WANDB_MODE", "").strip().lower()
  if mode:
    mode = _MODE_ALIASES.get(mode, mode)
    if mode not in MODES:
      raise UserError(f"WANDB_MODE={mode!r}; valid: {', '.join(MODES)}")
    return mode
  if os.environ.get("WANDB_DISABLED", "").lower() in ("true", "1", "yes"):
    return "disabled"
  return "online" if has_credentials() else "offline"


def run_id(sweep_name: str, model_id: str | None = None) -> str:
  """Deterministic W&B run id (16 hex chars) of a model, or of the sweep's summary run."""
  key = f"summary\0{sweep_name}" if model_id is None else f"model\0{sweep_name}\0{model_id}"
  return hashlib.sha1(key.encode()).hexdigest()[:16]


def _jsonable(x):
  """Plain JSON values: numpy scalars/arrays -> python, paths -> str, NaN/inf -> None."""
  if isinstance(x, dict):
    return {str(k): _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  if hasattr(x, "tolist"):  # numpy scalar or array, jax array
    return _jsonable(x.tolist())
  if isinstance(x, float) and not math.isfinite(x):
    return None
  if isinstance(x, pathlib.PurePath):
    return str(x)
  return x


def _table(rows: list[dict]) -> tuple[list[str], list[list]]:
  """Columns (first-seen order over all rows) and data, None where a row lacks a key."""
  columns = list(dict.fromkeys(k for row in rows for k in row))
  return columns, [[_jsonable(row.get(c)) for c in columns] for row in rows]


def _subsample(n: int, max_points: int | None) -> list[int]:
  """Indices 0..n-1, or max_points of them evenly spaced (first and last kept)."""
  if max_points is None or n <= max_points:
    return list(range(n))
  return sorted({round(i * (n - 1) / (max_points - 1)) for i in range(max_points)})


INIT_TIMEOUT_S = 20.0  # a run's start waits at most this for W&B (wandb's own default: 90)


def init_timeout_s() -> float:
  """INIT_TIMEOUT_S, or DEPTHSCALE_WANDB_INIT_TIMEOUT (seconds) where that is a number."""
  try:
    return float(os.environ.get("DEPTHSCALE_WANDB_INIT_TIMEOUT", INIT_TIMEOUT_S))
  except ValueError:
    return INIT_TIMEOUT_S


class WandbTracker:
  """One W&B run per model (group = sweep) and one summary run; resumable by id.

  `mode` is "online", "offline" or "disabled" (None or "" -> `wandb_mode()`);
  disabled never imports wandb and writes nothing. Runs are written under
  `workdir/wandb`. All runs of a process share wandb's one service process (started by
  the first `wandb.init`, ~0.5 s); after that a run costs ~15 ms plus ~0.3 ms per
  logged step; `max_points` caps the steps logged per curve (evenly, keeping the last).
  """

  def __init__(self, workdir, sweep_name: str, mode: str | None = None,
               project: str = "depthscale", max_points: int | None = None):
    self.workdir = pathlib.Path(workdir)
    self.sweep_name = sweep_name
    self.mode = _MODE_ALIASES.get(mode, mode) if mode else wandb_mode()
    if self.mode not in MODES:
      raise UserError(f"mode={mode!r}; valid: {', '.join(MODES)}")
    self.project = project
    if max_points is not None and max_points < 2:
      raise ValueError(f"max_points={max_points}; need >= 2 or None")
    self.max_points = max_points
    self.seconds = 0.0
    self.run_ids: dict[str, str] = {}  # model_id (or "" for the summary) -> run id
    self.summary_url: str | None = None

  def _init(self, rid: str, name: str, job_type: str, config: dict | None):
    import wandb  # pylint: disable=import-outside-toplevel

    self.workdir.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(
        init_timeout=init_timeout_s(), console="off", silent=True, save_code=False,
        disable_git=True,
        disable_job_creation=True, x_disable_stats=True, x_disable_meta=True,
        x_disable_machine_info=True, x_save_requirements=False)
    return wandb.init(
        project=self.project, group=self.sweep_name, job_type=job_type, name=name,
        id=rid, resume="allow", dir=str(self.workdir), config=config, mode=self.mode,
        reinit="create_new", settings=settings)

  def log_model(self, model_id: str, config: dict, curves: dict, summary: dict) -> None:
    """One run: config, curves (name -> values per entry of curves["step"]), summary."""
    start = time.perf_counter()
    try:
      if self.mode == "disabled":
        return
      rid = self.run_ids[model_id] = run_id(self.sweep_name, model_id)
      run = self._init(rid, model_id, "model", dict(config))
      ok = False
      try:
        steps = [int(s) for s in curves.get("step", ())]
        names = [k for k in curves if k != "step"]
        first = run.starting_step  # > 0 online when resumed: those steps are logged
        for i in _subsample(len(steps), self.max_points):
          step = steps[i]
          if step < first:
            continue
          row = {k: curves[k][i] for k in names if i < len(curves[k])}
          if row:
            run.log(row, step=step)
        run.summary.update(dict(summary))
        ok = True
      finally:
        run.finish(exit_code=0 if ok else 1)
    finally:
      self.seconds += time.perf_counter() - start

  def log_summary(self, table_rows: list[dict], images: dict, fits: dict) -> None:
    """The sweep's summary run: the scaling table, the PNG plots and the fits."""
    start = time.perf_counter()
    try:
      if self.mode == "disabled":
        return
      import wandb  # pylint: disable=import-outside-toplevel

      rid = self.run_ids[""] = run_id(self.sweep_name)
      run = self._init(rid, f"{self.sweep_name}-summary", "summary",
                       {"sweep": self.sweep_name, "n_models": len(table_rows)})
      ok = False
      try:
        columns, data = _table(table_rows)
        table = wandb.Table(columns=columns, data=data, allow_mixed_types=True)
        payload = {"scaling_table": table}
        for name, path in images.items():
          payload[f"plots/{name}"] = wandb.Image(str(path), caption=name)
        run.log(payload)
        run.summary.update({"fits": _jsonable(fits)})
        if self.mode == "online":  # reading run.url offline prints a warning
          self.summary_url = run.url
        ok = True
      finally:
        run.finish(exit_code=0 if ok else 1)
    finally:
      self.seconds += time.perf_counter() - start


class JsonlTracker:
  """Appends plain JSON lines to `workdir/metrics.jsonl` (as big_vision does).

  One line per model: {"kind": "model", "model_id", **config, **summary, "curves"},
  one per summary: {"kind": "summary", "rows", "images", "fits"}. A rerun appends
  again; readers keep the last line per model_id. NaN/inf are written as null.
  """

  def __init__(self, workdir):
    self.path = pathlib.Path(workdir) / "metrics.jsonl"
    self.seconds = 0.0

  def _write(self, record: dict) -> None:
    start = time.perf_counter()
    try:
      self.path.parent.mkdir(parents=True, exist_ok=True)
      line = json.dumps(_jsonable(record), allow_nan=False)
      with self.path.open("a") as f:
        f.write(line + "\n")
    finally:
      self.seconds += time.perf_counter() - start

  def log_model(self, model_id: str, config: dict, curves: dict, summary: dict) -> None:
    self._write({"kind": "model", "model_id": model_id, **config, **summary,
                 "curves": curves})

  def log_summary(self, table_rows: list[dict], images: dict, fits: dict) -> None:
    self._write({"kind": "summary", "rows": table_rows,
                 "images": {k: str(v) for k, v in images.items()}, "fits": fits})
