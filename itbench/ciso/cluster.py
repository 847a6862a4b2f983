"""CISO evaluation on a live cluster: the trial's namespace as it is, and its counterpart variant
built from the scenario in a platform-owned namespace next to it.

A Kyverno or admission policy (set) is installed under platform names (audit only, background
scanning, matching those two namespaces only) and Kyverno's PolicyReports decide each object's
verdict; the policies are removed afterwards, whatever happened. A Rego policy is evaluated
with regorus on the evidence the agent's collection gathers, in the evidence sandbox, from a
read-only copy of the namespace's live objects (OPA Gatekeeper takes Rego only as
ConstraintTemplates over one admission review, which is not the artefact a CISO agent submits).
The RHEL9 class collects its evidence on the cluster too: in evidence Pods on a UBI 9 userland
(`itbench.ciso.host_pod`), one per variant, in the evaluation namespace `itbench-ciso-<token>`.
"""

from __future__ import annotations

import copy
import logging
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from itbench.ciso import reports as rp
from itbench.ciso.cel_policies import PolicyError, check_kinds
from itbench.ciso.engines import EngineSandbox, EngineUnavailableError, engines
from itbench.ciso.evaluate import (
    evaluate_submission,
    parse_policies,
    policy_set_changes,
    rego_verdicts,
    target_verdicts,
    twin_of,
)
from itbench.ciso.sandbox import CollectionResult, EnvironmentView, run_collection
from itbench.core.ciso.classes import CLASS_RULES, CisoClass, class_of
from itbench.core.ciso.posture import (
    aggregate,
    counterpart,
    environment_targets,
    expected_posture,
    target_kinds,
)
from itbench.core.models.compliance import (
    ComplianceEvaluation,
    ComplianceSubmission,
    TargetVerdict,
    VariantEvaluation,
    VerdictResult,
)
from itbench.core.models.scenario import Scenario
from itbench.environments.sim.compliance import POLICY_KINDS

log = logging.getLogger(__name__)

Obj = dict[str, Any]

REPORT_TIMEOUT_SECONDS = 120.0
"""How long the platform waits for Kyverno to report on every target."""
POLL_SECONDS = 2.0
"""How often it reads the reports meanwhile."""
COUNTERPART_PREFIX = "itbench-ciso-"
"""Namespaces the platform creates for counterpart variants start with this."""
HOLD_LABEL = "itbench.io/evaluation-only"
"""Node label no node has: the counterpart's Pods exist (Kyverno scans them) but never run."""

KINDS: dict[str, tuple[str, str, str, bool]] = {
    "Namespace": ("", "v1", "namespaces", False),
    "ServiceAccount": ("", "v1", "serviceaccounts", True),
    "Service": ("", "v1", "services", True),
    "ConfigMap": ("", "v1", "configmaps", True),
    "Secret": ("", "v1", "secrets", True),
    "Pod": ("", "v1", "pods", True),
    "Deployment": ("apps", "v1", "deployments", True),
    "ReplicaSet": ("apps", "v1", "replicasets", True),
    "NetworkPolicy": ("networking.k8s.io", "v1", "networkpolicies", True),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
}
"""Kinds the platform reads from (and writes to a counterpart) namespace: (group, version,
resource, namespaced)."""
APPLY_ORDER = (
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "Role",
    "RoleBinding",
    "Service",
    "NetworkPolicy",
    "Deployment",
    "ReplicaSet",
    "Pod",
)
"""The order a variant's objects are created in."""
DERIVED_KINDS = ("Pod", "ReplicaSet")
"""Kinds controllers make from a Deployment: never written, only read."""


class ClusterError(RuntimeError):
    """The cluster failed (unreachable, or refused the platform's own objects): the platform's
    failure, not the agent's."""


class RefusedError(ValueError):
    """The cluster refused an object made from the agent's artefact (its admission, or the
    CRD's schema): the artefact's failure."""


def _path(group: str, version: str, plural: str, namespace: str | None, name: str = "") -> str:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{where}/{plural}" + (f"/{name}" if name else "")


def _message(exc: Any) -> str:
    import json

    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    return str(body.get("message") or exc.reason or exc)[:1500]


@dataclass
class Rest:
    """JSON calls on the cluster's API through the official client's ApiClient."""

    api: Any

    def call(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        *,
        query: Mapping[str, str] | None = None,
    ) -> Obj | None:
        """One call; None when the object to read or delete does not exist (404).

        Raises:
            RefusedError: The API refused the request (4xx other than 404), with its message.
            ClusterError: The cluster is unreachable or failed (5xx).
        """
        import urllib3
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = (
                "application/merge-patch+json" if method == "PATCH" else "application/json"
            )
        try:
            answer = self.api.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                response_types_map={200: "object", 201: "object", 202: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=True,
            )
        except ApiException as exc:
            if exc.status == 404 and method in ("GET", "DELETE"):
                return None
            if exc.status == 404:
                raise ClusterError(
                    f"{method} {path}: the cluster does not serve this resource (is the policy "
                    "engine installed? see docs/stack.md)"
                ) from None
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 401:
                raise RefusedError(f"{exc.status} {_message(exc)}") from None
            raise ClusterError(f"{method} {path}: {exc.status} {_message(exc)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"{method} {path}: the cluster is unreachable: {exc}") from None
        return answer if isinstance(answer, dict) else {}

    def items(self, path: str, *, query: Mapping[str, str] | None = None) -> list[Obj]:
        """The items of a list (empty when the resource is not served)."""
        listed = self.call("GET", path, query=query) or {}
        return [i for i in listed.get("items") or [] if isinstance(i, dict)]


def read_objects(rest: Rest, namespace: str) -> list[Obj]:
    """The namespace's objects of the kinds CISO controls read, and the Namespace itself."""
    out: list[Obj] = []
    for kind, (group, version, plural, namespaced) in KINDS.items():
        if not namespaced:
            continue
        for item in rest.items(_path(group, version, plural, namespace)):
            item.setdefault("apiVersion", f"{group}/{version}" if group else version)
            item.setdefault("kind", kind)
            out.append(item)
    ns = rest.call("GET", _path("", "v1", "namespaces", None, namespace))
    if ns is not None:
        ns.setdefault("apiVersion", "v1")
        ns.setdefault("kind", "Namespace")
        out.append(ns)
    return out


def _clean(obj: Obj, namespace: str) -> Obj:
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    meta = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k in ("name", "labels", "annotations")
    }
    if obj.get("kind") != "Namespace":
        meta["namespace"] = namespace
    out["metadata"] = copy.deepcopy(meta)
    return out


def variant_manifests(variant: Scenario, namespace: str) -> list[Obj]:
    """The objects of a variant's namespace as manifests for `namespace`: the Namespace first
    (renamed), then what controllers do not make; Deployments' Pods are held off every node."""
    out: list[Obj] = []
    for obj in twin_of(variant).objects():
        kind = obj.get("kind")
        if kind in POLICY_KINDS or kind in DERIVED_KINDS or kind not in KINDS:
            continue
        body = _clean(obj, namespace)
        if kind == "Namespace":
            body["metadata"]["name"] = namespace
            labels = dict(body["metadata"].get("labels") or {})
            labels[rp.NAME_LABEL] = namespace
            body["metadata"]["labels"] = labels
        if kind == "Deployment":
            pod = body.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), HOLD_LABEL: "true"}
        out.append(body)
    # What a Pod needs (its ServiceAccount, ConfigMaps) exists before its Deployment does.
    out.sort(key=lambda o: APPLY_ORDER.index(str(o["kind"])))
    return out


def apply_manifests(rest: Rest, manifests: list[Obj]) -> None:
    """Create each object, or merge it onto one that exists (the namespace's default
    ServiceAccount is made by the API server).

    Raises:
        ClusterError: The cluster refused one (named).
    """
    for body in manifests:
        group, version, plural, namespaced = KINDS[str(body["kind"])]
        ns = str(body["metadata"].get("namespace", "")) if namespaced else None
        name = str(body["metadata"]["name"])
        try:
            try:
                rest.call("POST", _path(group, version, plural, ns), body)
            except RefusedError as exc:
                if not str(exc).startswith("409"):
                    raise
                rest.call("PATCH", _path(group, version, plural, ns, name), body)
        except RefusedError as exc:
            raise ClusterError(
                f"creating {body['kind']}/{name} in {ns or 'the cluster'}: {exc}"
            ) from None


def _remapped(obj: Obj, source: str, target: str) -> Obj:
    """An object of namespace `source` as if it were in `target` (the counterpart's evidence
    reads like the trial's)."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    if out.get("kind") == "Namespace" and meta.get("name") == source:
        meta["name"] = target
        labels = meta.get("labels")
        if isinstance(labels, dict) and rp.NAME_LABEL in labels:
            labels[rp.NAME_LABEL] = target
    elif meta.get("namespace") == source:
        meta["namespace"] = target
    return out


@dataclass
class Variant:
    """One variant on the cluster: its label, its scenario, where it lives."""

    label: str
    scenario: Scenario
    namespace: str
    owners: dict[str, str] = field(default_factory=dict)

    def targets(self) -> list[str]:
        """The targets its expected posture covers."""
        return list(expected_posture(self.scenario))


@dataclass
class LiveEvaluator:
    """Evaluates CISO artefacts on a live cluster, once: the names it creates are the
    evaluation's (make one evaluator per submission).

    Attributes:
        rest: The cluster's API.
        namespace: The trial's namespace (the trial variant lives there).
        timeout_seconds: How long Kyverno may take to report on every target.
        poll_seconds: How often the reports are read meanwhile.
        collection_timeout: Wall-clock limit of one collection run.
        box: The engine process for Rego (default: this process's).
        sleep: Waits between reads.
        monotonic: The clock deadlines are measured on.
        salt: Makes the evaluation's names unique (default: random).
        host_image: The RHEL9 class's evidence image (default: `host_pod.DEFAULT_IMAGE`).
        host_log: Reads an evidence Pod's log (default: the API's pods/log).
    """

    rest: Rest
    namespace: str
    timeout_seconds: float = REPORT_TIMEOUT_SECONDS
    poll_seconds: float = POLL_SECONDS
    collection_timeout: float = 60.0
    box: EngineSandbox | None = None
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    salt: str = field(default_factory=lambda: secrets.token_hex(8))
    host_image: str = ""
    host_log: Callable[[Rest, str, str, int], bytes] | None = None
    _built: bool = field(init=False, default=False)
    _used: bool = field(init=False, default=False)

    @property
    def token(self) -> str:
        """The evaluation's token (in every name it creates)."""
        return rp.evaluation_token(self.namespace, self.salt)

    @property
    def counterpart_namespace(self) -> str:
        """Where the counterpart variant is built."""
        return f"{COUNTERPART_PREFIX}{self.token}"

    # ---- entry --------------------------------------------------------------------------------
    def evaluate(
        self, scenario: Scenario, submission: ComplianceSubmission
    ) -> ComplianceEvaluation:
        """Evaluate the artefacts on the trial's namespace and on the counterpart.

        Never raises for the artefacts: an artefact problem is the evaluation's `problem` (or a
        variant's), a cluster failure a `platform_error`.

        Raises:
            RuntimeError: This evaluator has evaluated before (its names would repeat).
        """
        if self._used:
            raise RuntimeError("a LiveEvaluator evaluates once; make one per submission")
        self._used = True
        started = self.monotonic()
        cls = class_of(scenario.spec.scenario_class)
        if cls is None:
            evaluation = ComplianceEvaluation(
                submitted=True, problem=f"{scenario.spec.scenario_class} is not a CISO class"
            )
        elif CLASS_RULES[cls].scope == "host":
            evaluation = self._host_class(scenario, submission)
        else:
            evaluation = self._namespace_class(scenario, submission, cls)
        seconds = round(max(0.0, self.monotonic() - started), 3)
        return evaluation.model_copy(update={"evaluation_seconds": seconds})

    def _namespace_class(
        self, scenario: Scenario, submission: ComplianceSubmission, cls: CisoClass
    ) -> ComplianceEvaluation:
        rules = CLASS_RULES[cls]
        if rules.policy == "kyverno" and not submission.kyverno.strip():
            return ComplianceEvaluation(
                submitted=True,
                problem=f"MissingPolicy: the {cls.value} class takes `kyverno` (policy YAML)",
            )
        variants = [
            Variant("trial", scenario, self.namespace),
            Variant("counterpart", counterpart(scenario), self.counterpart_namespace),
        ]
        try:
            if rules.policy == "kyverno":
                try:
                    docs = parse_policies(submission.kyverno)
                    check_kinds(docs)
                except (ValueError, PolicyError) as exc:
                    text = str(exc)
                    problem = text if text.startswith("InvalidYAML") else f"InvalidPolicy: {text}"
                    return ComplianceEvaluation(submitted=True, problem=problem[:2000])
                untouched = (
                    policy_set_changes(docs, scenario) if cls == CisoClass.KYVERNO_UPDATE else []
                )
                try:
                    policies = rp.platform_policies(
                        docs, [v.namespace for v in variants], self.token
                    )
                except ValueError as exc:
                    return ComplianceEvaluation(
                        submitted=True, problem=f"InvalidPolicy: {exc}"[:2000]
                    )
                self._build_counterpart(variants[1])
                out = self._kyverno(policies, variants)
                return ComplianceEvaluation(submitted=True, untouched=untouched[:200], variants=out)
            if not submission.rego.strip() or submission.collection is None:
                return evaluate_submission(scenario, submission, box=self.box)
            compiled = self._box().call({"op": "rego-compile", "module": submission.rego})
            if not compiled.get("ok"):
                return ComplianceEvaluation(
                    submitted=True, problem=f"RegoCompile: {compiled.get('error', '')}"[:2000]
                )
            self._build_counterpart(variants[1])
            return self._rego(submission, variants)
        except (ClusterError, RefusedError, EngineUnavailableError) as exc:
            log.warning("live CISO evaluation in %s failed: %s", self.namespace, exc)
            return ComplianceEvaluation(
                submitted=True, platform_error=True, problem=f"ClusterFailed: {exc}"[:2000]
            )
        finally:
            if self._built:
                self._remove_counterpart()

    def _host_class(
        self, scenario: Scenario, submission: ComplianceSubmission
    ) -> ComplianceEvaluation:
        """The RHEL9 class: the collection runs in an evidence Pod per variant, then the Rego
        is evaluated on each evidence as in the twin."""
        if not submission.rego.strip() or submission.collection is None:
            # The artefact's own problem, named before anything is created.
            return evaluate_submission(scenario, submission, box=self.box)
        from itbench.ciso import host_pod

        try:
            compiled = self._box().call({"op": "rego-compile", "module": submission.rego})
            if not compiled.get("ok"):
                return ComplianceEvaluation(
                    submitted=True, problem=f"RegoCompile: {compiled.get('error', '')}"[:2000]
                )
            self._built = True
            apply_manifests(self.rest, [host_pod.namespace_manifest(self.counterpart_namespace)])
            out: list[VariantEvaluation] = []
            platform_error = False
            for label, variant in (("trial", scenario), ("counterpart", counterpart(scenario))):
                env = twin_of(variant)
                result = host_pod.run_on_cluster(
                    self.rest,
                    self.counterpart_namespace,
                    submission.collection,
                    env.host_state(),
                    name=f"{self.counterpart_namespace}-{label}",
                    image=self.host_image or host_pod.DEFAULT_IMAGE,
                    scenario_namespace=env.namespace,
                    objects=env.objects(),
                    timeout=self.collection_timeout,
                    sleep=self.sleep,
                    monotonic=self.monotonic,
                    read_log=self.host_log or host_pod.read_pod_log,
                )
                platform_error = platform_error or result.platform_error
                out.append(
                    self._rego_verdicts(
                        label,
                        submission.rego,
                        result,
                        environment_targets(variant),
                        env.owners(),
                    )
                )
            return ComplianceEvaluation(submitted=True, variants=out, platform_error=platform_error)
        except (ClusterError, RefusedError, EngineUnavailableError) as exc:
            log.warning("live CISO evaluation in %s failed: %s", self.namespace, exc)
            return ComplianceEvaluation(
                submitted=True, platform_error=True, problem=f"ClusterFailed: {exc}"[:2000]
            )
        finally:
            if self._built:
                self._remove_counterpart()

    def _rego_verdicts(
        self,
        label: str,
        rego: str,
        result: CollectionResult,
        targets: list[str],
        owners: Mapping[str, str],
    ) -> VariantEvaluation:
        """One variant's evaluation from its collection's result."""
        verdicts: list[TargetVerdict] = []
        if not result.ok:
            problem = f"CollectionFailed: {result.problem}"
        else:
            answer = self._box().call({"op": "rego-eval", "module": rego, "input": result.evidence})
            if answer.get("ok"):
                verdicts, found = rego_verdicts(answer.get("value"), targets, owners)
                problem = f"RegoResult: {found}" if found else ""
            else:
                problem = f"RegoFailed: {answer.get('error', '')}"
        return VariantEvaluation(
            variant=label,
            engine="regorus",
            evidence_bytes=result.evidence_bytes,
            verdicts=verdicts,
            problem=problem[:2000],
        )

    def _box(self) -> EngineSandbox:
        if self.box is None:
            self.box = engines()
        return self.box

    # ---- the counterpart ----------------------------------------------------------------------
    def _build_counterpart(self, variant: Variant) -> None:
        self._built = True
        apply_manifests(self.rest, variant_manifests(variant.scenario, variant.namespace))

    def _remove_counterpart(self) -> None:
        try:
            self.rest.call(
                "DELETE", _path("", "v1", "namespaces", None, self.counterpart_namespace)
            )
        except (ClusterError, RefusedError) as exc:
            log.warning(
                "could not delete the counterpart namespace %s: %s", self.counterpart_namespace, exc
            )

    # ---- Kyverno ------------------------------------------------------------------------------
    def _install(self, policies: list[rp.PlatformPolicy]) -> None:
        for policy in policies:
            try:
                self.rest.call(
                    "POST", _path(policy.group, policy.version, policy.plural, None), policy.body
                )
            except RefusedError as exc:
                raise RefusedError(
                    f"the cluster refused {policy.submitted} (installed as {policy.kind}/"
                    f"{policy.name}): {exc}"
                ) from None

    def _uninstall(self, policies: list[rp.PlatformPolicy]) -> list[str]:
        left: list[str] = []
        for policy in reversed(policies):
            try:
                self.rest.call(
                    "DELETE", _path(policy.group, policy.version, policy.plural, None, policy.name)
                )
            except (ClusterError, RefusedError) as exc:
                left.append(f"{policy.kind}/{policy.name}: {exc}")
        for item in left:
            log.warning("could not remove the evaluation's policy %s", item)
        return left

    def _read_reports(self, variants: list[Variant], cluster_scoped: bool) -> list[Obj]:
        found: list[Obj] = []
        for variant in variants:
            found += self.rest.items(
                _path(rp.REPORT_GROUP, rp.REPORT_VERSION, "policyreports", variant.namespace)
            )
        if cluster_scoped:
            found += self.rest.items(
                _path(rp.REPORT_GROUP, rp.REPORT_VERSION, "clusterpolicyreports", None)
            )
        return found

    def _readiness(self, policies: list[rp.PlatformPolicy]) -> list[str]:
        waiting: list[str] = []
        for policy in policies:
            body = self.rest.call(
                "GET", _path(policy.group, policy.version, policy.plural, None, policy.name)
            )
            ready, message = rp.policy_ready(policy, body)
            if not ready:
                waiting.append(f"{policy.submitted}: {message or 'not ready'}")
        return waiting

    def _owners(self, variant: Variant) -> dict[str, str]:
        objects: list[Obj] = []
        for kind in DERIVED_KINDS:
            group, version, plural, _ns = KINDS[kind]
            for item in self.rest.items(_path(group, version, plural, variant.namespace)):
                item.setdefault("kind", kind)
                objects.append(item)
        return rp.owners_of(objects)

    def _results_by_variant(
        self, results: list[rp.ReportResult], variants: list[Variant]
    ) -> dict[str, list[TargetVerdict]]:
        out: dict[str, list[TargetVerdict]] = {v.label: [] for v in variants}
        by_ns = {v.namespace: v for v in variants}
        own = variants[0].scenario.spec.environment.namespace
        for result in results:
            variant = by_ns.get(result.namespace)
            if variant is None:
                continue
            verdict = result.verdict
            if result.target == f"Namespace/{variant.namespace}":
                # Either variant's Namespace is the scenario's (the counterpart's stands for it).
                verdict = verdict.model_copy(update={"target": f"Namespace/{own}"})
            out[variant.label].append(verdict)
        return out

    def _kyverno(
        self, policies: list[rp.PlatformPolicy], variants: list[Variant]
    ) -> list[VariantEvaluation]:
        cluster_scoped = "Namespace" in target_kinds(variants[0].scenario)
        try:
            try:
                self._install(policies)
            except RefusedError as exc:
                problem = f"InvalidPolicy: {exc}"[:2000]
                return [
                    VariantEvaluation(variant=v.label, engine="kyverno", problem=problem)
                    for v in variants
                ]
            return self._wait(policies, variants, cluster_scoped)
        finally:
            # Whatever happened (a refusal, a time-out, the cluster failing mid-way), nothing of
            # the evaluation stays installed.
            self._uninstall(policies)

    def _wait(
        self, policies: list[rp.PlatformPolicy], variants: list[Variant], cluster_scoped: bool
    ) -> list[VariantEvaluation]:
        deadline = self.monotonic() + self.timeout_seconds
        previous: object = None
        waiting: list[str] = []
        missing: dict[str, list[str]] = {}
        grouped: dict[str, list[TargetVerdict]] = {}
        while True:
            waiting = self._readiness(policies)
            results = rp.report_results(self._read_reports(variants, cluster_scoped), policies)
            grouped = self._results_by_variant(results, variants)
            for v in variants:
                v.owners = self._owners(v)
            missing = {
                v.label: rp.uncovered(
                    v.targets(),
                    [rp.ReportResult(v.namespace, t.target, t) for t in grouped[v.label]],
                    v.owners,
                )
                for v in variants
            }
            seen = sorted((k, t.target, t.result.value) for k, ts in grouped.items() for t in ts)
            if not waiting and not any(missing.values()) and seen == previous:
                break
            previous = seen
            if self.monotonic() >= deadline:
                break
            self.sleep(self.poll_seconds)
        out: list[VariantEvaluation] = []
        for v in variants:
            verdicts = grouped.get(v.label, [])
            if not verdicts:
                why = f"; the policy is not ready ({'; '.join(waiting)})" if waiting else ""
                out.append(
                    VariantEvaluation(
                        variant=v.label,
                        engine="kyverno",
                        problem=(
                            f"NoReport: Kyverno wrote no PolicyReport result for the policy in "
                            f"{v.namespace} within {self.timeout_seconds:g} s{why}; check "
                            "`kubectl get pods -n kyverno` and the policy's status"
                        )[:2000],
                    )
                )
                continue
            kept = target_verdicts(aggregate(verdicts, v.owners))
            unreported = missing.get(v.label, [])
            kept += [
                TargetVerdict(
                    target=t,
                    result=VerdictResult.NOT_ASSESSED,
                    detail=f"no PolicyReport result within {self.timeout_seconds:g} s",
                )
                for t in unreported
                if t not in {k.target for k in kept}
            ]
            out.append(VariantEvaluation(variant=v.label, engine="kyverno", verdicts=kept))
        return out

    # ---- Rego ---------------------------------------------------------------------------------
    def _rego(
        self, submission: ComplianceSubmission, variants: list[Variant]
    ) -> ComplianceEvaluation:
        assert submission.collection is not None
        out: list[VariantEvaluation] = []
        platform_error = False
        own = variants[0].scenario.spec.environment.namespace
        for v in variants:
            live = read_objects(self.rest, v.namespace)
            objects = [_remapped(o, v.namespace, own) for o in live]
            v.owners = rp.owners_of(objects)
            host = twin_of(v.scenario).host_state()
            view = EnvironmentView(own, objects, host)
            result = run_collection(
                submission.collection, view, timeout_seconds=self.collection_timeout
            )
            verdicts: list[TargetVerdict] = []
            if not result.ok:
                platform_error = platform_error or result.platform_error
                problem = f"CollectionFailed: {result.problem}"
            else:
                answer = self._box().call(
                    {"op": "rego-eval", "module": submission.rego, "input": result.evidence}
                )
                if answer.get("ok"):
                    verdicts, found = rego_verdicts(answer.get("value"), v.targets(), v.owners)
                    problem = f"RegoResult: {found}" if found else ""
                else:
                    problem = f"RegoFailed: {answer.get('error', '')}"
            out.append(
                VariantEvaluation(
                    variant=v.label,
                    engine="regorus",
                    evidence_bytes=result.evidence_bytes,
                    verdicts=verdicts,
                    problem=problem[:2000],
                )
            )
        return ComplianceEvaluation(submitted=True, variants=out, platform_error=platform_error)


def cluster_of(env: object) -> tuple[Any, str] | None:
    """The kubeconfig and namespace of a live cluster environment (None: not one)."""
    # A cluster environment exists only once its module is imported: a twin's process does not
    # pay for importing it.
    module = sys.modules.get("itbench.environments.kube.environment")
    if module is not None and isinstance(env, module.ClusterEnvironment):
        return env.kubeconfig, env.namespace
    return None


def host_image_of(env: object) -> str:
    """The RHEL9 evidence image a cluster environment is configured with ('' for the
    default): its `ciso_host_image` attribute, when it has one."""
    image = getattr(env, "ciso_host_image", "")
    return image if isinstance(image, str) else ""


def evaluate_on(
    env: object,
    scenario: Scenario,
    submission: ComplianceSubmission,
    *,
    timeout_seconds: float = REPORT_TIMEOUT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    host_image: str = "",
) -> ComplianceEvaluation:
    """The platform's evaluation of CISO artefacts in the trial's environment: on its live
    cluster when it runs on one (Kyverno's reports, live objects, evidence Pods), in the twin
    otherwise.

    Args:
        env: The trial's environment.
        scenario: The trial's instance.
        submission: The accepted artefacts.
        timeout_seconds: How long Kyverno may take to report (live only).
        sleep: Waits between reads of the reports (live only).
        monotonic: The clock the time limit is measured on (live only).
        host_image: The RHEL9 evidence image (live only; default: the environment's
            `ciso_host_image` when it has one, else `host_pod.DEFAULT_IMAGE`).
    """
    found = cluster_of(env)
    if found is None:
        return evaluate_submission(scenario, submission)
    from itbench.environments.port import EnvironmentFailure

    _kubeconfig, namespace = found
    try:
        # The cluster's evaluator identity (on the operator's own cluster a ServiceAccount of
        # its own, with a short-lived token), else the kubeconfig's.
        api = env.ciso_evaluator_api()  # type: ignore[attr-defined]
    except EnvironmentFailure as exc:
        return ComplianceEvaluation(
            submitted=True, platform_error=True, problem=f"ClusterFailed: {exc}"[:2000]
        )
    try:
        evaluator = LiveEvaluator(
            Rest(api),
            namespace,
            timeout_seconds=timeout_seconds,
            sleep=sleep,
            monotonic=monotonic,
            host_image=host_image or host_image_of(env),
        )
        return evaluator.evaluate(scenario, submission)
    finally:
        api.close()
