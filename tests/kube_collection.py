"""The kubernetes.core collection for tests that run the playbooks: from the pinned `ansible`
wheel on PyPI (only its kubernetes/core directory is kept), cached in ~/.cache/itbench/tools."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from itbench.stack import pins

ANSIBLE_WHEEL = str(pins()["ansible"]["wheel"])
ANSIBLE_WHEEL_SHA256 = "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414"
"""The digest of the pinned wheel (PyPI's); a new pin needs its digest here."""
COLLECTIONS = (
    Path.home() / ".cache" / "itbench" / "tools" / f"{ANSIBLE_WHEEL.replace('==', '-')}-collections"
)
K8S_MODULE = COLLECTIONS / "ansible_collections" / "kubernetes" / "core" / "plugins" / "modules"


def install_kubernetes_core() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", ANSIBLE_WHEEL, "-d", tmp],
            check=True,
            capture_output=True,
            timeout=600,
        )
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert digest == ANSIBLE_WHEEL_SHA256, f"{wheel.name} has sha256 {digest}"
        staging = COLLECTIONS.with_name(f"{COLLECTIONS.name}.{Path(tmp).name}")
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith("ansible_collections/kubernetes/core/"):
                    archive.extract(name, staging)
        COLLECTIONS.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(COLLECTIONS)
        except OSError:  # another worker got there first
            shutil.rmtree(staging, ignore_errors=True)


def kubernetes_core() -> str:
    """The collections path holding kubernetes.core (downloaded once; the test is skipped when
    the package index cannot be reached)."""
    if not (K8S_MODULE / "k8s.py").is_file():
        try:
            install_kubernetes_core()
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot download {ANSIBLE_WHEEL} from the package index: {exc.stderr}")
    return str(COLLECTIONS)
