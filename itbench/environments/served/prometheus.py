"""A real Prometheus beside a served twin: it scrapes the twin's exposition and evaluates the
cluster's PrometheusRules, as kube-prometheus-stack's Prometheus Operator has it evaluate them.

The rule files are written from the PrometheusRule objects in the API whose labels the stack's
Prometheus selects (`release: kube-prometheus-stack`), and rewritten (then reloaded) whenever
they change, so an edited or deleted rule has its real effect. On a twin that runs `speed` times
faster than the wall clock, scrape and evaluation intervals, `for:` windows and every duration in
a rule are divided by the speed (`itbench.environments.kube.clock`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from itbench import stack
from itbench.core.alert_rules import EVALUATION_INTERVAL_SECONDS
from itbench.environments.kube.clock import format_duration, scale_duration, scale_promql
from itbench.environments.sim.environment import SCRAPE_SECONDS

log = logging.getLogger(__name__)

Json = dict[str, Any]

LOOKBACK_SECONDS = 300.0
"""Prometheus' default query lookback (5 minutes), scaled with the twin."""


def rule_selector() -> dict[str, str]:
    """The labels the stack's Prometheus selects PrometheusRules by."""
    return {"release": str(stack.chart_pin("kube-prometheus-stack")["release"])}


def selected(rule: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    """Whether a PrometheusRule carries every selector label."""
    labels = (rule.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def rule_file(rule: Mapping[str, Any], speed: float) -> Json:
    """A Prometheus rule file from a PrometheusRule, its durations divided by speed."""
    groups = []
    for group in (rule.get("spec") or {}).get("groups") or []:
        if not isinstance(group, dict):
            continue
        out: Json = {"name": group.get("name", "")}
        interval = group.get("interval")
        out["interval"] = scale_duration(
            str(interval) if interval else format_duration(EVALUATION_INTERVAL_SECONDS), speed
        )
        rules = []
        for entry in group.get("rules") or []:
            if not isinstance(entry, dict) or not entry.get("expr"):
                continue
            item = {
                k: v for k, v in entry.items() if k in ("alert", "record", "labels", "annotations")
            }
            item["expr"] = scale_promql(str(entry["expr"]), speed)
            for key in ("for", "keep_firing_for"):
                if entry.get(key):
                    item[key] = scale_duration(str(entry[key]), speed)
            rules.append(item)
        out["rules"] = rules
        groups.append(out)
    return {"groups": groups}


def config(target: str, speed: float, rule_dir: Path) -> Json:
    """prometheus.yml: scrape the twin at the stack's interval (honouring its labels) and load
    rule_dir."""
    scrape = format_duration(SCRAPE_SECONDS / speed)
    return {
        "global": {
            "scrape_interval": scrape,
            "scrape_timeout": scrape,
            "evaluation_interval": format_duration(EVALUATION_INTERVAL_SECONDS / speed),
        },
        "rule_files": [str(rule_dir / "*.yaml")],
        "scrape_configs": [
            {
                "job_name": "itbench-twin",
                "honor_labels": True,
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [target]}],
            }
        ],
    }


def find_prometheus() -> str | None:
    """The prometheus binary on PATH (Debian's `prometheus` package), or None."""
    return shutil.which("prometheus")


@dataclass
class PrometheusProcess:
    """A Prometheus process for one served twin.

    Attributes:
        binary: The prometheus executable.
        workdir: Its configuration, rule files and TSDB.
        target: host:port of the twin's exposition.
        port: Port of its HTTP API (on 127.0.0.1).
        speed: The twin's speed.
    """

    binary: str
    workdir: Path
    target: str
    port: int
    speed: float = 1.0
    process: subprocess.Popen[bytes] | None = None
    _digest: str = ""
    _log: Any = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The HTTP API's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def rule_dir(self) -> Path:
        """Where the rule files are written."""
        return self.workdir / "rules"

    def start(self, rules: Iterable[Mapping[str, Any]], timeout: float = 30.0) -> None:
        """Write the configuration and rules, start Prometheus and wait until it is ready.

        Raises:
            RuntimeError: It exited or was not ready in time (its log's tail in the message).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.rule_dir.mkdir(exist_ok=True)
        self.write_rules(rules)
        path = self.workdir / "prometheus.yml"
        path.write_text(
            yaml.safe_dump(config(self.target, self.speed, self.rule_dir)), encoding="utf-8"
        )
        self._log = (self.workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={path}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                f"--query.lookback-delta={format_duration(LOOKBACK_SECONDS / self.speed)}",
                "--storage.tsdb.retention.time=6h",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited ({self.process.returncode}): {self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus was not ready within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of its log."""
        path = self.workdir / "prometheus.log"
        if not path.is_file():
            return ""
        return " / ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])

    def write_rules(self, rules: Iterable[Mapping[str, Any]]) -> bool:
        """Rewrite the rule files from the selected PrometheusRules; True when they changed."""
        selector = rule_selector()
        files = {}
        for rule in rules:
            if not selected(rule, selector):
                continue
            meta = rule.get("metadata") or {}
            name = f"{meta.get('namespace', '')}-{meta.get('name', '')}.yaml"
            files[name] = yaml.safe_dump(rule_file(rule, self.speed), sort_keys=False)
        digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        if digest == self._digest:
            return False
        self._digest = digest
        self.rule_dir.mkdir(parents=True, exist_ok=True)
        for old in self.rule_dir.glob("*.yaml"):
            if old.name not in files:
                old.unlink()
        for name, text in files.items():
            (self.rule_dir / name).write_text(text, encoding="utf-8")
        return True

    def reload(self) -> None:
        """Have Prometheus read its rule files again."""
        try:
            httpx.post(f"{self.url}/-/reload", timeout=5.0)
        except httpx.HTTPError as exc:
            log.warning("prometheus reload failed", extra={"error": str(exc)})

    def stop(self) -> None:
        """Stop Prometheus."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None
