"""Every file a robot model refers to, checked to lie inside the model's folder before an importer opens any.

MJCF includes, compiler asset folders and asset files, URDF mesh and texture file names (`package://`,
`file://`, absolute, relative) and USD asset paths (sublayers, references, payloads, asset values, in any USD
format) are resolved the ways Newton's and MuJoCo's importers may resolve them, and each way must land inside
the root (the uploaded folder or zip; on the CLI the model's folder) or a package root the CLI names. A
reference that leaves them is refused by its text, before anything outside is opened or even looked up, so the
refusal reads the same whether that outside file exists or not. Symbolic links are resolved before the check.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..datasets.recording import DatasetError

MAX_DEPTH = 16  # nested MJCF includes / USD layers followed from the model file
MAX_FILES = 256  # model files (MJCF includes, USD layers) read for one model
MJCF = (".xml", ".mjcf")
URDF = (".urdf",)
USD = (".usd", ".usda", ".usdc", ".usdz")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # a URI scheme (or a drive letter): never a local path


class ModelFileError(DatasetError):
    """A model file's reference that is refused; models/robot.py raises it as a RobotError."""


def quote_ref(ref: str) -> str:
    """A reference as the file wrote it, quoted and cut to ~200 characters for a message."""
    return repr(ref if len(ref) <= 200 else ref[:200] + "…")


@dataclass(frozen=True)
class Roots:
    """The folders a model may read from: the root first, then the package roots."""

    model: Path  # the model file, absolute (not resolved: the importers join paths to it as given)
    folders: tuple[Path, ...]  # absolute, normalized
    real: tuple[Path, ...]  # the same, symbolic links resolved
    cli: bool  # the root is the model's folder (the CLI), not an upload the service unpacked

    @classmethod
    def of(cls, model: Path, root: Path | None, packages: Sequence[Path]) -> Roots:
        folders = tuple(
            Path(os.path.abspath(p)) for p in (root if root is not None else model.parent, *packages)
        )
        real = tuple(p.resolve() for p in folders)
        return cls(Path(os.path.abspath(model)), folders, real, root is None)

    @property
    def where(self) -> str:
        home = "the model's folder" if self.cli else "the upload"
        return home + (" or a --package-root" if len(self.folders) > 1 else "")

    def inside(self, candidate: str) -> Path | None:
        """The candidate path resolved, when both its text and its real path lie inside a root; else None.

        The text is checked first: a path whose text leaves every root is refused without touching the disk.
        Then the path as the OS follows it and as its text normalizes (`a/link/..` differ) must both stay in."""
        lexical = os.path.normpath(candidate)
        if not any(Path(lexical).is_relative_to(r) for r in (*self.folders, *self.real)):
            return None
        try:
            reals = [Path(v).resolve() for v in (candidate, lexical)]
        except (OSError, RuntimeError):  # a link loop: refused as outside, by the same words
            return None
        return reals[0] if all(any(p.is_relative_to(r) for r in self.real) for p in reals) else None

    def name(self, path: Path) -> str:
        """A file inside a root, named relative to it (never a server path)."""
        for r in (*self.folders, *self.real):
            if path.is_relative_to(r):
                return path.relative_to(r).as_posix() or path.name
        return path.name


def _refuse(roots: Roots, what: str, ref: str, in_file: Path, why: str = "") -> ModelFileError:
    """The one refusal for a reference that leaves the roots (the same words whether its target exists);
    `what` is the reference's form with {} where the reference goes, e.g. "<include file={}>"."""
    return ModelFileError(
        f"{roots.model.name}: {what.format(quote_ref(ref))} in {roots.name(in_file)} "
        f"{why or 'points outside ' + roots.where}; a model may read only files inside {roots.where}"
    )


def _check_all(roots: Roots, candidates: Sequence[str], what: str, ref: str, in_file: Path) -> list[Path]:
    """Each way an importer may resolve `ref`, checked inside the roots; the resolved paths."""
    out = []
    for c in candidates:
        real = roots.inside(c)
        if real is None:
            raise _refuse(roots, what, ref, in_file)
        out.append(real)
    return out


def _parse_xml(path: Path, roots: Roots, what: str) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        why = e.strerror if isinstance(e, OSError) else str(e)
        raise ModelFileError(
            f"{roots.model.name}: {what} ({roots.name(path)}) cannot be read: {type(e).__name__}: {why}"
        ) from None


def _file_refs(elem: ET.Element) -> Iterator[tuple[str, str, str]]:
    """(tag, attribute, value) for every file an MJCF element names: `file`, and a cube texture's file*."""
    for key, value in elem.attrib.items():
        if key.startswith("file") and value:
            yield elem.tag, key, value


def _mjcf_files(roots: Roots) -> list[tuple[Path, ET.Element]]:
    """The main MJCF and every file it includes, recursively (bounded), each include checked inside the roots.

    Newton resolves an include beside the including file and MuJoCo beside the main file: both must be inside."""
    main_dir = str(roots.model.parent)
    try:
        first = ET.parse(roots.model).getroot()
    except (ET.ParseError, OSError):
        return []  # the importer names the parse error; nothing it could follow was read
    files, seen = [(roots.model, first)], {roots.model.resolve()}
    stack = [(roots.model, first, 0)]
    while stack:
        path, elem, depth = stack.pop()
        for inc in elem.iter("include"):
            ref = inc.get("file")
            if not ref:
                continue
            where = "<include file={}>"
            reals = _check_all(
                roots, [os.path.join(path.parent, ref), os.path.join(main_dir, ref)], where, ref, path
            )
            # the file each importer opens: the joined path as the OS follows it, and as its text normalizes
            ways = [
                Path(os.path.abspath(c))
                for c in (os.path.join(path.parent, ref), os.path.join(main_dir, ref))
            ]
            found = [w for w in dict.fromkeys([*reals, *ways]) if w.is_file()]
            if not found:
                raise _refuse(roots, where, ref, path, "is not a file inside " + roots.where)
            if depth + 1 > MAX_DEPTH:
                raise _refuse(roots, where, ref, path, f"nests includes deeper than {MAX_DEPTH} levels")
            for way in found:
                if way in seen:
                    continue  # a cycle: the importers name it
                seen.add(way)
                if len(seen) > MAX_FILES:
                    raise _refuse(roots, where, ref, path, f"makes the model more than {MAX_FILES} files")
                sub = _parse_xml(way, roots, f"<include file={quote_ref(ref)}>")
                files.append((way, sub))
                stack.append((way, sub, depth + 1))
    return files


def check_mjcf(roots: Roots) -> None:
    """Includes, <compiler> asset folders and asset files of an MJCF, all inside the roots.

    An asset may be looked up beside the main file or the authoring file, under any compiler asset folder the
    model states (Newton's and MuJoCo's orders differ): every one of those ways must stay inside."""
    files = _mjcf_files(roots)
    main_dir = str(roots.model.parent)
    dirs: list[str] = []
    for path, elem in files:
        for comp in elem.iter("compiler"):
            for key in ("assetdir", "meshdir", "texturedir"):
                if d := comp.get(key):
                    where = f"<compiler {key}={{}}>"
                    homes = (str(path.parent), main_dir)
                    _check_all(roots, [os.path.join(b, d) for b in homes], where, d, path)
                    dirs.append(d)
    for path, elem in files:
        bases = [str(path.parent), main_dir]
        bases += [os.path.join(b, d) for b in bases for d in dirs]
        for e in elem.iter():
            if e.tag == "include":
                continue
            for tag, key, ref in _file_refs(e):
                if tag == "model":  # MuJoCo would compile it as a model of its own, includes and all
                    why = "is a sub-model asset; sub-models are not read (Newton does not import them)"
                    raise _refuse(roots, "<model file={}>", ref, path, why)
                _check_all(roots, [os.path.join(b, ref) for b in bases], f"<{tag} {key}={{}}>", ref, path)


def _package_candidates(roots: Roots, name: str, rest: str) -> list[str]:
    """Where `package://name/rest` may lie: a package root the CLI names (holding `name`, or named `name`), a
    folder `name` among the model file's parents or at the upload's root, or the upload's root itself."""
    root = roots.folders[0]
    out = []
    for p in roots.folders[1:]:
        out += [os.path.join(p, name, rest)] + ([os.path.join(p, rest)] if p.name == name else [])
    parents = [roots.model.parent, *roots.model.parent.parents]
    parents = parents[: parents.index(root) + 1] if root in parents else [root]
    out += [os.path.join(a, rest) for a in parents if a.name == name]
    out += [os.path.join(root, name, rest), os.path.join(root, rest)]
    return out


def _has_package(roots: Roots, name: str) -> bool:
    """Whether a folder for package `name` is among the places `package://` is looked up (all inside roots)."""
    root = roots.folders[0]
    if any(p.name == name for p in roots.folders[1:]) or any(
        a.name == name for a in roots.model.parents if a.is_relative_to(root)
    ):
        return True
    return any(
        (real := roots.inside(os.path.join(p, name))) is not None and real.is_dir() for p in roots.folders
    )


def _urdf_target(roots: Roots, ref: str, where: str) -> Path:
    """The file a URDF file name points to, inside the roots (a missing one inside is fine: the importer skips
    it with a warning); anything that leaves them, or a URL, is refused."""
    model = roots.model
    if ref.startswith("package://"):
        name, _, rest = ref[len("package://") :].partition("/")
        if not name or not rest:
            raise _refuse(roots, where, ref, model, "is not package://NAME/PATH")
        reals = _check_all(roots, _package_candidates(roots, name, unquote(rest)), where, ref, model)
        if found := next((r for r in reals if r.is_file()), None):
            return found
        if not _has_package(roots, name):
            hint = (
                "name the folder holding it with --package-root DIR" if roots.cli else "zip it with the model"
            )
            why = f"names package {quote_ref(name)}, which is not in {roots.where} ({hint})"
            raise _refuse(roots, where, ref, model, why)
        return reals[-1]  # the package's file is missing: the importer skips it, as any missing mesh
    if ref.lower().startswith("file:"):
        parts = urlsplit(ref)
        if parts.netloc.lower() not in ("", "localhost") or parts.query or parts.fragment:
            raise _refuse(roots, where, ref, model, "is not a local file URI")
        ref_path = unquote(parts.path)
        if not ref_path.startswith("/"):
            raise _refuse(roots, where, ref, model, "is not an absolute local file URI")
        return _check_all(roots, [ref_path], where, ref, model)[0]
    if _SCHEME.match(ref):
        raise _refuse(roots, where, ref, model, "is a URL")
    return _check_all(roots, [os.path.join(model.parent, ref)], where, ref, model)[0]


def check_urdf(roots: Roots) -> str | None:
    """Every URDF file name (meshes, textures) inside the roots; the URDF text with them rewritten to the
    checked absolute paths (for the importers to read from text, where a relative name has no folder), or None
    when the file does not parse (the importer names the error)."""
    try:
        tree = ET.parse(roots.model)
    except (ET.ParseError, OSError):
        return None  # the importer names the parse error
    for elem in tree.getroot().iter():
        ref = elem.get("filename")
        if ref is None:
            continue
        elem.set("filename", str(_urdf_target(roots, ref, f"<{elem.tag} filename={{}}>")))
    return ET.tostring(tree.getroot(), encoding="unicode")


def _asset_paths(text: str) -> Iterator[str]:
    """The asset paths (`@...@`, `@@@...@@@`) in USD text as Sdf exports it, strings skipped."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            q = c * 3 if text.startswith(c * 3, i) else c
            i += len(q)
            while i < n and not text.startswith(q, i):
                i += 2 if text[i] == "\\" else 1
            i += len(q)
        elif c == "@":
            q = "@@@" if text.startswith("@@@", i) else "@"
            end = text.find(q, i + len(q))
            if end < 0:
                raise ModelFileError("an asset path in a USD layer is not closed")
            yield text[i + len(q) : end]
            i = end + len(q)
        else:
            i += 1


def _usd_layer_text(path: str, roots: Roots, shown: Path) -> str:
    """One USD layer (any format; a package member as `pkg.usdz[member]`) as USD text, its references unread."""
    from pxr import Sdf, Tf

    try:
        layer = Sdf.Layer.OpenAsAnonymous(path)
    except Tf.ErrorException as e:
        text = str(e).strip()
        first = text.split(" : '", 1)[-1].removesuffix("'").strip().replace("\n", " ")[:300]
        for r in sorted({str(f) for f in (*roots.folders, *roots.real)}, key=len, reverse=True):
            first = first.replace(r + os.sep, "").replace(r, ".")  # no server path in the message
        raise ModelFileError(
            f"{roots.model.name}: the USD layer {roots.name(shown)} cannot be read: {first}"
        ) from None
    if layer is None:
        raise ModelFileError(f"{roots.model.name}: the USD layer {roots.name(shown)} cannot be read")
    return str(layer.ExportToString())


def _usd_layers(path: Path) -> list[tuple[str, Path]]:
    """The layers to read in one USD file: itself, or each USD member of a .usdz package (shown as if unpacked
    beside it, where its relative asset paths anchor)."""
    if path.suffix.lower() != ".usdz":
        return [(str(path), path)]
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = [i.filename for i in z.infolist() if not i.is_dir()]
    except (OSError, zipfile.BadZipFile) as e:
        raise ModelFileError(f"{path.name}: not a readable USDZ package ({type(e).__name__})") from None
    nested = [m for m in names if m.lower().endswith(".usdz")]
    if nested:
        raise ModelFileError(
            f"{path.name}: holds the USDZ package {quote_ref(nested[0])}; nested packages are not read"
        )
    return [(f"{path}[{m}]", path.parent / m) for m in names if m.lower().endswith(USD)]


def _usd_target(roots: Roots, ref: str, shown: Path) -> Path | None:
    """The file an asset path names, inside the roots; None for an empty one. Expressions and URLs are
    refused; a package member (`pkg.usdz[member]`) is checked by its package."""
    where = "asset path {}"
    if not ref:
        return None
    if "`" in ref:
        raise _refuse(roots, where, ref, shown, "is an expression, not a plain path")
    plain = ref.split(":SDF_FORMAT_ARGS:", 1)[0]
    if plain.endswith("]") and "[" in plain:
        plain = plain[: plain.index("[")]
    if _SCHEME.match(plain):
        raise _refuse(roots, where, ref, shown, "is a URL")
    return _check_all(roots, [os.path.join(shown.parent, plain)], where, ref, shown)[0]


def check_usd(roots: Roots) -> None:
    """Every asset path (sublayers, references, payloads, asset values, clips) of a USD model and of the USD
    layers it reaches, inside the roots; each layer is read through Sdf alone (nothing it names is opened), and
    a referenced file another Sdf file format would read (not USD) is refused."""
    from pxr import Sdf

    stack, seen = [(roots.model, 0)], {roots.model.resolve()}
    while stack:
        path, depth = stack.pop()
        for layer, shown in _usd_layers(path):
            for ref in _asset_paths(_usd_layer_text(layer, roots, shown)):
                target = _usd_target(roots, ref, shown)
                if target is None:
                    continue
                ext = target.suffix.lower()
                if ext not in USD and Sdf.FileFormat.FindByExtension(ext.lstrip(".")) is not None:
                    raise _refuse(roots, "asset path {}", ref, shown, "is a non-USD layer; it is not read")
                if ext not in USD or target in seen or not target.is_file():
                    continue
                if depth + 1 > MAX_DEPTH or len(seen) >= MAX_FILES:
                    raise _refuse(
                        roots,
                        "asset path {}",
                        ref,
                        shown,
                        f"reaches past {MAX_DEPTH} levels or {MAX_FILES} layers",
                    )
                seen.add(target)
                stack.append((target, depth + 1))


def check_model_files(path: Path, root: Path | None = None, package_roots: Sequence[Path] = ()) -> str | None:
    """Check every file the model at `path` refers to lies inside `root` (default: the model's folder) or a
    package root; a ModelFileError names the first reference refused. Returns a URDF's text to import instead
    of the file, its file names rewritten to the checked paths (None for other formats, or a URDF that does
    not parse)."""
    for p in package_roots:
        if not p.is_dir():
            raise ModelFileError(f"--package-root {p}: not a folder")
    roots = Roots.of(path, root, package_roots)
    suffix = path.suffix.lower()
    if suffix in MJCF:
        check_mjcf(roots)
    elif suffix in URDF:
        return check_urdf(roots)
    elif suffix in USD:
        check_usd(roots)
    return None
