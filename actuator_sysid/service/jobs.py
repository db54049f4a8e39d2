"""Fit jobs: a durable queue in the database, drained by a dispatcher into an executor.

The fits table is the queue (db.py): the dispatcher claims queued rows while its executor has room and
launches each as `run_fit_job`, either in a spawned local worker process (executor "local", the default)
or as a Ray task on a cluster (executor "ray"; `num_gpus=1` when the fit asks for a CUDA device). Workers
write progress, heartbeats, log lines, artifacts and the outcome straight to the same database and
artifact store, under their claim, so a stale worker can never overwrite a fit that moved on.

Restart and failure policy: a fit whose worker died (process killed, Ray worker lost, no heartbeat for
`lease_s`) is queued again while it has attempts left (`fit_attempts`) and otherwise failed with the
reason; fits a previous local server left running are handled the same way at start-up; a graceful stop
queues its running fits again without counting the attempt. Cancel is cooperative (the worker stops at its
next progress report) with a kill after a grace period; the time limit works the same way.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import threading
import time
from multiprocessing import forkserver
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from ..datasets.recording import DatasetError
from ..files import dumps
from ..fitting.fit import FitRequestError
from ..fitting.request import check_device
from .db import STOPPED, NotFoundError, Repository, worker_name
from .kinds import kind_of
from .runs import run_summary
from .settings import Settings
from .storage import Storage, StorageFullError, out_of_space

log = logging.getLogger("actuator_sysid.service")

PROGRESS_INTERVAL_S = 0.2
DISK_FULL_EXIT = 28  # a worker's exit code when not even its failure could be written (28: ENOSPC)
DISK_FULL_REASON = (
    "the fit's worker could not write its results or progress: the server's disk is full (the data folder or "
    "the database); free space and retry the fit"
)
KILL_GRACE_S = 10.0  # after a cancel or the time limit, how long a worker has to stop by itself
WORKER_NICE = 10  # CPU priority offset of local fit workers where SCHED_IDLE is unavailable


# --- the worker side ---


class _Stop(Exception):
    """Raised inside the fit by the progress callback: "cancel", "lost" (claim gone) or "time"."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Reporter:
    """The fit's progress callback: writes progress (throttled), keeps the claim alive, stops the fit on
    cancel, lost claim or time limit; a local worker also stops when its server process (`server`) is gone."""

    def __init__(
        self, repo: Repository, fit_id: str, claim: str, settings: Settings, server: int | None
    ) -> None:
        self.repo, self.fit_id, self.claim = repo, fit_id, claim
        self.limit = settings.job_time_limit_s
        self.server = server
        self.checked = 0.0
        self.started = time.monotonic()
        self.last = 0.0
        self.last_decile = -1
        self.state = "ok"
        self._done = threading.Event()
        self._beat_s = min(settings.lease_s / 4, 5.0)
        self._thread = threading.Thread(target=self._beat, name="fit-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._done.wait(self._beat_s):
            if self.server_gone():
                os._exit(1)  # the server died while the fit sat between progress reports
            try:
                state = self.repo.heartbeat(self.fit_id, self.claim)
                if state != "ok":
                    self.state = state
            except Exception:  # a database hiccup: the next beat tries again
                log.warning("heartbeat of fit %s failed", self.fit_id, exc_info=True)

    def close(self) -> None:
        self._done.set()

    def server_gone(self) -> bool:
        """Whether the server that launched this worker has ended (gone, or a zombie nobody reaped yet)."""
        return self.server is not None and not process_alive(self.server)

    def __call__(self, fraction: float, message: str) -> None:
        now = time.monotonic()
        if now - self.checked >= PROGRESS_INTERVAL_S:
            self.checked = now
            if self.server_gone():  # nobody reads the result
                raise SystemExit(1)
        if self.state != "ok":
            raise _Stop(self.state)
        if now - self.started > self.limit:
            raise _Stop("time")
        if now - self.last < PROGRESS_INTERVAL_S and fraction < 1.0:
            return
        self.last = now
        state = self.repo.set_progress(self.fit_id, fraction, message, self.claim)
        if state != "ok":
            raise _Stop(state)
        decile = int(min(max(fraction, 0.0), 1.0) * 10)
        if decile != self.last_decile:  # a log line every 10 %: the event stream's log, not a flood
            self.last_decile = decile
            self.repo.add_event(self.fit_id, f"{decile * 10}%: {message}")


def _configure_worker_logging(settings: Settings) -> None:
    from .logs import configure_logging

    configure_logging(settings.log_format)


def _threads(pid: int) -> list[int]:
    """The thread ids of process `pid` (0: this one); [pid] where /proc cannot say."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid or 'self'}/task")]
    except OSError:
        return [pid]


def yield_cpu_to_requests(pid: int = 0) -> str:
    """Make process `pid` (0: this one) batch work that never delays a request: Linux SCHED_IDLE, which runs
    only on CPU time no normal task wants and is preempted the moment the API wakes, so the polled routes keep
    their latency while a fit computes; nice +10 where SCHED_IDLE is unavailable (this process only).

    The policy is per thread and inherited only by threads started later, so every thread the process has
    is set: the ones its imports had already started (OpenBLAS's pools, which spin while the fit computes)
    otherwise run at normal priority beside the API (BENCHMARKS.md, Service)."""
    if hasattr(os, "SCHED_IDLE"):
        done = 0
        for tid in _threads(pid):
            with contextlib.suppress(OSError):  # a thread may end meanwhile
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                done += 1
        if done:
            return "idle"
    if pid:
        return "normal"
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
        return "nice"
    return "normal"


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs: it exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def run_fit_job(settings: Settings, fit_id: str, claim: str, server: int | None = None) -> None:
    """Worker entry (local process or Ray task): run one claimed fit to an outcome in the database.

    `server`: the pid of the local server that launched it, watched so the fit stops when that server ends
    (a warm worker's parent is the forkserver, which outlives it). The user sees messages, not tracebacks; a
    traceback goes to the worker's log only.
    """
    _configure_worker_logging(settings)
    if (
        server is not None and settings.worker_priority == "idle"
    ):  # a local worker yields to the API's requests
        yield_cpu_to_requests()
    repo = Repository(settings.database_url, run_migrations=False)
    reporter: _Reporter | None = None
    try:
        fit = repo.get_fit(fit_id)
        repo.set_worker(fit_id, claim, worker_name())
        reporter = _Reporter(repo, fit_id, claim, settings, server)
        try:
            storage = Storage(settings.data_dir)
            check_device(str((fit.get("request") or {}).get("device") or "cpu"))
            rec = storage.load_recording(repo.artifacts("dataset", fit["dataset_id"]))
            started = time.monotonic()
            out = kind_of(fit["request"]).compute(repo, storage, settings, fit, rec, reporter)
            blobs = storage.save_files({**out.files(), "report_data.json": dumps(out.report)})
            if repo.finish_fit(fit_id, out.result, blobs, claim, summary=run_summary(fit, out.result)):
                repo.add_event(fit_id, f"fit took {time.monotonic() - started:.1f} s")
            elif repo.get_fit(fit_id)["cancel_requested"]:  # cancel asked while the files were stored
                repo.mark_cancelled(fit_id, claim)
        except _Stop as stop:
            if stop.why == "cancel":
                repo.mark_cancelled(fit_id, claim)
            elif stop.why == "time":
                repo.fail_fit(
                    fit_id,
                    f"the fit exceeded the time limit of {settings.job_time_limit_s:g} s "
                    "(ACTUATOR_SYSID_JOB_TIME_LIMIT_S); retry with a smaller budget",
                    claim,
                )
            # "lost": the fit was re-queued, cancelled or deleted meanwhile; nothing of ours to record
        except (DatasetError, FitRequestError, NotFoundError) as e:
            repo.fail_fit(fit_id, str(e), claim)
        except Exception as e:
            if out_of_space(e):  # the fit's files or the database had no room; the user can act on it
                _fail_out_of_space(repo, fit_id, e, claim)
                return
            log.exception("fit %s failed", fit_id)
            repo.fail_fit(fit_id, f"internal error during the fit: {type(e).__name__}: {e}", claim)
    except Exception as e:  # claiming the fit or starting its reporter wrote to a full database
        if not out_of_space(e):
            raise
        _fail_out_of_space(repo, fit_id, e, claim)
    finally:
        if reporter is not None:
            reporter.close()
        repo.close()


def _fail_out_of_space(repo: Repository, fit_id: str, e: Exception, claim: str, tries: int = 4) -> None:
    """Fail the fit saying the disk is full, retrying a few seconds: the database may share that disk (the
    fit's partial files were removed, which may be room enough). When it stays full the worker exits with
    DISK_FULL_EXIT and the dispatcher records the reason once the database takes writes again."""
    if isinstance(e, OSError):
        why = e if isinstance(e, StorageFullError) else StorageFullError("the fit's results", e)
        reason = f"the fit could not be stored: {why}"
    else:
        reason = DISK_FULL_REASON
    for k in range(tries):
        try:
            repo.fail_fit(fit_id, reason, claim)
            return
        except Exception as again:
            if not out_of_space(again):
                raise
            time.sleep(0.5 * 2**k)
    log.error("fit %s: the disk is full; not even its failure could be recorded", fit_id)
    raise SystemExit(DISK_FULL_EXIT)


def run_ray_fit_job(settings: Settings, fit_id: str, claim: str) -> None:
    """Ray task entry: `run_fit_job` with no API parent process to watch (Ray owns the worker)."""
    run_fit_job(settings, fit_id, claim)


# --- executors ---


class Executor(Protocol):
    """Where claimed fits run. `poll` returns (fit id, claim, reason) for every finished run: reason is None
    when the worker ended normally (it recorded the outcome), else why it died."""

    kind: str

    def free(self) -> int: ...
    def launch(self, fit: dict[str, Any]) -> None: ...
    def poll(self) -> list[tuple[str, str, str | None]]: ...
    def kill(self, fit_id: str) -> None: ...
    def held(self) -> dict[str, str]: ...  # fit id → claim of the runs in flight
    def shutdown(self) -> None: ...


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA driver a fit could use."""
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def worker_context(start: str, idle: bool = False) -> Any:
    """The multiprocessing context fit workers start in: `spawn` (a fresh interpreter), or a forkserver that
    imported worker_preload once, started in the background now: each worker begins with the fitting stack
    loaded instead of spending seconds of CPU importing it. `idle`: the workers run idle, and so does the
    forkserver's preload (_start_forkserver)."""
    warm = start == "warm" or (start == "auto" and not has_nvidia_gpu())
    if not warm or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["actuator_sysid.service.worker_preload"])
    threading.Thread(
        target=_start_forkserver, args=(idle,), name="fit-worker-forkserver", daemon=True
    ).start()
    return ctx


def _start_forkserver(idle: bool) -> None:
    """Start the workers' forkserver; where the workers run idle, at their priority: its preload is seconds of
    CPU done for fits, so it neither delays a request nor takes a busy machine's cores before a fit needs it."""
    forkserver.ensure_running()
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if idle and pid:
        yield_cpu_to_requests(pid)


class LocalExecutor:
    """Worker processes on this machine, at most `settings.workers` at once (worker_context)."""

    kind = "local"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._ctx = worker_context(settings.worker_start, idle=settings.worker_priority == "idle")
        self._procs: dict[str, tuple[BaseProcess, str]] = {}

    def free(self) -> int:
        return self.settings.workers - len(self._procs)

    def launch(self, fit: dict[str, Any]) -> None:
        proc = self._ctx.Process(
            target=run_fit_job,
            args=(self.settings, fit["id"], fit["claim"], os.getpid()),
            name=f"fit-{fit['id'][:8]}",
        )
        proc.start()
        # idle from its first instruction: its imports alone take seconds of CPU
        if proc.pid is not None and self.settings.worker_priority == "idle":
            yield_cpu_to_requests(proc.pid)
        self._procs[fit["id"]] = (proc, fit["claim"])

    def poll(self) -> list[tuple[str, str, str | None]]:
        done = []
        for fit_id, (proc, claim) in list(self._procs.items()):
            if proc.is_alive():
                continue
            proc.join()
            del self._procs[fit_id]
            reason = (
                None
                if proc.exitcode == 0
                else DISK_FULL_REASON
                if proc.exitcode == DISK_FULL_EXIT
                else (
                    f"the fit worker process stopped unexpectedly (exit code {proc.exitcode}); the server log has "
                    "details"
                )
            )
            done.append((fit_id, claim, reason))
        return done

    def kill(self, fit_id: str) -> None:
        if fit_id in self._procs:
            self._procs[fit_id][0].kill()

    def held(self) -> dict[str, str]:
        return {k: claim for k, (_p, claim) in self._procs.items()}

    def shutdown(self) -> None:
        for proc, _claim in self._procs.values():
            proc.terminate()
        for proc, _claim in self._procs.values():
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)


class RayExecutor:
    """Each fit is one Ray task on the cluster at `settings.ray_address`; `settings.workers` in flight at most.

    Tasks share the database and the artifact store (data_dir must be the same path on every Ray node:
    a shared volume). Ray's own retries are off: the queue's attempts decide, with the reason recorded.
    """

    kind = "ray"

    def __init__(self, settings: Settings) -> None:
        import ray

        self.settings, self._ray = settings, ray
        if not ray.is_initialized():
            ray.init(
                address=settings.ray_address or "auto",
                namespace="actuator-sysid",
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        self._remote = ray.remote(max_retries=0)(run_ray_fit_job)
        self._refs: dict[str, tuple[Any, str]] = {}

    def free(self) -> int:
        return self.settings.workers - len(self._refs)

    def launch(self, fit: dict[str, Any]) -> None:
        device = str((fit.get("request") or {}).get("device", "cpu"))
        opts = {
            "num_cpus": 1,
            "num_gpus": 1 if device.startswith("cuda") else 0,
            "name": f"fit-{fit['id'][:8]}",
        }
        ref = self._remote.options(**opts).remote(self.settings, fit["id"], fit["claim"])
        self._refs[fit["id"]] = (ref, fit["claim"])

    def poll(self) -> list[tuple[str, str, str | None]]:
        if not self._refs:
            return []
        by_ref = {ref: (fit_id, claim) for fit_id, (ref, claim) in self._refs.items()}
        ready, _ = self._ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        done = []
        for ref in ready:
            fit_id, claim = by_ref[ref]
            del self._refs[fit_id]
            reason = None
            try:
                self._ray.get(ref)
            except self._ray.exceptions.TaskCancelledError:
                reason = "the Ray task was cancelled"
            except self._ray.exceptions.RayError as e:
                first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
                reason = f"the Ray worker running the fit died ({type(e).__name__}: {first})"
            done.append((fit_id, claim, reason))
        return done

    def kill(self, fit_id: str) -> None:
        if fit_id in self._refs:
            with contextlib.suppress(Exception):
                self._ray.cancel(self._refs[fit_id][0], force=True)

    def held(self) -> dict[str, str]:
        return {k: claim for k, (_r, claim) in self._refs.items()}

    def shutdown(self) -> None:
        for fit_id in list(self._refs):
            self.kill(fit_id)
        with contextlib.suppress(Exception):
            self._ray.shutdown()


def make_executor(settings: Settings) -> Executor:
    return RayExecutor(settings) if settings.executor == "ray" else LocalExecutor(settings)


# --- the dispatcher ---


class JobRunner:
    """Claims queued fits from the database into the executor and watches what runs, from one thread."""

    def __init__(self, settings: Settings, repo: Repository) -> None:
        self.settings, self.repo = settings, repo
        self.executor: Executor | None = None
        self.owner = worker_name()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._kill_at: dict[
            str, float
        ] = {}  # fit id → monotonic time after which a stopping worker is killed
        self._thread = threading.Thread(target=self._loop, name="fit-dispatcher", daemon=True)
        self._last_sweep = 0.0
        self._unrecorded: list[tuple[str, str, str]] = []  # (fit id, claim, reason) the database refused

    def start(self) -> None:
        """Apply the restart policy, connect the executor, then start dispatching."""
        if self.settings.executor == "local":  # a previous local server's workers died with it
            self.repo.recover_after_restart("local", self.settings.fit_attempts)
        self.executor = make_executor(self.settings)
        self._thread.start()

    def submit(self, _fit_id: str | None = None) -> None:
        """A fit was queued: wake the dispatcher (it claims from the database, so nothing is lost if not)."""
        self._wake.set()

    def queue_depth(self) -> int:
        return self.repo.fit_counts()["queued"]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop dispatching; fits still running are queued again (the attempt is not counted)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self.executor is None:
            return
        held = self.executor.held()
        if self.executor.kind == "local":
            self.executor.shutdown()
            for fit_id, claim in held.items():
                self.repo.worker_lost(fit_id, claim, STOPPED, self.settings.fit_attempts, count_attempt=False)
        else:
            for fit_id, claim in held.items():
                self.repo.worker_lost(fit_id, claim, STOPPED, self.settings.fit_attempts, count_attempt=False)
            self.executor.shutdown()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # keep dispatching whatever one fit did
                log.exception("fit dispatcher error")
            self._wake.wait(0.1)
            self._wake.clear()

    def _tick(self) -> None:
        ex = self.executor
        assert ex is not None
        for fit_id, claim, reason in ex.poll():
            self._kill_at.pop(fit_id, None)
            if reason is not None:
                self._unrecorded.append((fit_id, claim, reason))
        while self._unrecorded:  # oldest first; kept while the database refuses the write for want of space
            fit_id, claim, reason = self._unrecorded[0]
            try:
                status = self.repo.worker_lost(fit_id, claim, reason, self.settings.fit_attempts)
            except Exception as e:
                if out_of_space(e):
                    break  # the next tick tries again
                self._unrecorded.pop(0)
                raise
            self._unrecorded.pop(0)
            log.warning("fit %s: %s → %s", fit_id, reason, status)
        now = time.monotonic()
        if now - self._last_sweep > min(1.0, self.settings.lease_s / 4):
            self._last_sweep = now
            self._watch(ex, now)
        while ex.free() > 0 and not self._stop.is_set():
            fit = self.repo.claim_next(ex.kind, self.owner)
            if fit is None:
                break
            ex.launch(fit)
            log.info("fit %s started on the %s executor (attempt %d)", fit["id"], ex.kind, fit["attempts"])

    def _watch(self, ex: Executor, now: float) -> None:
        """Kill workers that ignore a cancel or overrun the time limit; re-queue or fail silent claims."""
        held = ex.held()
        for fit, reason in self.repo.stale_fits(self.settings.lease_s, self.settings.job_time_limit_s):
            if fit["id"] in held:
                ex.kill(fit["id"])
            status = self.repo.worker_lost(fit["id"], fit["claim"], reason, self.settings.fit_attempts)
            log.warning("fit %s: %s → %s", fit["id"], reason, status)
        for fit in self.repo.running_fits(ex.kind):
            if fit["id"] not in held:
                continue
            started = fit["started_at_dt"]
            over = (
                started is not None and (time.time() - started.timestamp()) > self.settings.job_time_limit_s
            )
            if fit["cancel_requested"] or over:
                deadline = self._kill_at.setdefault(fit["id"], now + KILL_GRACE_S)
                if now > deadline:
                    if over and not fit["cancel_requested"]:
                        self.repo.fail_fit(
                            fit["id"],
                            f"the fit exceeded the time limit of "
                            f"{self.settings.job_time_limit_s:g} s "
                            "(ACTUATOR_SYSID_JOB_TIME_LIMIT_S)",
                            fit["claim"],
                        )
                    ex.kill(fit["id"])
