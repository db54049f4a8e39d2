"""Uploads are parsed in a separate process, from the file the upload was streamed to.

Why: a 200 MB log takes far more memory to parse than its size, and a hostile file (a damaged Parquet, a
compression bomb) must not take the API down with it. The API process only moves bytes; a small pool of
spawned parser processes turns a file into a stored recording folder and a summary.

The pool never uses `max_tasks_per_child` (on Python 3.11 a worker's planned exit can deadlock the whole
executor, CPython gh-115634). It is recycled whole instead: after `tasks_per_pool` tasks new work goes to a
fresh pool and the old one finishes what it holds and exits. Every task has a deadline; a pool that misses
it is killed and rebuilt, and the request is answered 503 (`ParserBusyError`).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from ..datasets.names import clip_text
from ..datasets.recording import DatasetError
from ..files import json_safe

log = logging.getLogger("actuator_sysid.service")

MAX_MESSAGE_CHARS = 2000
"""Characters of an error message a parser process sends back (a message never echoes a whole input)."""


class ParserBusyError(RuntimeError):
    """The parser pool did not finish a task in time (stuck or overloaded); it was rebuilt. The service
    answers 503: the request may be sent again."""


def _exit_with_parent(parent: int, tmp: str | None = None) -> None:
    """Parser-process initializer: end this process when the API process is gone (e.g. SIGKILLed), and keep its
    temporary files in its own folder of the store's temp folder (`tmp`), swept at start-up if it is killed."""
    import atexit
    import shutil
    import time

    if tmp is not None:
        from .storage import process_tempdir

        atexit.register(shutil.rmtree, process_tempdir(Path(tmp)), True)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def parse_to_folder(
    path: str, name: str, metadata: dict | None, fmt: str | None, out_dir: str, options: dict[str, Any]
) -> dict[str, Any]:
    """Parser-process entry: read the table at `path`, save the Recording into `out_dir`, return its summary.

    `options` are passed on to `read_table` as keywords (new reader options need no change here).
    """
    from ..datasets.readers import read_table

    try:
        rec = read_table(Path(path), name, metadata, fmt, **options)
    except DatasetError as e:
        if len(str(e)) <= MAX_MESSAGE_CHARS:
            raise
        raise type(e)(clip_text(str(e), MAX_MESSAGE_CHARS)) from None
    except MemoryError:
        raise DatasetError(
            f"{clip_text(name, 200)}: this file needs more memory to read than the parser has; "
            "split it into smaller logs"
        ) from None
    except Exception as e:  # a reader bug or a file no check foresaw: still the user's answer is a 422
        logging.getLogger("actuator_sysid.parser").exception("unexpected error reading %s", name)
        raise DatasetError(
            f"{clip_text(name, 200)}: cannot read this file ({type(e).__name__}: {clip_text(str(e), 500)}); "
            "check that it is a canonical CSV or Parquet log"
        ) from None
    rec.save(Path(out_dir))
    return {"summary": json_safe(rec.summary()), "metadata": json_safe(rec.metadata)}


class ParserPool:
    """A lazily started pool of spawned worker processes for work that must not run in the API process.

    Rebuilt when a worker dies (e.g. out of memory) or a task misses its deadline; recycled whole after
    `tasks_per_pool` tasks, so a worker's grown memory is returned without per-worker recycling.
    """

    def __init__(
        self, workers: int = 1, tasks_per_pool: int = 200, timeout_s: float = 600.0, tmp: Path | None = None
    ) -> None:
        self.workers, self.tasks_per_pool, self.timeout_s = workers, tasks_per_pool, timeout_s
        self.tmp = tmp  # where the workers keep their temporary files (the store's temp folder)
        self._pool: ProcessPoolExecutor | None = None
        self._submitted = 0  # tasks sent to the current pool
        self._killed: weakref.WeakSet[ProcessPoolExecutor] = weakref.WeakSet()  # killed for a missed deadline
        self._lock = threading.Lock()

    def _get(self) -> ProcessPoolExecutor:
        """The current pool, started on first use; a fresh one once the current has had its share of tasks."""
        with self._lock:
            old = None
            if self._pool is not None and self._submitted >= self.tasks_per_pool:
                old, self._pool = self._pool, None
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=mp.get_context("spawn"),
                    initializer=_exit_with_parent,
                    initargs=(os.getpid(), None if self.tmp is None else str(self.tmp)),
                )
                self._submitted = 0
            self._submitted += 1
            pool = self._pool
        if old is not None:
            old.shutdown(wait=False)  # it finishes the tasks it holds, then its processes exit
        return pool

    def _discard(self, pool: ProcessPoolExecutor, kill: bool) -> None:
        """Stop using `pool`; with `kill`, end its processes at once (a stuck pool never finishes)."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
            if kill:
                self._killed.add(pool)
        procs = list((getattr(pool, "_processes", None) or {}).values()) if kill else []
        for p in procs:
            if p.is_alive():
                p.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., Any], *args: Any, name: str, died: Exception) -> Any:
        """fn(*args) in a worker process; its exceptions come back as they are.

        `died` is raised when the worker process stops (out of memory, a crash); ParserBusyError when the task
        is not done within `timeout_s` of being sent (the pool is then killed and rebuilt).
        """
        pool = self._get()
        try:
            fut = pool.submit(fn, *args)
            return await asyncio.wait_for(asyncio.wrap_future(fut), self.timeout_s)
        except TimeoutError:
            log.error("the worker pool missed the %g s deadline on %s; rebuilding it", self.timeout_s, name)
            self._discard(pool, kill=True)
            raise ParserBusyError(
                f"{clip_text(name, 200)}: the server's parser did not finish within {self.timeout_s:g} s (it is "
                "stuck or overloaded) and was restarted; send the request again"
            ) from None
        except BrokenProcessPool:
            if pool in self._killed:
                raise ParserBusyError(
                    f"{clip_text(name, 200)}: the server's parser was restarted while this request waited; "
                    "send it again"
                ) from None
            self._discard(pool, kill=False)
            log.error("a worker process died while working on %s", name)
            raise died from None

    async def parse(
        self, path: Path, name: str, metadata: dict | None, fmt: str | None, out_dir: Path, **options: Any
    ) -> dict[str, Any]:
        """Parse in a parser process; DatasetError from the reader comes back as is."""
        died = DatasetError(
            f"{clip_text(name, 200)}: the parser process stopped while reading this file (out of memory "
            "or a damaged file); check the file, or split it into smaller logs"
        )
        args = (str(path), name, metadata, fmt, str(out_dir), options)
        return await self.call(parse_to_folder, *args, name=name, died=died)

    def shutdown(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
