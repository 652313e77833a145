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
- kmock's request history kept to the requests in flight (`history` has them all, `answers`
  what was answered);
- the built-in kinds, the EchoDeployment CRD and optionally the Prometheus Operator and KEDA APIs;
- query parameters typed as the real server types them (metav1.ListOptions, PatchOptions,
  DeleteOptions): integers must parse as Go's ParseInt does (`timeoutSeconds=300.0` is a 400),
  booleans must be true/false/1/0, `resourceVersion` an unsigned integer, `resourceVersionMatch`
  only with a resourceVersion and never on a watch, `force` only on an apply, an apply only with a
  `fieldManager`; `watch=True` (kubernetes_asyncio) is a watch, and a watch ends after its
  `timeoutSeconds` as on a real server;
- bodies typed too: ObjectMeta fields (strings, string maps), and EchoDeployments against the
  CRD's OpenAPI schema (types, enums, required; not the CEL rules);
- optimistic concurrency: a body carrying `metadata.resourceVersion` that is not the stored one is a
  409 Conflict, as on a real server;
- `serve_kubernetes_1_20()`: /version 1.20, policy/v1beta1 and autoscaling/v2beta2 instead of
  policy/v1 and autoscaling/v2, no StatefulSet PVC retention policy, and server-side applies that
  want resource quantities as strings — each answered as a real 1.20 server answers it.

The Status objects (code, reason, message) are the real server's; tests/kube/test_api_contract.py
runs the same requests against the emulator and, when it is built, a real kube-apiserver.

Still absent: label selectors (ignored), structural pruning of unknown CR fields, garbage
collection, controllers (statuses stay empty until a test patches them).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import gzip
import importlib.resources
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import jsonschema
import kmock
import yaml
from kmock._internal import dicts, enums, rendering

__all__ = ["ECHO_RESOURCE", "Fault", "KubeEmulator"]

ECHO_RESOURCE = "echo.dev/v1alpha1/echodeployments"
SSA = "application/apply-patch+yaml"
_KEPT = {"apiVersion", "kind", "metadata", "status"}
ADDONS = {
    "monitoring.coreos.com/v1/servicemonitors": "ServiceMonitor",
    "keda.sh/v1alpha1/scaledobjects": "ScaledObject",
}
CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "echo.dev_echodeployments.yaml"
INT_PARAMS = frozenset({"timeoutSeconds", "limit", "gracePeriodSeconds"})
BOOL_PARAMS = frozenset({"watch", "allowWatchBookmarks", "sendInitialEvents", "force", "orphanDependents"})
RESOURCE_VERSION_MATCHES = ("Exact", "NotOlderThan")
PROPAGATION_POLICIES = ("Orphan", "Background", "Foreground")
_GO_INT = re.compile(r"[+-]?[0-9]+")
_STRING_META = ("name", "namespace", "generateName", "uid", "resourceVersion")
_STRING_MAP_META = ("labels", "annotations")
Hook = Callable[[rendering.Request], Any]


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    """A Status object; `reason` "" is left out, as the real server does for its 500s."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body["message"] = message
    if reason:
        body["reason"] = reason
    return aiohttp.web.json_response({**body, "code": code}, status=code)


def _bad_request(message: str) -> aiohttp.web.Response:
    return _status(400, "BadRequest", message)


def _invalid(what: str, errors: list[str]) -> aiohttp.web.Response:
    """A 422 as the API server words it: `<Kind.group> "<name>" is invalid: <field>: <why>`."""
    causes = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return _status(422, "Invalid", f"{what} is invalid: {causes}")


def go_bool(value: str) -> bool | None:
    """A query boolean; None when it is neither true/false nor 1/0.

    The real server reads any value but "0" and "false" as true; refusing the rest here catches a
    client whose intent a real server would silently misread."""
    lowered = value.lower()
    return True if lowered in ("true", "1") else False if lowered in ("false", "0") else None


def query_error(request: rendering.Request) -> aiohttp.web.Response | None:
    """The 400 or 422 a real API server answers to these query parameters, or None."""
    params: Mapping[str, str] = request.params
    for key in sorted(INT_PARAMS & params.keys()):
        value = params[key]
        if not _GO_INT.fullmatch(value):
            return _bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')
        if not -(2**63) <= int(value) < 2**63:
            return _bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    for key in sorted(BOOL_PARAMS & params.keys()):
        if go_bool(params[key]) is None:
            return _bad_request(f'{key}: invalid boolean value "{params[key]}" (true, false, 1 or 0)')
    version = params.get("resourceVersion", "")
    if version and not version.isdigit():  # a 500 on a real server too (1.20)
        return _status(500, "", f'resourceVersion: Invalid value: "{version}": {_parse_uint_error(version)}')
    match = params.get("resourceVersionMatch", "")
    if match:
        errors = []
        if go_bool(params.get("watch", "false")):
            errors.append("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch")
        if not version:
            errors.append(
                "resourceVersionMatch: Forbidden: "
                "resourceVersionMatch is forbidden unless resourceVersion is provided"
            )
        if match not in RESOURCE_VERSION_MATCHES:
            errors.append(
                f'resourceVersionMatch: Unsupported value: "{match}": '
                'supported values: "Exact", "NotOlderThan", ""'
            )
        if errors:
            return _invalid('ListOptions.meta.k8s.io ""', errors)
    policy = params.get("propagationPolicy")
    if request.method == "DELETE" and policy is not None and policy not in PROPAGATION_POLICIES:
        return _invalid(
            'DeleteOptions.meta.k8s.io ""',
            [
                f'propagationPolicy: Unsupported value: "{policy}": '
                'supported values: "Foreground", "Background", "Orphan", "nil"'
            ],
        )
    if request.method == "PATCH":
        is_apply = _content_type(request).startswith(SSA)
        if "force" in params and not is_apply:
            return _invalid(
                'PatchOptions.meta.k8s.io ""', ["force: Forbidden: may not be specified for non-apply patch"]
            )
        if is_apply and not params.get("fieldManager"):
            return _invalid(
                'PatchOptions.meta.k8s.io ""', ["fieldManager: Required value: is required for apply patch"]
            )
    return None


def _parse_uint_error(value: str) -> str:
    return f'strconv.ParseUint: parsing "{value}": invalid syntax'


def _content_type(request: rendering.Request) -> str:
    return {k.lower(): v for k, v in request.headers.items()}.get("content-type", "")


def metadata_error(body: Any) -> str | None:
    """Why a body's ObjectMeta does not decode as the API types it (strings, string maps), or None;
    worded as the real server's JSON decoder words it."""
    if not isinstance(body, dict) or "metadata" not in body:
        return None
    meta = body["metadata"]
    if not isinstance(meta, dict):
        return "v1.ObjectMeta: ReadMapCB: expect { or n"
    for key in _STRING_META:
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            return f'v1.ObjectMeta.{key.capitalize()}: ReadString: expects " or n, but found {meta[key]!r}'
    for key in _STRING_MAP_META:
        values = meta.get(key)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) or v is None for v in values.values()):
            return f'v1.ObjectMeta.{key.capitalize()}: ReadString: expects " or n'
    if "generation" in meta and not isinstance(meta["generation"], int | None):
        return "v1.ObjectMeta.Generation: readUint64: unexpected character"
    return None


def _openapi_to_jsonschema(node: Any) -> Any:
    """A CRD's OpenAPI v3 schema as JSON Schema: int-or-string and nullable spelled out."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: _openapi_to_jsonschema(value)
        for key, value in node.items()
        if not key.startswith("x-kubernetes-")
    }
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@functools.cache
def echo_validator() -> jsonschema.Draft4Validator:
    crd = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft4Validator(_openapi_to_jsonschema(schema))


def schema_errors(obj: Mapping[str, Any]) -> list[str]:
    """An EchoDeployment's violations of the CRD schema, worded as the API server words them."""
    out = []
    for error in sorted(echo_validator().iter_errors(dict(obj)), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(part) for part in error.absolute_path)
        got = _json_type(error.instance)
        if error.validator == "type":
            wanted = error.validator_value
            out.append(f'{where}: Invalid value: "{got}": {where} in body must be of type {wanted}: "{got}"')
        elif error.validator == "required":
            out.append(f"{where}: Required value")
        else:
            out.append(f"{where}: Invalid value: {error.instance!r}: {error.message}")
    return out


def _json_type(value: Any) -> str:
    types = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"))
    return next(
        (name for kind, name in types if isinstance(value, kind)), "object" if value is not None else "null"
    )


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
    hooks: list[tuple[str, str, Hook]] = attrs.field(factory=list, init=False)
    answers: list[tuple[str, str, int]] = attrs.field(factory=list, init=False)
    """(method, path, status) of every Kubernetes request, in the order they were answered."""
    history: list[rendering.Request] = attrs.field(factory=list, init=False)
    """Every request, in the order they came (iterating the emulator itself, as kmock's views do,
    sees only those in flight)."""
    server_minor: int = attrs.field(default=33, init=False)
    """The Kubernetes 1.<minor> that /version answers."""
    string_quantities: bool = attrs.field(default=False, init=False)
    """Whether a server-side apply wants container resource quantities as strings (before 1.21, a
    number such as `nvidia.com/gpu: 1` is a 500 there; a create or merge patch takes it)."""
    undeclared: dict[str, tuple[str, ...]] = attrs.field(factory=dict, init=False)
    """resource -> spec fields this server's schema lacks: dropped from a create or merge patch, and
    a 500 "field not declared in schema" on a server-side apply, as a real server of that age does."""
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

    def serve_kubernetes_1_20(self) -> None:
        """Serve as Kubernetes 1.20 does: PodDisruptionBudgets and HPAs at policy/v1beta1 and
        autoscaling/v2beta2 (policy/v1 and autoscaling/v2 answer 404), StatefulSets without a PVC
        retention policy."""
        self.server_minor = 20
        self.string_quantities = True
        self.undeclared["apps/v1/statefulsets"] = ("persistentVolumeClaimRetentionPolicy",)
        for newest, older in (
            ("policy/v1/poddisruptionbudgets", "policy/v1beta1/poddisruptionbudgets"),
            ("autoscaling/v2/horizontalpodautoscalers", "autoscaling/v2beta2/horizontalpodautoscalers"),
        ):
            self.resources[older] = self.resources[newest]
            del self.resources[newest]

    def fail(self, method: str, path_part: str, *, status: int = 500, times: int = 1) -> None:
        self.faults.append(Fault(method.upper(), path_part, status, times))

    def after_next(self, method: str, path_part: str, hook: Hook) -> None:
        """Run `hook(request)` (a coroutine function) once, after the next `method` request whose path
        ends with `path_part` is served and before its answer is sent: an interleaving point."""
        self.hooks.append((method.upper(), path_part, hook))

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

    def _take_hook(self, request: rendering.Request) -> Hook | None:
        for index, (method, path_part, hook) in enumerate(self.hooks):
            if request.method == method and request.url.path.endswith(path_part):
                del self.hooks[index]
                return hook
        return None

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        self.history.append(request)
        try:
            return await self._answer(request)
        finally:
            self._forget(request)

    def _forget(self, request: rendering.Request) -> None:
        """Drop an answered request from kmock's own history (`history` keeps them all): kmock
        matches each request against its reactions by walking that history, which made a kopf
        test's thousands of requests cost seconds of CPU each."""
        self._requests[:] = [seen for seen in self._requests if seen is not request]
        for payload in self._payloads:
            payload._requests[:] = [seen for seen in payload._requests if seen is not request]

    async def _answer(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        fault = self._take_fault(request)
        if fault is not None:
            return _status(fault.status, "InjectedFault", f"injected {fault.status}")
        if (
            request.resource is not None
            and request.resource.plural
            and request.resource not in self.resources
        ):
            return _status(404, "NotFound", "the server could not find the requested resource")
        if request.resource is not None and (refusal := query_error(request)) is not None:
            return refusal
        if request.action == enums.action.LIST and go_bool(request.params.get("watch", "")):
            object.__setattr__(request, "action", enums.action.WATCH)  # kmock knows only "true"
        hook = self._take_hook(request)
        response = await self._serve(request)
        if request.resource is not None:
            self.answers.append((request.method.value, request.url.path, response.status))
        if hook is not None:
            await hook(request)
        return response

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        answer = cast(dict[str, Any], await super()._serve_server_version(request))
        return {**answer, "minor": str(self.server_minor), "gitVersion": f"v1.{self.server_minor}.0"}

    async def _serve(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None or request.action not in (enums.action.CREATE, enums.action.UPDATE):
            return await super()._handle(request)
        async with self._mutations:
            refusal = (
                self._refuse_undeclared(request)
                or self._refuse_quantities(request)
                or self._refuse_body(request)
            )
            if refusal is not None:
                return refusal
            if request.action == enums.action.CREATE:
                self._stamp_create(request)
            else:
                self._stamp_update(request)
            if (refusal := self._refuse_result(request)) is not None:
                return refusal
            response = await super()._handle(request)
        if request.action == enums.action.CREATE and response.status == 200 and not response.prepared:
            response.set_status(201)
        return response

    def _refuse_quantities(self, request: rendering.Request) -> aiohttp.web.StreamResponse | None:
        """A server-side apply of a pod template with a numeric resource quantity, where it is a 500."""
        if not self.string_quantities or not _content_type(request).startswith(SSA):
            return None
        template = ((request.data or {}).get("spec") or {}).get("template") or {}
        for container in (template.get("spec") or {}).get("containers") or ():
            for group, quantities in (container.get("resources") or {}).items():
                for name, value in (quantities or {}).items():
                    if not isinstance(value, str):
                        where = f'containers[name="{container.get("name")}"].resources.{group}.{name}'
                        got = f"&value.valueUnstructured{{Value:{value}}}"
                        message = f"failed to create typed patch object: .spec.template.spec.{where}"
                        return _status(500, "", f"{message}: expected string, got {got}")
        return None

    def _refuse_undeclared(self, request: rendering.Request) -> aiohttp.web.StreamResponse | None:
        """Fields this server's schema lacks: a 500 for a server-side apply, else dropped."""
        fields = next((f for r, f in self.undeclared.items() if kmock.resource(r) == request.resource), ())
        spec = request.data.get("spec") if isinstance(request.data, dict) else None
        if not isinstance(spec, dict):
            return None
        for field in fields:
            if field in spec and _content_type(request).startswith(SSA):
                message = f"failed to create typed patch object: .spec.{field}: field not declared in schema"
                return _status(500, "", message)
            spec.pop(field, None)
        return None

    def _refuse_body(self, request: rendering.Request) -> aiohttp.web.StreamResponse | None:
        """Bodies that do not decode (400 on create, 422 on patch), failed JSON-patch tests (422),
        stale versions (409), versions that are not numbers (500, as on 1.20)."""
        if (why := metadata_error(request.data)) is not None:
            if request.action == enums.action.CREATE:
                return _bad_request(f"the object cannot be decoded: {why}")
            return _invalid('""', [f"patch: Invalid value: the patched object cannot be decoded: {why}"])
        if request.action != enums.action.UPDATE:
            return None
        if (refusal := self._refuse_json_patch(request)) is not None:
            return refusal
        stored = self._stored(request)
        if stored is None or not isinstance(request.data, dict):
            return None
        wanted = (request.data.get("metadata") or {}).get("resourceVersion")
        if not wanted:
            return None
        if not wanted.isdigit():  # a 500 on a real server too (1.20)
            return _status(500, "", _parse_uint_error(wanted))
        if wanted != stored["metadata"].get("resourceVersion"):
            what = f"{request.resource.plural}.{request.resource.group}".rstrip(".")  # type: ignore[union-attr]
            return _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {what} "{request.name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        return None

    def _refuse_result(self, request: rendering.Request) -> aiohttp.web.StreamResponse | None:
        """An EchoDeployment whose result breaks the CRD schema is a 422, and nothing is stored."""
        if request.resource != kmock.resource(ECHO_RESOURCE):
            return None
        stored = self._stored(request)
        if request.action == enums.action.CREATE:
            result = request.data
        elif stored is None:
            return None
        else:
            result = dicts.patch_dict(stored, request.data)
        errors = schema_errors(result)
        if not errors:
            return None
        name = (result.get("metadata") or {}).get("name") or request.name
        return _invalid(f'EchoDeployment.echo.dev "{name}"', errors)

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        """kmock's watch, minus a race (the bus is marked before the replay, not after it), from
        `resourceVersion` when given (only objects changed since then are replayed), and ended by the
        server after `timeoutSeconds` when given."""
        yield b""
        assert request.resource is not None
        bus = self._buses[request.resource]
        since = request.params.get("resourceVersion", "")
        loop = asyncio.get_running_loop()
        timeout = int(dict(request.params).get("timeoutSeconds", "0"))
        deadline = loop.time() + timeout if timeout > 0 else None
        async with self._lock:
            marker = await bus.mark()
            replay: list[dict[str, Any]] = [
                {"type": "ADDED", "object": obj.raw}
                for (res, ns, name), obj in self.objects.items()
                if res == request.resource
                and not obj.deleted
                and _matches(request, ns, name)
                and (not since.isdigit() or int(obj.raw["metadata"].get("resourceVersion", 0)) > int(since))
            ]
        events = cast(AsyncGenerator[dict[str, Any], None], bus.stream(since=marker))
        try:
            for event in replay:
                yield event
            while True:
                left = None if deadline is None else max(deadline - loop.time(), 0)
                try:
                    event = await asyncio.wait_for(anext(events), left)
                except (TimeoutError, StopAsyncIteration):
                    return
                meta = (event.get("object") or {}).get("metadata") or {}
                if _matches(request, meta.get("namespace"), meta.get("name")):
                    yield event
        finally:
            await events.aclose()
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
