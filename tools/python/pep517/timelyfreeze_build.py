"""timelyfreeze_build: the PEP 517 build backend of tools/python.

It lives in the tree (pyproject.toml's backend-path) and needs nothing but
the standard library, so `pip install tools/python` builds and installs the
module with no package index and no build isolation to fill: the build
requires nothing.  It builds a pure-Python wheel of timelyfreeze_plan/ and
an sdist of this folder (pyproject.toml, pep517/, timelyfreeze_plan/); the
version is timelyfreeze_plan.__version__, read from the source, not
imported.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "timelyfreeze_plan"
NAME = "timelyfreeze-plan"  # the distribution's name, what pip show and pip uninstall take
METADATA_FIELDS = (
    ("Summary", "Apply a TimelyFreeze plan (tf-plan's plan.json) in a PyTorch pipeline run"),
    ("License", "MIT"),
    ("Requires-Python", ">=3.8"),
)
SDIST_PARTS = ("pyproject.toml", "pep517", PACKAGE)
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can hold


def version():
    """The package's __version__ from its __init__.py; ValueError when absent."""
    with open(os.path.join(ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise ValueError(f"{PACKAGE}/__init__.py: no __version__ = \"...\" line")
    return m.group(1)


def metadata():
    """The core metadata (METADATA in a wheel, PKG-INFO in an sdist)."""
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version()}"]
    lines += [f"{key}: {value}" for key, value in METADATA_FIELDS]
    return ("\n".join(lines) + "\n").encode()


def source_files(part):
    """Paths under ROOT/part (a file or a folder), relative to ROOT, sorted;
    compiled files and caches left out."""
    top = os.path.join(ROOT, part)
    if os.path.isfile(top):
        return [part]
    found = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, ROOT)
        found += [os.path.join(rel, f) for f in files if not f.endswith(".pyc")]
    return sorted(found)


def read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def wheel_entries():
    """(path in the wheel, bytes) for every file of the wheel, RECORD last."""
    dist_info = f"{PACKAGE}-{version()}.dist-info"
    entries = [(rel.replace(os.sep, "/"), read(rel)) for rel in source_files(PACKAGE)]
    wheel = "Wheel-Version: 1.0\nGenerator: timelyfreeze_build\nRoot-Is-Purelib: true\n" \
            "Tag: py3-none-any\n"
    entries += [(f"{dist_info}/METADATA", metadata()), (f"{dist_info}/WHEEL", wheel.encode())]
    record = [record_line(path, data) for path, data in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    return entries


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 517: writes the wheel into wheel_directory; returns its file name."""
    name = f"{PACKAGE}-{version()}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in wheel_entries():
            info = zipfile.ZipInfo(path, ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def add_to_tar(tar, path, data):
    info = tarfile.TarInfo(path)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def build_sdist(sdist_directory, config_settings=None):
    """PEP 517: writes the sdist (.tar.gz) into sdist_directory; returns its
    file name."""
    base = f"{PACKAGE}-{version()}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        add_to_tar(tar, f"{base}/PKG-INFO", metadata())
        for part in SDIST_PARTS:
            for rel in source_files(part):
                add_to_tar(tar, f"{base}/{rel.replace(os.sep, '/')}", read(rel))
    return name
