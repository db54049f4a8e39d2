"""The artifact store: files kept by content under the data folder, every write atomic and checksummed.

    data_dir/blobs/<sha256[:2]>/<sha256>   one file per distinct content (uploads, recordings, fit outputs)
    data_dir/tmp/                          uploads being received and files being written (temp + rename)

The database records which blobs belong to which dataset or fit, under which name, with the sha256 and
size, so a checksum can be verified at any time. Names a user sent never become paths: blobs are named by
their hash and temporary files by a random id.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO, Any

from ..datasets.recording import Recording
from .errors import NotFoundError

_ID = re.compile(r"[0-9a-f]{32}")
_SHA = re.compile(r"[0-9a-f]{64}")
CHUNK = 1 << 20

Blob = tuple[str, int]  # (sha256, size)


class UploadTooLargeError(ValueError):
    """An upload stream longer than the configured limit."""


FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class StorageFullError(OSError):
    """The data folder's disk (or quota) is full: nothing was stored; the service answers 507."""

    def __init__(self, what: str, cause: OSError) -> None:
        super().__init__(
            cause.errno,
            f"the server's data folder is full ({cause.strerror or cause}): cannot store {what}; "
            "nothing was stored. Free space in the data folder and try again",
        )

    def __str__(self) -> str:
        return str(self.strerror)


def disk_full(e: BaseException) -> bool:
    """Whether `e` is a write that failed for want of space (no space left, quota exceeded)."""
    return isinstance(e, OSError) and e.errno in FULL_ERRNOS


def out_of_space(e: BaseException) -> bool:
    """Whether a write failed for want of space: a file (ENOSPC, quota) or the database (SQLite's "database or
    disk is full", PostgreSQL's disk-full error), whichever layer raised it."""
    if isinstance(e, OSError):
        return disk_full(e)
    text = str(e).lower()
    return type(e).__name__ in ("OperationalError", "DiskFull") and (
        "disk is full" in text or "no space left" in text
    )


# temp entries are named <TEMP_PREFIX><pid>-<uuid>: at start-up those of processes gone from this host are swept
TEMP_PREFIX = f"t{hashlib.sha1(os.uname().nodename.encode()).hexdigest()[:8]}-"


def process_tempdir(tmp: Path) -> Path:
    """This process's own folder in the store's temp folder, made Python's default temp folder (`tempfile`), so
    whatever libraries spool there (multipart uploads, unpacked zips) is swept at start-up once the process is
    gone, as `temp_path` files are."""
    folder = tmp / f"{TEMP_PREFIX}{os.getpid()}-proc"
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(folder)
    return folder


def new_id() -> str:
    return uuid.uuid4().hex


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


class Storage:
    """The data folder's content-addressed store."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir)
        self.blobs = self.root / "blobs"
        self.tmp = self.root / "tmp"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)

    # --- blobs ---

    def blob_path(self, sha: str) -> Path:
        if not _SHA.fullmatch(sha):
            raise NotFoundError(f"no stored file {sha!r}: checksums are 64 lowercase hex digits")
        return self.blobs / sha[:2] / sha

    def temp_path(self, suffix: str = "") -> Path:
        """A fresh path in the store's temp folder (same filesystem as the blobs, so renames are atomic), named
        after this process so a restart can sweep what a killed one left."""
        return self.tmp / f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}{suffix}"

    def temp_dir(self) -> Path:
        """A fresh folder in the temp folder, named as `temp_path` names files."""
        return Path(tempfile.mkdtemp(dir=self.tmp, prefix=f"{TEMP_PREFIX}{os.getpid()}-"))

    def put_file(self, path: Path, sha: str | None = None) -> Blob:
        """Move a finished temp file into the store under its hash; identical content is kept once."""
        sha = sha or sha256_file(path)
        size = path.stat().st_size
        final = self.blob_path(sha)
        if final.exists():
            path.unlink(missing_ok=True)
        else:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, final)
        return sha, size

    def put_bytes(self, data: str | bytes) -> Blob:
        raw = data.encode() if isinstance(data, str) else data
        tmp = self.temp_path(".part")
        try:
            with open(tmp, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            return self.put_file(tmp, hashlib.sha256(raw).hexdigest())
        except OSError as e:
            if disk_full(e) and not isinstance(e, StorageFullError):
                raise StorageFullError(f"a file of {len(raw)} bytes", e) from None
            raise
        finally:
            tmp.unlink(missing_ok=True)

    def read_bytes(self, sha: str) -> bytes:
        path = self.blob_path(sha)
        if not path.is_file():
            raise NotFoundError(f"the stored file {sha[:12]}… is missing from {self.blobs}")
        return path.read_bytes()

    def verify(self, sha: str) -> bool:
        """True when the stored blob exists and still hashes to its name."""
        path = self.blob_path(sha)
        return path.is_file() and sha256_file(path) == sha

    def receive(self, src: IO[bytes], limit: int) -> tuple[Path, Blob]:
        """Copy an upload stream into a temp file in chunks, hashing as it goes; never the whole body in memory.

        Raises UploadTooLargeError past `limit` bytes (the partial file is removed). The caller owns the temp
        file: `put_file` it, or unlink it.
        """
        tmp = self.temp_path(".upload")
        h, size = hashlib.sha256(), 0
        try:
            with open(tmp, "wb") as f:
                while chunk := src.read(CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise UploadTooLargeError(
                            f"upload too large: more than {limit} bytes; the limit is "
                            f"{limit} bytes (ACTUATOR_SYSID_MAX_UPLOAD_BYTES)"
                        )
                    h.update(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            if isinstance(e, OSError) and disk_full(e):
                raise StorageFullError(f"the upload ({size} bytes received)", e) from None
            raise
        return tmp, (h.hexdigest(), size)

    # --- recordings and fit files ---

    def put_folder(self, folder: Path) -> dict[str, Blob]:
        """Store every file of a (temp) folder; returns name → blob."""
        return {p.name: self.put_file(p) for p in sorted(folder.iterdir()) if p.is_file()}

    def save_recording(self, rec: Recording) -> dict[str, Blob]:
        """Store a parsed recording (recording.json + arrays.npz)."""
        folder = self.temp_dir()
        try:
            rec.save(folder)
            return self.put_folder(folder)
        except OSError as e:
            if disk_full(e) and not isinstance(e, StorageFullError):
                raise StorageFullError("the recording", e) from None
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def save_dataset(self, dataset_id: str, rec: Recording, original: bytes) -> dict[str, Blob]:
        """Store a recording and its upload bytes; returns the artifacts for `Repository.create_dataset`."""
        return {**self.save_recording(rec), "original": self.put_bytes(original)}

    def load_recording(self, artifacts: dict[str, dict[str, Any]]) -> Recording:
        """A stored recording back from its artifacts (name → {sha256}), via links in a temp folder."""
        missing = [n for n in ("recording.json", "arrays.npz") if n not in artifacts]
        if missing:
            raise NotFoundError(f"the dataset's stored recording lacks {missing}")
        folder = self.temp_dir()
        try:
            for name in ("recording.json", "arrays.npz"):
                src = self.blob_path(artifacts[name]["sha256"])
                if not src.is_file():
                    raise NotFoundError(
                        f"the stored file {name} of this dataset is missing from {self.blobs}"
                    )
                os.symlink(src, folder / name)
            return Recording.load(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def save_files(self, files: dict[str, str | bytes]) -> dict[str, Blob]:
        """Store every file, or none: on a failed write (a full disk) the blobs this call added are removed,
        giving their space back for the database to record why."""
        saved: dict[str, Blob] = {}
        added: list[str] = []
        try:
            for name, data in files.items():
                raw = data.encode() if isinstance(data, str) else data
                sha = hashlib.sha256(raw).hexdigest()
                if not self.blob_path(sha).exists():
                    added.append(sha)
                saved[name] = self.put_bytes(raw)
        except BaseException:
            for sha in added:
                self.blob_path(sha).unlink(missing_ok=True)
            raise
        return saved

    # --- housekeeping ---

    def collect_garbage(self, referenced: set[str], older_than_s: float = 3600.0) -> int:
        """Remove temp files and unreferenced blobs older than `older_than_s` (left by crashes or deletes).

        The age guard keeps files another process is about to record (uploads in flight elsewhere).
        """
        cutoff = time.time() - older_than_s
        removed = 0
        for p in list(self.tmp.iterdir()):
            try:
                # a live process's own folder stays whatever its age; anything else goes once old or orphaned
                old = p.lstat().st_mtime < cutoff and not p.name.endswith("-proc")
                if old or _orphan(p.name):
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        for p in self.blobs.glob("??/*"):
            try:
                if p.name not in referenced and p.stat().st_mtime < cutoff:
                    p.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    @staticmethod
    def check_id(kind: str, item_id: str) -> str:
        if not _ID.fullmatch(item_id):
            raise NotFoundError(f"{kind} {item_id!r} not found: ids are 32 lowercase hex digits")
        return item_id


def _orphan(name: str) -> bool:
    """Whether a temp entry belongs to a process of this host that has ended (killed mid-upload or mid-fit)."""
    if not name.startswith(TEMP_PREFIX):
        return False
    pid = name[len(TEMP_PREFIX) :].partition("-")[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
