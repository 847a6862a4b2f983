"""Who is calling and what they may do: bearer tokens and RBAC, as kube-apiserver decides.

Admin tokens (written into the served kubeconfig) belong to `system:masters`. ServiceAccount
tokens come from the TokenRequest subresource and stop working when their account is deleted
or they expire. Every other request is authorized by the Roles, ClusterRoles and bindings stored
in the API (no aggregation); discovery paths are open to every authenticated user.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ADMIN_USER = "itbench:admin"


@dataclass(frozen=True)
class User:
    """An authenticated caller."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""

    @property
    def admin(self) -> bool:
        """Whether RBAC is bypassed (the `system:masters` group)."""
        return MASTERS in self.groups


@dataclass(frozen=True)
class Attributes:
    """What a request does, in RBAC's terms."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        """Whether the request addresses a resource (else a non-resource URL)."""
        return bool(self.resource)


@dataclass(frozen=True)
class _Issued:
    namespace: str
    name: str
    uid: str
    expires: float


def service_account_user(namespace: str, name: str, uid: str = "") -> User:
    """The user a ServiceAccount's token authenticates as."""
    return User(
        name=f"system:serviceaccount:{namespace}:{name}",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
        uid=uid,
    )


class Authenticator:
    """Maps bearer tokens to users: fixed admin tokens and issued ServiceAccount tokens.

    Args:
        account_uid: Looks up a ServiceAccount's current uid (None: it does not exist).
        clock: The server's time in epoch seconds (for expiry).
    """

    def __init__(
        self,
        account_uid: Callable[[str, str], str | None],
        clock: Callable[[], float],
    ) -> None:
        self._account_uid = account_uid
        self._clock = clock
        self._lock = threading.Lock()
        self._admins: dict[str, User] = {}
        self._issued: dict[str, _Issued] = {}

    def admin_token(self, name: str = ADMIN_USER) -> str:
        """A new token of a `system:masters` user."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._admins[token] = User(name=name, groups=(MASTERS, AUTHENTICATED))
        return token

    def issue(self, namespace: str, name: str, uid: str, seconds: int) -> tuple[str, float]:
        """A token for a ServiceAccount (the TokenRequest subresource); (token, expiry)."""
        token = secrets.token_urlsafe(32)
        expires = self._clock() + seconds
        with self._lock:
            self._issued[token] = _Issued(namespace, name, uid, expires)
        return token, expires

    def authenticate(self, header: str | None) -> User | None:
        """The user of an `Authorization` header (None: no or unknown credentials)."""
        if not header or not header.lower().startswith("bearer "):
            return None
        token = header[7:].strip()
        with self._lock:
            admin = self._admins.get(token)
            issued = self._issued.get(token)
        if admin is not None:
            return admin
        if issued is None:
            return None
        if (
            issued.expires <= self._clock()
            or self._account_uid(issued.namespace, issued.name) != issued.uid
        ):
            with self._lock:
                self._issued.pop(token, None)
            return None
        return service_account_user(issued.namespace, issued.name, issued.uid)


def _subject_matches(subject: Mapping[str, Any], user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _matches(values: Iterable[Any] | None, wanted: str) -> bool:
    listed = list(values or [])
    return "*" in listed or wanted in listed


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """Whether one PolicyRule allows the request."""
    if not _matches(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        urls = list(rule.get("nonResourceURLs") or [])
        return any(
            u == "*" or u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
            for u in urls
        )
    if not _matches(rule.get("apiGroups"), attrs.group):
        return False
    resources = list(rule.get("resources") or [])
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not (
        "*" in resources
        or combined in resources
        or (attrs.subresource and f"*/{attrs.subresource}" in resources)
        or (attrs.subresource and f"{attrs.resource}/*" in resources)
    ):
        return False
    names = list(rule.get("resourceNames") or [])
    return not names or attrs.name in names


class Authorizer:
    """RBAC over the stored Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.

    Args:
        objects: Returns the stored objects of an RBAC resource (`roles`, `clusterroles`,
            `rolebindings`, `clusterrolebindings`), optionally in one namespace.
    """

    def __init__(self, objects: Callable[[str, str | None], list[Json]]) -> None:
        self._objects = objects

    def allowed(self, user: User, attrs: Attributes) -> bool:
        """Whether RBAC allows the request."""
        if user.admin:
            return True
        if not attrs.resource_request and attrs.verb == "get":
            return True  # system:discovery and system:public-info-viewer
        if (
            attrs.resource_request
            and attrs.group == "authorization.k8s.io"
            and attrs.resource
            in (
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
            )
        ):
            return True  # system:basic-user
        return any(rule_allows(rule, attrs) for rule in self._rules(user, attrs.namespace))

    def _rules(self, user: User, namespace: str) -> Iterable[Mapping[str, Any]]:
        cluster_roles = {str(r["metadata"]["name"]): r for r in self._objects("clusterroles", None)}
        for binding in self._objects("clusterrolebindings", None):
            if any(_subject_matches(s, user, "") for s in binding.get("subjects") or []):
                role = cluster_roles.get(str((binding.get("roleRef") or {}).get("name")))
                yield from (role or {}).get("rules") or []
        if not namespace:
            return
        roles = {str(r["metadata"]["name"]): r for r in self._objects("roles", namespace)}
        for binding in self._objects("rolebindings", namespace):
            if not any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            source = cluster_roles if ref.get("kind") == "ClusterRole" else roles
            role = source.get(str(ref.get("name")))
            yield from (role or {}).get("rules") or []


def forbidden_message(user: User, attrs: Attributes, plural_group: str) -> str:
    """kube-apiserver's message for a refused request."""
    what = f'resource "{attrs.resource}"'
    if attrs.subresource:
        what = f'resource "{attrs.resource}/{attrs.subresource}"'
    scope = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    subject = f'"{attrs.name}" is forbidden' if attrs.name else "is forbidden"
    return (
        f'{plural_group} {subject}: User "{user.name}" cannot {attrs.verb} {what} in API group '
        f'"{attrs.group}"{scope}'
    )


def access_review(authorizer: Authorizer, user: User, review: Mapping[str, Any]) -> Json:
    """Answer a SelfSubjectAccessReview (`kubectl auth can-i`)."""
    spec = review.get("spec") or {}
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        attrs = Attributes(
            verb=str(resource.get("verb", "")),
            group=str(resource.get("group", "")),
            resource=str(resource.get("resource", "")),
            subresource=str(resource.get("subresource", "")),
            namespace=str(resource.get("namespace", "")),
            name=str(resource.get("name", "")),
        )
    else:
        non = spec.get("nonResourceAttributes") or {}
        attrs = Attributes(verb=str(non.get("verb", "")), path=str(non.get("path", "")))
    allowed = authorizer.allowed(user, attrs)
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": {},
        "spec": dict(spec),
        "status": {"allowed": allowed},
    }


def impersonated(
    authorizer: Authorizer, user: User, name: str | None, groups: Iterable[str]
) -> tuple[User | None, str]:
    """The user a request acts as under `Impersonate-User`/`Impersonate-Group` headers (as
    `kubectl --as`/`--as-group` send), when the caller may impersonate them.

    Returns:
        (the impersonated user, "") or (None, kube-apiserver's message for the refusal); the
        caller itself when the request impersonates no one.
    """
    wanted_groups = list(groups)
    if not name:
        if wanted_groups:
            return None, "requested [] without impersonating a user"
        return user, ""
    prefix = "system:serviceaccount:"
    checks: list[Attributes] = []
    if name.startswith(prefix) and name.count(":") == 3:
        namespace, account = name[len(prefix) :].split(":")
        checks.append(
            Attributes("impersonate", "", "serviceaccounts", namespace=namespace, name=account)
        )
    else:
        checks.append(Attributes("impersonate", "", "users", name=name))
    checks += [Attributes("impersonate", "", "groups", name=group) for group in wanted_groups]
    for attrs in checks:
        if not authorizer.allowed(user, attrs):
            return None, forbidden_message(user, attrs, attrs.resource)
    if name.startswith(prefix) and name.count(":") == 3 and not wanted_groups:
        namespace, account = name[len(prefix) :].split(":")
        return service_account_user(namespace, account), ""
    if AUTHENTICATED not in wanted_groups and name != "system:anonymous":
        wanted_groups.append(AUTHENTICATED)
    return User(name=name, groups=tuple(wanted_groups)), ""
