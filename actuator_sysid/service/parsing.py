"""Uploads are parsed in a separate process, from the file the upload was streamed to.

Why: a 200 MB log takes far more memory to parse than its size, and a hostile file (a damaged Parquet, a
compression bomb) must not take the API down with it. The API process only moves bytes; a small pool of
spawned parser processes turns a file into a stored recording folder and a summary.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from ..datasets.recording import DatasetError
from ..files import json_safe

log = logging.getLogger("actuator_sysid.service")


def _exit_with_parent(parent: int) -> None:
    """Parser-process initializer: end this process when the API process is gone (e.g. SIGKILLed)."""
    import time

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
    except DatasetError:
        raise
    except Exception as e:  # a reader bug or a file no check foresaw: still the user's answer is a 422
        logging.getLogger("actuator_sysid.parser").exception("unexpected error reading %s", name)
        raise DatasetError(
            f"{name}: cannot read this file ({type(e).__name__}: {e}); check that it is a "
            "canonical CSV or Parquet log"
        ) from None
    rec.save(Path(out_dir))
    return {"summary": json_safe(rec.summary()), "metadata": json_safe(rec.metadata)}


class ParserPool:
    """A lazily started pool of spawned parser processes, rebuilt if one dies (e.g. out of memory)."""

    def __init__(self, workers: int = 1, tasks_per_child: int = 50) -> None:
        self.workers, self.tasks_per_child = workers, tasks_per_child
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _get(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=mp.get_context("spawn"),
                    max_tasks_per_child=self.tasks_per_child,
                    initializer=_exit_with_parent,
                    initargs=(os.getpid(),),
                )
            return self._pool

    async def parse(
        self, path: Path, name: str, metadata: dict | None, fmt: str | None, out_dir: Path, **options: Any
    ) -> dict[str, Any]:
        """Parse in a parser process; DatasetError from the reader comes back as is."""
        pool = self._get()
        try:
            fut = pool.submit(parse_to_folder, str(path), name, metadata, fmt, str(out_dir), options)
            return await asyncio.wrap_future(fut)
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            log.error("the upload parser process died while reading %s", name)
            raise DatasetError(
                f"{name}: the parser process stopped while reading this file (out of memory "
                "or a damaged file); check the file, or split it into smaller logs"
            ) from None

    def shutdown(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
