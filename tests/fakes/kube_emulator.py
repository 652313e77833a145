"""A Kubernetes API emulator for the operator's integration tests: kmock's, plus what kopf needs.

kmock's `KubernetesEmulator` keeps objects in memory and serves list/watch/patch/delete with
finalizers. This subclass adds (shared/notes/operator-testing.md):

- metadata stamping: uid, resourceVersion (bumped on every change), creationTimestamp,
  generation (bumped when the spec changes), so kopf's `test /metadata/resourceVersion` passes;
- 201 on create;
- server-side apply on an existing object as a replacement of the fields the apply names (one
  field manager: what it no longer sends goes away), instead of a recursive merge; on a missing
  object it stays a 404, which the operator answers with a create;
- lists with a resourceVersion and watches from it that replay only newer objects and miss no
  event (kmock replays everything, then subscribes: events in between were lost);
- fault injection that changes nothing: `fail("PATCH", "/deployments/", status=500)`;
- the built-in kinds, the EchoDeployment CRD and optionally the Prometheus Operator and KEDA APIs.

Still absent: label selectors (ignored), garbage collection, controllers (statuses stay empty
until a test patches them).
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import importlib.resources
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
from kmock._internal import dicts, enums, rendering

__all__ = ["ECHO_RESOURCE", "Fault", "KubeEmulator"]

ECHO_RESOURCE = "echo.dev/v1alpha1/echodeployments"
SSA = "application/apply-patch+yaml"
_KEPT = {"apiVersion", "kind", "metadata", "status"}
ADDONS = {
    "monitoring.coreos.com/v1/servicemonitors": "ServiceMonitor",
    "keda.sh/v1alpha1/scaledobjects": "ScaledObject",
}


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    return aiohttp.web.json_response({**body, "message": message}, status=code)


def _matches(request: rendering.Request, namespace: str | None, name: str | None) -> bool:
    return request.namespace in (None, namespace) and request.name in (None, name)


@dataclass
class Fault:
    """Answer `status` to the next `times` requests of `method` whose path ends with `path_part`."""

    method: str
    path_part: str
    status: int
    times: int


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    faults: list[Fault] = attrs.field(factory=list, init=False)
    _rv: int = attrs.field(default=1000, init=False)
    _mutations: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        bundled = importlib.resources.files("kmock._internal").joinpath("resources.json.gz")
        self.resources.load_data(gzip.decompress(bundled.read_bytes()))  # load_bundled(), minus a warning
        self.resources[ECHO_RESOURCE] = kmock.ResourceInfo(
            kind="EchoDeployment",
            singular="echodeployment",
            namespaced=True,
            shortnames={"echo"},
            subresources={"status"},
            verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
        )

    def add_addons(self) -> None:
        """Serve the Prometheus Operator's and KEDA's APIs too."""
        for resource, kind in ADDONS.items():
            self.resources[resource] = kmock.ResourceInfo(
                kind=kind, namespaced=True, verbs={"get", "list", "watch", "create", "patch", "delete"}
            )

    def fail(self, method: str, path_part: str, *, status: int = 500, times: int = 1) -> None:
        self.faults.append(Fault(method.upper(), path_part, status, times))

    def _take_fault(self, request: rendering.Request) -> Fault | None:
        for fault in self.faults:
            if (
                fault.times > 0
                and request.method == fault.method
                and request.url.path.endswith(fault.path_part)
            ):
                fault.times -= 1
                return fault
        return None

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        fault = self._take_fault(request)
        if fault is not None:
            return _status(fault.status, "InjectedFault", f"injected {fault.status}")
        if request.resource is None or request.action not in (enums.action.CREATE, enums.action.UPDATE):
            return await super()._handle(request)
        async with self._mutations:
            if request.action == enums.action.CREATE:
                self._stamp_create(request)
            elif (refusal := self._refuse_json_patch(request)) is not None:
                return refusal
            else:
                self._stamp_update(request)
            response = await super()._handle(request)
        if request.action == enums.action.CREATE and response.status == 200 and not response.prepared:
            response.set_status(201)
        return response

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        """kmock's watch, minus a race (the bus is marked before the replay, not after it), and from
        `resourceVersion` when given: only objects changed since then are replayed."""
        yield b""
        assert request.resource is not None
        bus = self._buses[request.resource]
        since = request.params.get("resourceVersion", "")
        async with self._lock:
            marker = await bus.mark()
            replay = [
                {"type": "ADDED", "object": obj.raw}
                for (res, ns, name), obj in self.objects.items()
                if res == request.resource
                and not obj.deleted
                and _matches(request, ns, name)
                and (not since.isdigit() or int(obj.raw["metadata"].get("resourceVersion", 0)) > int(since))
            ]
        try:
            for event in replay:
                yield event
            async for event in bus.stream(since=marker):
                meta = (event.get("object") or {}).get("metadata") or {}
                if _matches(request, meta.get("namespace"), meta.get("name")):
                    yield event
        finally:
            await bus.unmark(marker)

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        """kmock's list with a real resourceVersion, so that a watch from it replays nothing old."""
        answer = await super()._serve_list(request)
        return {**answer, "metadata": {"resourceVersion": str(self._rv)}}  # type: ignore[dict-item]

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _refuse_json_patch(self, request: rendering.Request) -> aiohttp.web.StreamResponse | None:
        """A JSON patch whose `test` fails is a 422, as on a real server (kopf retries it later)."""
        stored = self._stored(request)
        if stored is None or not isinstance(request.data, list):
            return None
        try:
            jsonpatch.apply_patch(stored, request.data, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
            return _status(422, "Invalid", f"the JSON patch cannot be applied: {error}")
        return None

    def _now(self) -> str:
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _stamp_create(self, request: rendering.Request) -> None:
        meta = request.data.setdefault("metadata", {})
        if request.namespace:
            meta.setdefault("namespace", request.namespace)
        meta.update(uid=str(uuid.uuid4()), resourceVersion=str(self._next_rv()), generation=1)
        meta["creationTimestamp"] = self._now()

    def _stored(self, request: rendering.Request) -> dict[str, Any] | None:
        return self.get(request.resource, request.namespace, request.name)

    def get(self, resource: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object, or None when absent or deleted (for assertions)."""
        key = (kmock.resource(resource), namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return self.objects[key].raw

    def names(self, resource: str, namespace: str | None) -> set[str]:
        """Names of the live objects of a resource in a namespace."""
        wanted = kmock.resource(resource)
        return {
            name
            for (res, ns, name), obj in self.objects.items()
            if res == wanted and ns == namespace and not obj.deleted
        }

    def _stamp_update(self, request: rendering.Request) -> None:
        stored = self._stored(request)
        if stored is None:
            return  # the emulator answers 404
        rv = str(self._next_rv())
        generation = (stored.get("metadata") or {}).get("generation", 1)
        data = request.data
        content_type = {k.lower(): v for k, v in request.headers.items()}.get("content-type", "")
        if content_type.startswith(SSA) and isinstance(data, dict):
            ops = self._apply_as_json_patch(stored, data)
            if jsonpatch.apply_patch(stored, ops, in_place=False) != stored:  # no-op applies keep the version
                ops.append({"op": "add", "path": "/metadata/resourceVersion", "value": rv})
            object.__setattr__(request, "data", ops)
        elif isinstance(data, dict):
            meta = data.get("metadata") or {}
            data["metadata"] = meta
            meta["resourceVersion"] = rv
            spec = stored.get("spec") or {}
            if (
                "spec" in data
                and request.subresource is None
                and dicts.patch_dict(spec, data["spec"]) != spec
            ):
                meta["generation"] = generation + 1
        elif isinstance(data, list):
            data.append({"op": "add", "path": "/metadata/resourceVersion", "value": rv})
            if request.subresource is None and any(
                str(op.get("path", "")).startswith("/spec") for op in data
            ):
                data.append({"op": "add", "path": "/metadata/generation", "value": generation + 1})

    @staticmethod
    def _apply_as_json_patch(stored: dict[str, Any], applied: dict[str, Any]) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = [
            {"op": "add", "path": f"/{key}", "value": value}
            for key, value in applied.items()
            if key not in _KEPT
        ]
        ops += [
            {"op": "remove", "path": f"/{key}"} for key in stored if key not in _KEPT and key not in applied
        ]
        applied_meta = applied.get("metadata") or {}
        for key in ("labels", "annotations", "ownerReferences"):
            if key in applied_meta:
                ops.append({"op": "add", "path": f"/metadata/{key}", "value": applied_meta[key]})
        if "spec" in applied and applied["spec"] != stored.get("spec"):
            generation = (stored.get("metadata") or {}).get("generation", 1)
            ops.append({"op": "add", "path": "/metadata/generation", "value": generation + 1})
        return ops
