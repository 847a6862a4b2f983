"""Where a trial's evidence lives between steps: baseline, window samples and the agent's record.

The state machine keeps only compact status; these larger artefacts are stored by key so that a
replayed step finds what an earlier execution stored (first write wins).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import ApiModel
from itbench.core.models.compliance import ComplianceEvaluation
from itbench.core.models.observations import EnvironmentSnapshot
from itbench.core.models.trial import AttemptedEscalation


class AgentRecord(ApiModel):
    """What the agent left behind when its gateway session was closed."""

    state: str = Field(description="The session's protocol state when closed.")
    started_at: str | None = Field(default=None, description="STARTED time (ISO 8601).")
    finished_at: str | None = Field(default=None, description="FINISHED time (ISO 8601).")
    diagnosis: DiagnosisReport | None = Field(default=None, description="Accepted diagnosis.")
    diagnosis_at: str | None = Field(default=None, description="When it was accepted.")
    mitigation: MitigationReport | None = Field(default=None, description="Accepted mitigation.")
    posture: PostureReport | None = Field(default=None, description="Accepted posture report.")
    posture_at: str | None = Field(default=None, description="When it was accepted.")
    compliance: ComplianceEvaluation | None = Field(
        default=None, description="The evaluation of the accepted CISO artefacts."
    )
    compliance_at: str | None = Field(default=None, description="When they were accepted.")
    rejected_submissions: int = Field(default=0, description="Rejected submissions.")
    attempted_escalations: list[AttemptedEscalation] = Field(
        default_factory=list, description="Actions refused as attempted privilege escalations."
    )
    error: str = Field(
        default="", description="Why the agent's turn ended without FINISHED, if it did."
    )
    error_reason: str = Field(
        default="",
        description="How it ended: AgentCrashed, AgentTimeout, AgentExitedWithoutFinish or "
        "ModelUnavailable (empty: AgentCrashed, in records that predate it).",
    )
    audit: list[dict[str, Any]] = Field(
        default_factory=list, description="The audit trail of the agent's calls."
    )


class TopologyRecord(ApiModel):
    """The application's objects and call graph when the agent was let in."""

    objects: list[dict[str, Any]] = Field(description="Kubernetes-shaped objects.")
    calls: list[tuple[str, str]] = Field(description="(caller, callee) service names.")


class EvidenceStore(Protocol):
    """Keyed storage of a trial's evidence; every put is first-write-wins."""

    def put_snapshot(self, key: str, snapshot: EnvironmentSnapshot) -> bool:
        """Store a snapshot under key; False when the key already holds one."""
        ...

    def snapshot(self, key: str) -> EnvironmentSnapshot | None:
        """The snapshot stored under key, if any."""
        ...

    def put_agent(self, key: str, record: AgentRecord) -> bool:
        """Store the agent's record under key; False when the key already holds one."""
        ...

    def agent(self, key: str) -> AgentRecord | None:
        """The agent's record stored under key, if any."""
        ...

    def put_topology(self, key: str, record: TopologyRecord) -> bool:
        """Store a topology record under key; False when the key already holds one."""
        ...

    def topology(self, key: str) -> TopologyRecord | None:
        """The topology record stored under key, if any."""
        ...


class MemoryEvidenceStore:
    """Evidence held in memory (operator tests, single-process drivers)."""

    def __init__(self) -> None:
        """Create an empty store."""
        self._lock = threading.Lock()
        self._snapshots: dict[str, EnvironmentSnapshot] = {}
        self._agents: dict[str, AgentRecord] = {}
        self._topologies: dict[str, TopologyRecord] = {}

    def put_snapshot(self, key: str, snapshot: EnvironmentSnapshot) -> bool:
        """Store a snapshot under key; False when the key already holds one."""
        with self._lock:
            if key in self._snapshots:
                return False
            self._snapshots[key] = snapshot
            return True

    def snapshot(self, key: str) -> EnvironmentSnapshot | None:
        """The snapshot stored under key, if any."""
        with self._lock:
            return self._snapshots.get(key)

    def put_agent(self, key: str, record: AgentRecord) -> bool:
        """Store the agent's record under key; False when the key already holds one."""
        with self._lock:
            if key in self._agents:
                return False
            self._agents[key] = record
            return True

    def agent(self, key: str) -> AgentRecord | None:
        """The agent's record stored under key, if any."""
        with self._lock:
            return self._agents.get(key)

    def put_topology(self, key: str, record: TopologyRecord) -> bool:
        """Store a topology record under key; False when the key already holds one."""
        with self._lock:
            if key in self._topologies:
                return False
            self._topologies[key] = record
            return True

    def topology(self, key: str) -> TopologyRecord | None:
        """The topology record stored under key, if any."""
        with self._lock:
            return self._topologies.get(key)


class FileEvidenceStore:
    """Evidence as JSON files under a directory (one file per key), surviving a crash."""

    def __init__(self, root: Path) -> None:
        """Use (and create) a directory.

        Args:
            root: The directory the files go to.
        """
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, kind: str, key: str) -> Path:
        safe = key.replace("/", "__")
        return self.root / f"{kind}-{safe}.json"

    def _put(self, path: Path, data: dict[str, Any]) -> bool:
        if path.exists():
            return False
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
        return True

    def put_snapshot(self, key: str, snapshot: EnvironmentSnapshot) -> bool:
        """Store a snapshot under key; False when the key already holds one."""
        return self._put(self._path("snapshot", key), snapshot.model_dump(mode="json"))

    def snapshot(self, key: str) -> EnvironmentSnapshot | None:
        """The snapshot stored under key, if any."""
        path = self._path("snapshot", key)
        if not path.exists():
            return None
        return EnvironmentSnapshot.model_validate_json(path.read_text(encoding="utf-8"))

    def put_agent(self, key: str, record: AgentRecord) -> bool:
        """Store the agent's record under key; False when the key already holds one."""
        return self._put(self._path("agent", key), record.model_dump(mode="json"))

    def agent(self, key: str) -> AgentRecord | None:
        """The agent's record stored under key, if any."""
        path = self._path("agent", key)
        if not path.exists():
            return None
        return AgentRecord.model_validate_json(path.read_text(encoding="utf-8"))

    def put_topology(self, key: str, record: TopologyRecord) -> bool:
        """Store a topology record under key; False when the key already holds one."""
        return self._put(self._path("topology", key), record.model_dump(mode="json"))

    def topology(self, key: str) -> TopologyRecord | None:
        """The topology record stored under key, if any."""
        path = self._path("topology", key)
        if not path.exists():
            return None
        return TopologyRecord.model_validate_json(path.read_text(encoding="utf-8"))
