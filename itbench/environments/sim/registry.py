"""The twin's image registry: which image references can be pulled, for which CPU architectures,
and which program of the shop each one runs.

The images of the pinned chart (multi-arch, as the demo's release workflow publishes them), the
demo's other releases, the few third-party images faults and agents use, Chaos Mesh's pause
image, and upstream ITBench's single-architecture test images.
"""

from __future__ import annotations

import re
from functools import lru_cache

from itbench.core.shop import SERVICE_BY_NAME
from itbench.stack import chart_objects, demo_version

DEMO_REPOSITORY = "ghcr.io/open-telemetry/demo"
PAUSE_IMAGE = "gcr.io/google-containers/pause:latest"
"""The image Chaos Mesh's pod-failure puts in every container (its chart's default)."""
SINGLE_ARCH_IMAGES: dict[str, frozenset[str]] = {
    "quay.io/it-bench/hello-bench-arm64:2.0.0": frozenset({"arm64"}),
    "quay.io/it-bench/hello-bench-amd64:2.0.0": frozenset({"amd64"}),
}
"""Upstream ITBench's unsupported-architecture test images: one platform each."""
_BOTH = frozenset({"amd64", "arm64"})
THIRD_PARTY_IMAGES: frozenset[str] = frozenset(
    {
        "busybox",
        "busybox:latest",
        "busybox:1.36",
        "busybox:1.37",
        "python:3.12-alpine",
        "valkey/valkey:7.2-alpine",
        "valkey/valkey:8.1.3-alpine",
        "ghcr.io/open-feature/flagd:v0.12.8",
        "postgres:16",
        PAUSE_IMAGE,
    }
)
"""Multi-arch images outside the chart that exist (older pins of the chart's own images, the
utility images the faults' init containers and workloads run)."""
_DEMO_TAG = re.compile(r"^(\d+\.\d+\.\d+)-([a-z][a-z-]*)$")
DEMO_RELEASES: tuple[str, ...] = (
    "1.12.0",
    "2.0.0",
    "2.0.1",
    "2.0.2",
    "2.1.0",
    "2.1.3",
    demo_version(),
)
"""Demo releases whose `<release>-<component>` images are published (earlier ones and the pin),
oldest first."""
_DEMO_RELEASES = frozenset(DEMO_RELEASES)


@lru_cache(maxsize=1)
def chart_images() -> dict[str, str]:
    """Every image of the pinned chart, with the container that runs it."""
    out: dict[str, str] = {}
    for obj in chart_objects():
        if obj.get("kind") != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
            out.setdefault(str(container["image"]), str(container["name"]))
    return out


@lru_cache(maxsize=512)
def image_platforms(image: str) -> frozenset[str] | None:
    """Platforms an image reference exists for, or None when it cannot be pulled."""
    if image in SINGLE_ARCH_IMAGES:
        return SINGLE_ARCH_IMAGES[image]
    if image in chart_images() or image in THIRD_PARTY_IMAGES:
        return _BOTH
    repo, _, tag = image.rpartition(":")
    if repo == DEMO_REPOSITORY:
        m = _DEMO_TAG.match(tag)
        if m and m.group(1) in _DEMO_RELEASES and m.group(2) in SERVICE_BY_NAME:
            return _BOTH
    return None


@lru_cache(maxsize=512)
def image_program(image: str) -> str | None:
    """The shop program an image runs (None for images that run none of them)."""
    known = chart_images().get(image)
    if known is not None:
        return known if known in SERVICE_BY_NAME else None
    repo, _, tag = image.rpartition(":")
    if repo == DEMO_REPOSITORY:
        m = _DEMO_TAG.match(tag)
        return m.group(2) if m and m.group(2) in SERVICE_BY_NAME else None
    for chart_image, container in chart_images().items():
        if container in SERVICE_BY_NAME and chart_image.rpartition(":")[0] == repo:
            return container
    return None
