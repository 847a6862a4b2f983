"""The three patch types of the Kubernetes API: JSON patch (RFC 6902), JSON merge patch (RFC 7386)
and strategic merge patch (built-in kinds only; Service ports merge by `port`, containers by
`name`: the twin's merge keys, `itbench.environments.sim.objects.MERGE_KEYS`), and server-side
apply as a merge of the applied configuration (no field ownership: no conflicts, and fields a
manager stops applying are not removed)."""

from __future__ import annotations

from typing import Any

from itbench.environments.sim.objects import MergePatchError, clone, merge_patch

Json = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch the API server refuses; `code` is the HTTP status it answers with."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts:
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            raise KeyError(part)
    return node


def _index(parent: list[Any], last: str, *, adding: bool) -> int:
    if last == "-" and adding:
        return len(parent)
    index = int(last)
    bound = len(parent) if adding else len(parent) - 1
    if index < 0 or index > bound:
        raise IndexError(f"index {index} out of range")
    return index


def json_patch(doc: Json, ops: Any) -> Json:
    """Apply an RFC 6902 JSON patch to a copy of doc.

    Raises:
        PatchError: Not a list of operations, an unknown op, a missing path, or a failed `test`
            (422, as kube-apiserver answers).
    """
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations", 400)
    result: Any = clone(doc)
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError(f"JSON patch operation {op!r} is not an object", 400)
        kind = op.get("op")
        path = str(op.get("path", ""))
        parts = _pointer(path)
        try:
            if kind == "test":
                if _resolve(result, parts) != op.get("value"):
                    raise PatchError(f"the server rejected our request: test failed at {path}")
                continue
            if kind in ("move", "copy"):
                source = _pointer(str(op["from"]))
                value = clone(_resolve(result, source))
                if kind == "move":
                    holder = _resolve(result, source[:-1])
                    if isinstance(holder, list):
                        holder.pop(int(source[-1]))
                    else:
                        del holder[source[-1]]
                kind = "add"
            else:
                value = clone(op.get("value"))
            if kind not in ("add", "replace", "remove"):
                raise PatchError(f"unsupported JSON patch operation {kind!r}", 400)
            if not parts:
                if kind == "remove":
                    raise PatchError("a JSON patch cannot remove the whole object")
                result = value
                continue
            parent = _resolve(result, parts[:-1])
            last = parts[-1]
            if isinstance(parent, list):
                if kind == "add":
                    parent.insert(_index(parent, last, adding=True), value)
                elif kind == "replace":
                    parent[_index(parent, last, adding=False)] = value
                else:
                    parent.pop(_index(parent, last, adding=False))
            elif isinstance(parent, dict):
                if kind != "add" and last not in parent:
                    raise KeyError(last)
                if kind == "remove":
                    del parent[last]
                else:
                    parent[last] = value
            else:
                raise KeyError(last)
        except PatchError:
            raise
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise PatchError(
                f"the server rejected our request: {kind} operation does not apply: "
                f"doc is missing path: {path}: {exc}"
            ) from None
    if not isinstance(result, dict):
        raise PatchError("a JSON patch must leave an object")
    return result


def apply_patch(current: Json, body: Any, content_type: str, *, builtin: bool) -> Json:
    """The object a PATCH request makes of `current`.

    Args:
        current: The stored object.
        body: The decoded request body.
        content_type: The request's media type (one of the three patch types).
        builtin: Whether the kind is built in (only those take a strategic merge patch).

    Raises:
        PatchError: An unsupported media type (415), a strategic patch of a custom resource
            (415, as kube-apiserver answers), or a patch that does not apply (422).
    """
    if content_type == JSON_PATCH:
        return json_patch(current, body)
    if not isinstance(body, dict):
        raise PatchError("a merge patch is a JSON object", 400)
    if content_type == MERGE_PATCH:
        patched = merge_patch(current, body, strategic=False)
    elif content_type == STRATEGIC_PATCH:
        if not builtin:
            raise PatchError(
                "the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
                415,
            )
        try:
            patched = merge_patch(current, body, strategic=True, kind=str(current.get("kind", "")))
        except MergePatchError as exc:
            raise PatchError(str(exc)) from None
    elif content_type == APPLY_PATCH:
        # Server-side apply without field ownership: the applied configuration is merged onto
        # the object (strategically for built-in kinds); fields it no longer names stay.
        try:
            patched = merge_patch(
                current, body, strategic=builtin, kind=str(current.get("kind", ""))
            )
        except MergePatchError as exc:
            raise PatchError(str(exc)) from None
    else:
        raise PatchError(
            f"the body of the request was in an unknown format {content_type!r} - accepted "
            f"media types include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}",
            415,
        )
    if not isinstance(patched, dict):
        raise PatchError("a patch must leave an object")
    return patched
