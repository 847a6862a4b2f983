"""Regenerates the upstream snapshot of the pinned stack from the upstream repositories.

`python -m itbench.stack.regenerate --mirror DIR` (or `make upstream-snapshot`) renders the pinned
opentelemetry-demo chart with the stack's values by a real Helm and extracts, from the pinned
releases, the facts the twin and the fault contracts are checked against: the flags and the
services that evaluate them, the load generator's request mix, the Chaos Mesh CRD schemas and
upstream ITBench's scenario catalog. Every file gets its provenance; hand-read facts (`spans.yaml`,
`series.yaml`, `behaviour.yaml`) are kept, and the files their evidence names must exist at the
pinned commits.

Repositories come from a directory of bare git mirrors (`<owner>+<name>/repo` or `<owner>/<name>`)
or, where the network allows, are cloned from GitHub into ~/.cache/itbench/upstream.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from itbench.stack import STACK_DIR, pins, snapshot_dir

CACHE = Path.home() / ".cache" / "itbench" / "upstream"
HELM_CANDIDATES = (Path.home() / ".cache" / "itbench" / "tools" / "helm-4.1.4" / "helm",)
ITBENCH_REPOSITORY = "itbench-hub/ITBench"
ITBENCH_RULES = (
    "scenarios/sre/project/roles/applications/templates/kubernetes/otel_demo/prometheusrules.j2"
)
CHAOS_KINDS = ("NetworkChaos", "PodChaos", "StressChaos", "HTTPChaos", "JVMChaos", "IOChaos")
OMITTED_CONFIGMAPS = ("postgresql-init",)
"""ConfigMaps whose payload is upstream code and prose (SQL with product texts): kept as digests."""
HAND_READ = ("spans.yaml", "behaviour.yaml")
KSM_DOCS = (
    "docs/metrics/workload/pod-metrics.md",
    "docs/metrics/workload/deployment-metrics.md",
    "docs/metrics/workload/horizontalpodautoscaler-metrics.md",
    "docs/metrics/policy/resourcequota-metrics.md",
)
"""kube-state-metrics' documentation of the object kinds whose series the alert rules read."""
KIND_ORDER = (
    "ServiceAccount",
    "ConfigMap",
    "ClusterRole",
    "ClusterRoleBinding",
    "Service",
    "Deployment",
    "ServiceMonitor",
)


class SnapshotError(RuntimeError):
    """An input is missing or a tool failed; the message says which and what to do."""


class Repositories:
    """Resolves `owner/name` to a bare git directory (a mirror, or a clone made on demand)."""

    def __init__(self, mirror: Path | None, clone: bool) -> None:
        self.mirror = mirror
        self.clone = clone

    def git_dir(self, repository: str) -> Path:
        owner, name = repository.split("/", 1)
        if self.mirror is not None:
            for candidate in (
                self.mirror / f"{owner}+{name}" / "repo",
                self.mirror / owner / name,
                self.mirror / f"{owner}+{name}",
            ):
                if (candidate / "HEAD").is_file():
                    return candidate
        target = CACHE / f"{owner}+{name}.git"
        if (target / "HEAD").is_file():
            return target
        if not self.clone:
            raise SnapshotError(
                f"no git mirror of {repository} (looked in {self.mirror}); pass --mirror with a "
                "directory of mirrors or --clone where GitHub is reachable"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        _run(["git", "clone", "--bare", f"https://github.com/{repository}.git", str(target)])
        return target

    def commit(self, repository: str, ref: str) -> str:
        return _run(
            ["git", "--git-dir", str(self.git_dir(repository)), "rev-parse", f"{ref}^{{commit}}"]
        ).strip()

    def show(self, repository: str, ref: str, path: str) -> str:
        return _run(["git", "--git-dir", str(self.git_dir(repository)), "show", f"{ref}:{path}"])

    def exists(self, repository: str, ref: str, path: str) -> bool:
        result = subprocess.run(
            ["git", "--git-dir", str(self.git_dir(repository)), "cat-file", "-e", f"{ref}:{path}"],
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def files(self, repository: str, ref: str, path: str) -> list[str]:
        out = _run(
            [
                "git",
                "--git-dir",
                str(self.git_dir(repository)),
                "ls-tree",
                "-r",
                "--name-only",
                ref,
                "--",
                path,
            ]
        )
        return [line for line in out.splitlines() if line]

    def grep(self, repository: str, ref: str, needle: str, path: str) -> list[str]:
        result = subprocess.run(
            [
                "git",
                "--git-dir",
                str(self.git_dir(repository)),
                "grep",
                "-l",
                "-F",
                needle,
                ref,
                "--",
                path,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        prefix = f"{ref}:"
        return sorted(line[len(prefix) :] for line in result.stdout.splitlines() if line)

    def extract(self, repository: str, ref: str, path: str, into: Path) -> None:
        archive = subprocess.run(
            ["git", "--git-dir", str(self.git_dir(repository)), "archive", ref, path],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")


def _run(args: list[str]) -> str:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SnapshotError(f"{' '.join(args[:4])} ... failed: {result.stderr.strip()}")
    return result.stdout


def find_helm(explicit: str | None) -> Path:
    """The helm binary: --helm, PATH, or the copy the chart tests cache."""
    if explicit:
        return Path(explicit)
    found = shutil.which("helm")
    if found:
        return Path(found)
    for candidate in HELM_CANDIDATES:
        if candidate.is_file():
            return candidate
    raise SnapshotError(
        "helm not found: install Helm, pass --helm, or run "
        "`pytest tests/integration/test_chart.py` "
        "once (it caches a pinned Helm in ~/.cache/itbench/tools)"
    )


def _sha256(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---- the chart ----------------------------------------------------------------------------------


def render_chart(
    repos: Repositories, helm: Path, stack: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`helm template` the pinned demo chart (with its collector subchart) with the stack values."""
    demo = stack["charts"]["opentelemetry-demo"]
    collector = stack["charts"]["opentelemetry-collector"]
    release = stack["release"]
    values = STACK_DIR / demo["values"]
    with tempfile.TemporaryDirectory(prefix="itbench-chart-") as tmp:
        root = Path(tmp)
        src = demo["source"]
        repos.extract(src["repository"], src["tag"], "charts/opentelemetry-demo", root / "demo")
        chart = root / "demo" / "charts" / "opentelemetry-demo"
        sub = collector["source"]
        repos.extract(
            sub["repository"], sub["tag"], "charts/opentelemetry-collector", root / "collector"
        )
        (chart / "charts").mkdir(exist_ok=True)
        shutil.move(
            str(root / "collector" / "charts" / "opentelemetry-collector"), chart / "charts"
        )
        meta = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))
        if str(meta["version"]) != str(demo["version"]) or str(meta["appVersion"]) != str(
            demo["appVersion"]
        ):
            raise SnapshotError(
                f"{src['tag']} is chart {meta['version']} (app {meta['appVersion']}), not the pin"
            )
        kept = [d for d in meta.get("dependencies", []) if d["name"] == "opentelemetry-collector"]
        if not kept or str(kept[0]["version"]) != str(collector["version"]):
            raise SnapshotError(
                "the demo chart's collector dependency is not the pinned collector chart"
            )
        dropped = sorted(
            d["name"]
            for d in meta.get("dependencies", [])
            if d["name"] != "opentelemetry-collector"
        )
        meta["dependencies"] = kept
        (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
        (chart / "Chart.lock").unlink(missing_ok=True)
        command = [
            str(helm),
            "template",
            release["name"],
            str(chart),
            "--namespace",
            release["namespace"],
            "-f",
            str(values),
        ]
        rendered = _run(command)
        version = _run([str(helm), "version", "--short"]).strip()
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        doc.setdefault("metadata", {}).setdefault("namespace", release["namespace"])
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"].pop("namespace", None)
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] in OMITTED_CONFIGMAPS:
            doc["data"] = {
                key: f"# omitted upstream content: {len(text.encode())} bytes, {_sha256(text)}\n"
                for key, text in sorted((doc.get("data") or {}).items())
            }
    docs.sort(
        key=lambda d: (
            KIND_ORDER.index(d["kind"]) if d["kind"] in KIND_ORDER else 99,
            d["metadata"]["name"],
        )
    )
    provenance = {
        "repository": src["repository"],
        "tag": src["tag"],
        "commit": repos.commit(src["repository"], src["tag"]),
        "subchart": {
            "repository": sub["repository"],
            "tag": sub["tag"],
            "commit": repos.commit(sub["repository"], sub["tag"]),
            "placed_at": "charts/opentelemetry-demo/charts/opentelemetry-collector",
        },
        "dependencies_removed": dropped,
        "why_removed": "disabled by the stack values; the stack installs its own observability "
        "charts",
        "helm": version,
        "command": f"helm template {release['name']} charts/opentelemetry-demo --namespace "
        f"{release['namespace']} -f {demo['values']}",
        "values_sha256": _sha256(values.read_bytes()),
        "normalised": "documents sorted by kind and name; metadata.namespace filled in as the API "
        f"server does; the payload of ConfigMaps {list(OMITTED_CONFIGMAPS)} replaced by its size "
        "and digest",
    }
    return docs, provenance


# ---- flags, load, chaos, ITBench --------------------------------------------------------------


def flag_facts(
    repos: Repositories, stack: dict[str, Any], docs: list[dict[str, Any]]
) -> dict[str, Any]:
    """Each flag of the chart's flagd-config with the demo source files that evaluate it."""
    app = stack["charts"]["opentelemetry-demo"]["app"]
    cm = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "flagd-config"
    )
    flags = json.loads(cm["data"]["demo.flagd.json"])["flags"]
    out: dict[str, Any] = {}
    for key in sorted(flags):
        files = [
            f
            for f in repos.grep(app["repository"], app["tag"], key, "src")
            if not f.startswith(("src/flagd/", "src/flagd-ui/", "src/react-native-app/"))
            and not f.endswith((".md", ".json"))
        ]
        out[key] = {
            "variants": flags[key]["variants"],
            "defaultVariant": flags[key]["defaultVariant"],
            "evaluatedIn": files,
            "services": sorted({f.split("/")[1] for f in files}),
        }
    return {"flags": out, "source": {**app, "commit": repos.commit(app["repository"], app["tag"])}}


def _call_path(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _call_path(node.left) + _call_path(node.right)
    if isinstance(node, ast.Name):
        return "{" + node.id + "}"
    return "{?}"


def _requests(
    func: ast.FunctionDef, methods: dict[str, ast.FunctionDef], repeated: bool = False
) -> list[dict[str, Any]]:
    """The self.client calls of a task in source order (through calls of other methods)."""
    out: list[dict[str, Any]] = []

    def visit(node: ast.AST, looped: bool) -> None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func
            if (
                isinstance(target.value, ast.Attribute)
                and target.value.attr == "client"
                and node.args
            ):
                out.append(
                    {
                        "method": target.attr.upper(),
                        "path": _call_path(node.args[0]),
                        "repeated": looped,
                    }
                )
            elif (
                isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and target.attr in methods
            ):
                for item in _requests(methods[target.attr], methods, looped):
                    out.append({**item, "via": target.attr})
        for child in ast.iter_child_nodes(node):
            visit(child, looped or isinstance(node, ast.For | ast.While))

    for stmt in func.body:
        visit(stmt, repeated)
    return out


def load_facts(
    repos: Repositories, stack: dict[str, Any], docs: list[dict[str, Any]]
) -> dict[str, Any]:
    """The locustfile's HttpUser tasks (weights and requests) and the chart's locust settings."""
    app = stack["charts"]["opentelemetry-demo"]["app"]
    path = "src/load-generator/locustfile.py"
    tree = ast.parse(repos.show(app["repository"], app["tag"], path))
    users: dict[str, Any] = {}
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        tasks = []
        for name, func in methods.items():
            weight = None
            for deco in func.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "task":
                    weight = int(ast.literal_eval(deco.args[0])) if deco.args else 1
                elif isinstance(deco, ast.Name) and deco.id == "task":
                    weight = 1
            if weight is not None:
                tasks.append({"name": name, "weight": weight, "requests": _requests(func, methods)})
        wait = None
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and any(
                getattr(t, "id", "") == "wait_time" for t in stmt.targets
            ):
                call = stmt.value
                if isinstance(call, ast.Call):
                    wait = {
                        "function": getattr(call.func, "id", "?"),
                        "args": [ast.literal_eval(a) for a in call.args],
                    }
        bases = [getattr(b, "id", "") for b in cls.bases]
        start = methods.get("on_start")
        users[cls.name] = {
            "base": bases[0] if bases else "",
            "waitTime": wait,
            "onStart": _requests(start, methods) if start else [],
            "tasks": tasks,
        }
    deployment = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "load-generator"
    )
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0].get("env", [])
        if e["name"].startswith("LOCUST_")
    }
    return {
        "users": users,
        "chartEnvironment": env,
        "source": {**app, "commit": repos.commit(app["repository"], app["tag"]), "path": path},
        "how": "Python AST of the locustfile: @task weights and self.client calls (paths with "
        "their variables in braces; `repeated` marks calls made in a loop)",
    }


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def chaos_facts(repos: Repositories, stack: dict[str, Any]) -> dict[str, Any]:
    """The openAPIV3Schema of the Chaos Mesh kinds the faults create (descriptions removed)."""
    source = stack["charts"]["chaos-mesh"]["source"]
    kinds: dict[str, Any] = {}
    for kind in (*CHAOS_KINDS, "Schedule"):
        plural = "schedules" if kind == "Schedule" else kind.lower()
        crd = yaml.safe_load(
            repos.show(
                source["repository"],
                source["tag"],
                f"helm/chaos-mesh/crds/chaos-mesh.org_{plural}.yaml",
            )
        )
        version = crd["spec"]["versions"][0]
        schema = _strip(version["schema"]["openAPIV3Schema"])
        if kind == "Schedule":
            spec = schema["properties"]["spec"]
            types = CHAOS_KINDS
            kept = {}
            for key, value in spec["properties"].items():
                if key.endswith("Chaos") and key[0].islower():
                    of = next((t for t in types if t.lower() == key.lower()), key)
                    kept[key] = {"type": "object", "x-itbench-schema-of": of}
                elif key in (
                    "schedule",
                    "concurrencyPolicy",
                    "historyLimit",
                    "startingDeadlineSeconds",
                    "type",
                ):
                    kept[key] = value
            spec["properties"] = kept
            schema["properties"]["status"] = {"type": "object"}
        kinds[kind] = {
            "group": crd["spec"]["group"],
            "version": version["name"],
            "plural": crd["spec"]["names"]["plural"],
            "scope": crd["spec"]["scope"],
            "schema": schema,
        }
    return {
        "kinds": kinds,
        "source": {
            **source,
            "commit": repos.commit(source["repository"], source["tag"]),
            "path": "helm/chaos-mesh/crds/",
        },
        "how": "openAPIV3Schema of each CRD with every description removed; the Schedule's "
        "embedded experiment specs point at the schema of their own kind",
    }


def itbench_facts(repos: Repositories) -> dict[str, Any]:
    """Upstream ITBench's SRE scenario catalog: each scenario's application and injections."""
    ref = str(pins()["references"]["itbench"]["commit"])
    base = "scenarios/sre/library/indexes/scenarios/"
    scenarios = []
    for path in repos.files(ITBENCH_REPOSITORY, ref, base):
        doc = json.loads(repos.show(ITBENCH_REPOSITORY, ref, path))
        injections = []
        for disruption in doc.get("disruptions", []):
            for inj in disruption.get("injections", []):
                args = inj.get("args", {})
                target = args.get("kubernetesObject", {})
                item: dict[str, Any] = {
                    "fault": inj["id"],
                    "kind": target.get("kind", ""),
                    "name": (target.get("metadata") or {}).get("name", ""),
                }
                if "flag" in args:
                    item["flag"] = args["flag"]
                spec = args.get("scheduleSpec")
                if spec:
                    kind = spec.get("type", "")
                    body = spec.get(kind[:1].lower() + kind[1:], {})
                    item["experiment"] = {
                        "kind": kind,
                        "action": body.get("action", "stress" if "stressors" in body else ""),
                        "selector": (body.get("selector") or {}).get("labelSelectors", {}),
                    }
                injections.append(item)
        scenarios.append(
            {
                "id": doc["id"],
                "applications": [
                    a["id"] for a in doc.get("environment", {}).get("applications", [])
                ],
                "injections": injections,
            }
        )
    scenarios.sort(key=lambda s: int(s["id"]))
    return {
        "scenarios": scenarios,
        "source": {
            "repository": ITBENCH_REPOSITORY,
            "ref": ref,
            "commit": repos.commit(ITBENCH_REPOSITORY, ref),
            "path": base,
        },
        "how": "ids, applications and injections of every scenario index (no descriptions)",
    }


_LABEL = re.compile(r"`([a-z_]+)`=")
_CADVISOR = re.compile(r"\b(container_(?:cpu|memory)_[a-z_]+(?:_total|_bytes))\b")


def ksm_labels(markdown: str) -> dict[str, list[str]]:
    """Each metric of a kube-state-metrics documentation page with the labels its table names."""
    out: dict[str, list[str]] = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if not cells or not re.fullmatch(r"kube_[a-z_]+", cells[0]):
            continue
        # The labels column is the one naming the most labels (the unit column names a few).
        found: list[list[str]] = [_LABEL.findall(cell) for cell in cells[1:]]
        labels: list[str] = max(found, key=lambda names: len(names), default=[])
        out[cells[0]] = sorted(set(labels))
    return out


def series_facts(repos: Repositories, stack: dict[str, Any]) -> dict[str, Any]:
    """The labels of the exporters' series and how kube-prometheus-stack scrapes them."""
    kps = stack["charts"]["kube-prometheus-stack"]
    source = kps["source"]
    chart = yaml.safe_load(
        repos.show(source["repository"], source["tag"], "charts/kube-prometheus-stack/Chart.yaml")
    )
    dependency = next(d for d in chart["dependencies"] if d["name"] == "kube-state-metrics")
    ksm = kps["kubeStateMetrics"]
    if str(dependency["version"]) != str(ksm["chart"]):
        raise SnapshotError(
            f"pins.yaml: kube-state-metrics chart {ksm['chart']} is not the one "
            f"kube-prometheus-stack {kps['version']} depends on ({dependency['version']})"
        )
    ksm_chart = yaml.safe_load(
        repos.show(
            source["repository"],
            f"kube-state-metrics-{ksm['chart']}",
            "charts/kube-state-metrics/Chart.yaml",
        )
    )
    if str(ksm_chart["appVersion"]) != str(ksm["appVersion"]):
        raise SnapshotError(
            f"pins.yaml: kube-state-metrics appVersion {ksm['appVersion']} is not chart "
            f"{ksm['chart']}'s ({ksm_chart['appVersion']})"
        )
    metrics: dict[str, list[str]] = {}
    for page in KSM_DOCS:
        metrics |= ksm_labels(repos.show(ksm["source"]["repository"], ksm["source"]["tag"], page))
    values = yaml.safe_load(
        repos.show(source["repository"], source["tag"], "charts/kube-prometheus-stack/values.yaml")
    )
    kubelet = values["kubelet"]["serviceMonitor"]
    monitor = values["kube-state-metrics"]["prometheus"]["monitor"]
    rules_dir = "charts/kube-prometheus-stack/templates/prometheus/rules-1.14/"
    cadvisor: set[str] = set()
    for path in repos.files(source["repository"], source["tag"], rules_dir):
        text = repos.show(source["repository"], source["tag"], path)
        cadvisor |= set(_CADVISOR.findall(text))
    itbench = stack["references"]["itbench"]
    itbench_rules = repos.show(itbench["repository"], itbench["commit"], ITBENCH_RULES)
    collector = sorted(
        set(re.findall(r"\b((?:traces_span_metrics|kafka)_[a-z_]+)\b", itbench_rules))
    )
    return {
        "cadvisor": {
            "source": {
                **source,
                "commit": repos.commit(source["repository"], source["tag"]),
                "path": rules_dir,
            },
            "how": "cAdvisor CPU and memory series kube-prometheus-stack's own rules read",
            "metrics": sorted(cadvisor),
        },
        "collector": {
            "source": {
                "repository": itbench["repository"],
                "commit": itbench["commit"],
                "path": ITBENCH_RULES,
            },
            "how": "span-metric and kafkametrics series upstream ITBench's rules for the demo read",
            "metrics": collector,
        },
        "kube-state-metrics": {
            "source": {
                **ksm["source"],
                "commit": repos.commit(ksm["source"]["repository"], ksm["source"]["tag"]),
                "paths": list(KSM_DOCS),
            },
            "metrics": dict(sorted(metrics.items())),
        },
        "scrape": {
            "source": {
                **source,
                "commit": repos.commit(source["repository"], source["tag"]),
                "path": "charts/kube-prometheus-stack/values.yaml",
            },
            "kube-state-metrics": {"honorLabels": bool(monitor["http"]["honorLabels"])},
            "kubelet": {
                "honorLabels": bool(kubelet["honorLabels"]),
                "cAdvisorMetricRelabelings": kubelet["cAdvisorMetricRelabelings"],
                "cAdvisorRelabelings": kubelet["cAdvisorRelabelings"],
            },
        },
        "how": "labels from the metric tables of kube-state-metrics' documentation; scrape "
        "settings from kube-prometheus-stack's values",
    }


def _evidence(node: Any) -> Iterable[dict[str, Any]]:
    if isinstance(node, dict):
        if "evidence" in node:
            yield node
        for value in node.values():
            yield from _evidence(value)
    elif isinstance(node, list):
        for value in node:
            yield from _evidence(value)


def check_evidence(repos: Repositories, out: Path) -> list[str]:
    """Problems with the hand-read fact files: evidence a source does not list, or files that do
    not exist at their commits (sources marked `fetched: false` are not checked)."""
    missing: list[str] = []
    for name in HAND_READ:
        path = out / name
        if not path.is_file():
            missing.append(f"{name} is missing")
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        sources = doc.get("sources", {})
        for entry in _evidence({k: v for k, v in doc.items() if k != "sources"}):
            source = sources.get(entry.get("source", "demo"))
            if source is None or entry["evidence"] not in source.get("files", []):
                missing.append(f"{name}: {entry['evidence']} is not a file of its source")
        for source in sources.values():
            if source.get("fetched") is False:
                continue
            for file in source.get("files", []):
                if not repos.exists(source["repository"], source["commit"], file):
                    missing.append(f"{name}: {source['repository']}@{source['commit'][:12]}:{file}")
    return missing


def _dump(path: Path, header: str, data: Any) -> None:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    path.write_text(
        f"# {header}\n# Written by `python -m itbench.stack.regenerate`; do not edit.\n{text}",
        encoding="utf-8",
    )


def _dump_all(path: Path, header: str, docs: Iterable[dict[str, Any]]) -> None:
    text = yaml.safe_dump_all(list(docs), sort_keys=False, allow_unicode=True, width=100)
    path.write_text(
        f"# {header}\n# Written by `python -m itbench.stack.regenerate`; do not edit.\n{text}",
        encoding="utf-8",
    )


def regenerate(repos: Repositories, helm: Path, out: Path) -> None:
    """Write every generated file of the snapshot into `out` and check the hand-read ones."""
    stack = pins()
    out.mkdir(parents=True, exist_ok=True)
    docs, chart = render_chart(repos, helm, stack)
    _dump_all(
        out / "chart.yaml",
        "The pinned opentelemetry-demo chart rendered with the stack values.",
        docs,
    )
    flags = flag_facts(repos, stack, docs)
    _dump(out / "flags.yaml", "The demo's flags and the source files that evaluate them.", flags)
    load = load_facts(repos, stack, docs)
    _dump(out / "load.yaml", "The load generator's request mix at the pinned demo release.", load)
    chaos = chaos_facts(repos, stack)
    _dump(out / "chaos-mesh.yaml", "Chaos Mesh CRD schemas at the pinned chart.", chaos)
    series = series_facts(repos, stack)
    _dump(out / "series.yaml", "The exporters' series labels and their scrape settings.", series)
    itbench = itbench_facts(repos)
    _dump(
        out / "itbench.yaml",
        "Upstream ITBench's SRE scenario catalog (ids and injections).",
        itbench,
    )
    missing = check_evidence(repos, out)
    if missing:
        raise SnapshotError("hand-read facts cite files that do not exist: " + "; ".join(missing))
    provenance = {
        "pins": _sha256((STACK_DIR / "pins.yaml").read_bytes()),
        "files": {
            "chart.yaml": chart,
            "flags.yaml": flags["source"] | {"how": "git grep of each flag key under src/"},
            "load.yaml": load["source"] | {"how": load["how"]},
            "chaos-mesh.yaml": chaos["source"] | {"how": chaos["how"]},
            "itbench.yaml": itbench["source"] | {"how": itbench["how"]},
            "series.yaml": {
                "sources": [
                    series["kube-state-metrics"]["source"],
                    series["scrape"]["source"],
                    series["cadvisor"]["source"],
                    series["collector"]["source"],
                ],
                "how": series["how"],
            },
            **{
                name: {"how": "read by hand; see its sources and each entry's evidence"}
                for name in HAND_READ
            },
        },
    }
    _dump(out / "provenance.yaml", "Where every file of this snapshot comes from.", provenance)


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate the snapshot of the pinned stack."""
    parser = argparse.ArgumentParser(prog="python -m itbench.stack.regenerate", description=__doc__)
    parser.add_argument("--mirror", type=Path, help="directory of bare git mirrors")
    parser.add_argument(
        "--clone", action="store_true", help="clone missing repositories from GitHub"
    )
    parser.add_argument("--helm", help="the helm binary")
    parser.add_argument("--output", type=Path, help="snapshot directory (default: the pinned one)")
    args = parser.parse_args(argv)
    try:
        repos = Repositories(args.mirror, args.clone)
        regenerate(repos, find_helm(args.helm), args.output or snapshot_dir())
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
