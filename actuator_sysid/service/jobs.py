"""Fit jobs: each fit runs in its own spawned worker process, so the API keeps answering while it computes.

The service only schedules and stores: `compute_fit` is a straight chain of core calls shared with the CLI.
Restart policy: a fit left `running` by a previous server process is marked failed ("server restarted
during the fit"); a fit left `queued` never began, so it is queued again.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import threading
import time
from dataclasses import dataclass, fields
from multiprocessing.process import BaseProcess

from ..datasets.recording import DatasetError, Recording
from ..fitting.api import (
    FitRequest,
    FitRequestError,
    ProgressFn,
    fit_recording,
    report_data,
    validate_request,
)
from .db import STOPPED, NotFoundError, Repository
from .settings import Settings
from .storage import Storage, dumps, json_safe

log = logging.getLogger("actuator_sysid.service")

PROGRESS_INTERVAL_S = 0.2


@dataclass
class FitOutputs:
    """What one fit produces: the API `result`, the report's plot data and the export files by name."""

    result: dict
    report: dict
    exports: dict[str, str]

    def files(self) -> dict[str, str]:
        """The artifacts both the service and the CLI write: fit.json plus the exports."""
        return {"fit.json": dumps(self.result), **self.exports}


def request_from_dict(d: dict) -> FitRequest:
    """A stored request back as a FitRequest; keys this version does not know (older rows) are dropped."""
    known = {f.name for f in fields(FitRequest)}
    return FitRequest(**{k: v for k, v in d.items() if k in known})


def compute_fit(rec: Recording, req: FitRequest, progress: ProgressFn | None = None) -> FitOutputs:
    """Fit, collect the report data and render both Isaac Lab exports (exports from the unsanitised result)."""
    validate_request(rec, req)  # a stored request may predate a restart: say what is wrong before importing more
    from ..export.isaaclab import render_json, render_python  # the worker's dependency, not the API's

    raw = fit_recording(rec, req, progress)
    report = report_data(rec, raw)
    exports = {"isaaclab.py": render_python(raw), "isaaclab.json": render_json(raw)}
    return FitOutputs(result=json_safe(raw), report=json_safe(report), exports=exports)


class _DbProgress:
    """Progress callback writing to the database at most every PROGRESS_INTERVAL_S; stops an orphaned worker."""

    def __init__(self, repo: Repository, fit_id: str) -> None:
        self.repo, self.fit_id = repo, fit_id
        self.parent = os.getppid()
        self.last = 0.0

    def __call__(self, fraction: float, message: str) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL_S and fraction < 1.0:
            return
        if os.getppid() != self.parent:  # the server died: nobody is left to read the result
            raise SystemExit(1)
        self.last = now
        self.repo.set_progress(self.fit_id, fraction, message)


def run_fit_job(settings: Settings, fit_id: str) -> None:
    """Worker-process entry: run one queued fit to succeeded or failed; the user sees messages, not tracebacks."""
    logging.basicConfig(level=logging.INFO)
    repo = Repository(settings.database_url)
    try:
        fit = repo.get_fit(fit_id)
        if not repo.start_fit(fit_id):
            return
        try:
            storage = Storage(settings.data_dir)
            rec = storage.load_recording(fit["dataset_id"])
            out = compute_fit(rec, request_from_dict(fit["request"]), _DbProgress(repo, fit_id))
            storage.save_fit(fit_id, {**out.files(), "report_data.json": dumps(out.report)})
            repo.finish_fit(fit_id, out.result)
        except (DatasetError, FitRequestError, NotFoundError) as e:
            repo.fail_fit(fit_id, str(e))
        except Exception as e:
            log.exception("fit %s failed", fit_id)  # the traceback goes to the server log only
            repo.fail_fit(fit_id, f"internal error during the fit: {type(e).__name__}: {e}")
    finally:
        repo.close()


class JobRunner:
    """Queue of fit ids and at most `settings.workers` spawned worker processes, run from one thread."""

    def __init__(self, settings: Settings, repo: Repository) -> None:
        self.settings, self.repo = settings, repo
        self._ctx = mp.get_context("spawn")
        self._queue: queue.Queue[str] = queue.Queue()
        self._running: dict[str, BaseProcess] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fit-dispatcher", daemon=True)

    def start(self) -> None:
        """Apply the restart policy, then start dispatching."""
        for fit_id in self.repo.recover_after_restart():
            self.submit(fit_id)
        self._thread.start()

    def submit(self, fit_id: str) -> None:
        self._queue.put(fit_id)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop dispatching and end running workers; their fits fail with "server stopped during the fit"."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        for fit_id, proc in list(self._running.items()):
            proc.terminate()
            proc.join(timeout)
            self.repo.fail_fit(fit_id, STOPPED)
        self._running.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._reap()
                while len(self._running) < self.settings.workers and not self._stop.is_set():
                    try:
                        fit_id = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    proc = self._ctx.Process(target=run_fit_job, args=(self.settings, fit_id),
                                             name=f"fit-{fit_id[:8]}")
                    proc.start()
                    self._running[fit_id] = proc
            except Exception:  # keep dispatching whatever one fit did
                log.exception("fit dispatcher error")
            self._stop.wait(0.1)

    def _reap(self) -> None:
        """Collect finished workers; a worker that died without recording an outcome fails its fit."""
        for fit_id, proc in list(self._running.items()):
            if proc.is_alive():
                continue
            proc.join()
            del self._running[fit_id]
            if proc.exitcode != 0:
                self.repo.fail_fit(fit_id, f"the fit worker process stopped unexpectedly (exit code "
                                           f"{proc.exitcode}); the server log has details")
