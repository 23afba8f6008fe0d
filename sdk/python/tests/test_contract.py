"""The SDK's copy of the API checked against the API's own description: supervisor/api/openapi.json,
the document `GET /v1/openapi.json` serves. No supervisor: the SDK's real methods run against a
recording transport that

- validates every request body the SDK sends against the route's request schema (every field
  known to the schema, of the schema's type, required ones present), and
- answers with a document generated from the route's response schema, which the SDK's models
  must read completely (every schema field lands in an attribute) and with the schema's types
  (an `integer` field in an `int` attribute, not a `float`).

So a field renamed, retyped or added on either side fails here, naming the schema and the field.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import types
import typing
import unittest
from pathlib import Path
from typing import Any

import airlock
from airlock import models
from airlock.models import SandboxInfo

OPENAPI = Path(__file__).resolve().parents[3] / "supervisor" / "api" / "openapi.json"
DOC: dict[str, Any] = json.loads(OPENAPI.read_text())
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]

# Schema fields a model keeps under another attribute name (E2B's names, or a parsed form).
RENAMED = {
    ("Context", "context_id"): "id",
    ("FileEntry", "mtime_ms"): "modified_time",
}
# Schema fields a model leaves in `.raw` on purpose.
UNREAD = {
    ("Transfer", "review"),  # the review verdict of a transfer: in .raw, see docs/transfer.md
}
_PY_TYPES = {"integer": (int,), "number": (float, int), "string": (str,), "boolean": (bool,),
             "array": (list,), "object": (dict,)}


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]]
    if "allOf" in schema and len(schema["allOf"]) == 1:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        return {**resolve(schema["allOf"][0]), **merged}
    return schema


def schema_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def sample(schema: dict[str, Any]) -> Any:
    """A document of the schema with every field present."""
    schema = resolve(schema)
    if "oneOf" in schema:
        return sample(schema["oneOf"][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {name: sample(prop) for name, prop in schema.get("properties", {}).items()}
    if kind == "array":
        return [sample(schema.get("items", {}))]
    if kind == "string" and schema.get("format") == "date-time":
        return "2026-11-28T07:12:03.417Z"
    return {"integer": 1795000000000 if schema.get("format") == "int64" else 7,
            "number": 1.5, "string": "s", "boolean": True}.get(kind, {})


def problems(value: Any, schema: dict[str, Any], where: str, name: str | None = None) -> list[str]:
    """Where the value does not fit the schema."""
    name = schema_name(schema) or name
    schema = resolve(schema)
    if value is None:
        return [] if schema.get("nullable") or "null" in (schema.get("type") or []) else [
            f"{where}: null where the schema has no nullable"]
    if "oneOf" in schema:
        if all(problems(value, s, where) for s in schema["oneOf"]):
            return [f"{where}: {value!r} fits none of oneOf"]
        return []
    kind = schema.get("type")
    kinds = [k for k in kind if k != "null"] if isinstance(kind, list) else [kind]
    found: list[str] = []
    if kinds[0] is not None:
        ok = any(isinstance(value, _PY_TYPES[k]) and not (k in ("integer", "number") and
                                                         isinstance(value, bool))
                 for k in kinds)
        if not ok:
            return [f"{where}: {value!r} ({type(value).__name__}) is not of type {kinds}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        for key, item in value.items():
            if key not in props:
                if schema.get("additionalProperties") is False:
                    found.append(f"{where}: field {key!r} is not in schema {name or '(inline)'}")
                continue
            found += problems(item, props[key], f"{where}.{key}")
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}: required field {key!r} is missing")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += problems(item, schema["items"], f"{where}[{i}]")
    return found


def route(method: str, path: str) -> tuple[str, dict[str, Any]]:
    for template, ops in DOC["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method.lower() in ops:
            return template, ops[method.lower()]
    raise AssertionError(f"the SDK calls {method} {path}, which openapi.json does not have")


class _Stream:
    def __init__(self, events: list[dict[str, Any]], body: bytes = b"") -> None:
        self._events, self._body, self.status = events, body, 200

    def events(self) -> Any:
        return iter(self._events)

    def chunks(self, *args: Any) -> Any:
        return iter([self._body])

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class RecordingTransport:
    """Stands in for airlock.transport.Transport: checks each request against openapi.json and
    answers a generated document of the route's response schema."""

    url = "unix:///contract.sock"
    request_timeout = 60.0

    def __init__(self, test: unittest.TestCase) -> None:
        self.test = test
        self.calls: list[tuple[str, str]] = []
        self.endpoint = airlock.transport.Endpoint.parse(self.url)

    def _check(self, method: str, path: str, body: Any) -> dict[str, Any]:
        template, op = route(method, path.split("?")[0])
        self.calls.append((method, template))
        content = op.get("requestBody", {}).get("content", {})
        if body is not None and "application/json" in content:
            schema = content["application/json"]["schema"]
            name = schema_name(schema) or f"{method} {template}"
            found = problems(body, schema, f"{method} {template} body", name)
            self.test.assertEqual(found, [], "the SDK's request does not fit openapi.json")
        return op

    @staticmethod
    def _answer(op: dict[str, Any]) -> Any:
        for status, response in sorted(op.get("responses", {}).items()):
            if status.startswith("2"):
                content = response.get("content", {})
                if "application/json" in content:
                    return sample(content["application/json"]["schema"])
                return None
        return None

    def json(self, method: str, path: str, body: Any = None, query: Any = None,
             timeout: Any = None) -> Any:
        op = self._check(method, path, body)
        if dict(query or {}).get("path", "").endswith("/missing"):
            raise airlock.NotFoundError("no such file", status=404, code="not_found")
        return self._answer(op)

    def stream(self, method: str, path: str, body: Any = None, query: Any = None,
               timeout: Any = None) -> _Stream:
        self._check(method, path, body)
        if path.endswith("/code"):
            return _Stream([{"type": "end", "status": "ok", "context_id": "python"}])
        if "/runs/" in path:
            return _Stream([{"type": "supervisor_restart", "run_id": "r1", "held_bytes": 0,
                             "dropped_bytes": 0},
                            {"type": "end", "status": "ok", "context_id": "python"}])
        if path.endswith("/transfers"):
            record = sample(SCHEMAS["Transfer"])
            record["status"] = "ok"
            return _Stream([{"type": "transfer", **record}])
        return _Stream([{"type": "start", "command_id": "c1", "pid": 7},
                        {"type": "exit", "exit_code": 0}])

    def open(self, method: str, path: str, body: Any = None, **kwargs: Any) -> _Stream:
        op = self._check(method, path, None)
        answer = self._answer(op)
        if isinstance(answer, dict) and path.endswith("/archive"):
            answer["status"] = "ok"
        return _Stream([], json.dumps(answer).encode() if answer is not None else b"data")

    def close(self) -> None:
        pass


def attribute_types(cls: type) -> dict[str, tuple[type, ...]]:
    """The Python types a dataclass field may hold (None removed)."""
    hints = typing.get_type_hints(cls, vars(models))
    out: dict[str, tuple[type, ...]] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) or \
            typing.get_origin(hint) is typing.Union else (hint,)
        out[f.name] = tuple(typing.get_origin(a) or a for a in args if a is not type(None))
    return out


class RequestBodiesTest(unittest.TestCase):
    """Every request body the SDK builds, with every option set, fits its route's schema."""

    def setUp(self) -> None:
        self.transport = RecordingTransport(self)
        info = SandboxInfo.from_json(sample(SCHEMAS["Sandbox"]))
        self.sbx = airlock.Sandbox(info, self.transport)  # type: ignore[arg-type]

    def test_sandbox_create_and_keepalive(self) -> None:
        from airlock.sandbox import create_body
        body = create_body("default", "python", "web-1", {"K": "V"}, {"user": "u1"}, 300.5,
                           3600, True, ["hostdir:data", airlock.Mount("hostdir:x", "/mnt/x", True)],
                           "gvisor")
        self.assertEqual(body["keep_alive_s"], 301)  # whole seconds, rounded up
        self.assertEqual(problems(body, {"$ref": "#/components/schemas/SandboxSpec"}, "create"),
                         [])
        self.sbx.set_timeout(600.2, lifetime=7200)
        self.sbx.info()
        self.sbx.metrics()
        self.sbx.kill()

    def test_code_and_contexts(self) -> None:
        self.sbx.run_code("1", language="python", context="python", timeout=2.5,
                          envs={"K": "V"})
        self.sbx.create_code_context("python", cwd="/home/user/work")
        self.sbx.list_code_contexts()
        self.sbx.restart_code_context("python")
        self.sbx.remove_code_context("python")
        self.sbx.recovered_run("python", "last")
        self.sbx.port_url(8000)

    def test_commands(self) -> None:
        self.sbx.commands.run("echo hi", envs={"K": "V"}, cwd="/tmp", stdin="x", timeout=3)
        self.sbx.commands.run(["ls", "-la"], stdin=b"\xff")
        handle = self.sbx.commands.run("sleep 9", background=True)
        handle.send_stdin("more", eof=True)
        handle.send_stdin(b"\x00")
        handle.signal("SIGTERM")
        handle.signal(15)
        handle.kill()
        handle.wait()
        self.sbx.commands.list()

    def test_files_and_transfers(self) -> None:
        self.sbx.files.write("/home/user/a.txt", "text", mode=0o600)
        self.sbx.files.read("/home/user/a.txt", format="bytes")
        self.sbx.files.list("/home/user")
        self.sbx.files.get_info("/home/user/a.txt")
        self.sbx.files.make_dir("/home/user/missing")
        self.sbx.files.remove("/home/user/a.txt", recursive=False)
        self.sbx.files.rename("/home/user/b", "/home/user/c")
        self.sbx.transfer_in("https://example.com/a.tar.gz", "/home/user/in")
        self.sbx.transfer_out("hostdir:out/a.tar.gz", "/home/user/out")
        self.sbx.list_transfers()
        self.sbx.cancel_transfer("t1")
        self.sbx.upload_archive("/home/user/x", b"archive")
        self.sbx.download_archive("/home/user/x", format="zip")

    def test_every_sandbox_route_the_sdk_needs_is_called(self) -> None:
        for test in (self.test_sandbox_create_and_keepalive, self.test_code_and_contexts,
                     self.test_commands, self.test_files_and_transfers):
            test()
        called = {template for _, template in self.transport.calls}
        documented = {t for t in DOC["paths"] if t.startswith("/v1/sandboxes/{sb}")}
        # Routes the SDK deliberately leaves to the JSON-bodied file calls it streams instead,
        # the network rules (an operator's tool, not the SDK's), and the port proxy itself, which
        # the caller's own HTTP client reaches through port_url().
        not_used = {"/v1/sandboxes/{sb}/files/write", "/v1/sandboxes/{sb}/files/read",
                    "/v1/sandboxes/{sb}/network", "/v1/sandboxes/{sb}/ports/{port}/{path}"}
        self.assertEqual(sorted(documented - called - not_used), [],
                         "sandbox routes in openapi.json the SDK does not call")


class ResponseModelsTest(unittest.TestCase):
    """Each model reads every field of its schema, into an attribute of the schema's type."""

    MODELS: list[tuple[type, str, Any]] = [
        (models.SandboxInfo, "Sandbox", models.SandboxInfo.from_json),
        (models.Context, "Context", models.Context.from_json),
        (models.CommandInfo, "Command", models.CommandInfo.from_json),
        (models.EntryInfo, "FileEntry", models.EntryInfo.from_json),
        (models.TransferRecord, "Transfer", models.TransferRecord.from_json),
        (models.Mount, "Mount", models.Mount.from_json),
        (models.SandboxMetrics, "SandboxMetrics", models.SandboxMetrics.from_json),
    ]

    def test_models_read_every_field_with_its_type(self) -> None:
        for cls, name, parse in self.MODELS:
            schema = resolve(SCHEMAS[name])
            document = sample(schema)
            parsed = parse(document)
            kinds = attribute_types(cls)
            for field, prop in schema["properties"].items():
                with self.subTest(schema=name, field=field):
                    if (name, field) in UNREAD:
                        continue
                    attr = RENAMED.get((name, field), field)
                    self.assertIn(attr, kinds, f"{cls.__name__} has no attribute for "
                                  f"{name}.{field}")
                    prop = resolve(prop)
                    kind = prop.get("type")
                    kind = next(k for k in kind if k != "null") if isinstance(kind, list) \
                        else kind
                    value = getattr(parsed, attr)
                    if field.endswith("_at") or field == "mtime_ms":
                        # Unix milliseconds, or RFC 3339 text (format date-time), read as an
                        # aware datetime.
                        self.assertEqual(kind, "string" if prop.get("format") == "date-time"
                                         else "integer")
                        self.assertIn(datetime.datetime, kinds[attr])
                        self.assertIsInstance(value, datetime.datetime)
                        continue
                    if kind is None:  # oneOf, free-form
                        continue
                    if "enum" in prop and isinstance(value, str) is False:
                        value = getattr(value, "value", value)  # a str enum
                    expected = {"integer": int, "number": float, "string": str,
                                "boolean": bool, "array": list, "object": dict}[kind]
                    self.assertTrue(
                        any(issubclass(t, expected) or (expected is float and t is int)
                            for t in kinds[attr] if isinstance(t, type)),
                        f"{cls.__name__}.{attr} is typed {kinds[attr]}, the schema's "
                        f"{name}.{field} is {kind}")
                    if expected is int:
                        self.assertIsInstance(value, int)
                        self.assertNotIsInstance(value, bool)

    def test_the_drift_this_test_exists_for(self) -> None:
        """keep_alive_s and lifetime_s are integers in the API; the SDK once read them as
        floats (and the TypeScript SDK disagreed)."""
        info = SandboxInfo.from_json(sample(SCHEMAS["Sandbox"]))
        self.assertIsInstance(info.keep_alive_s, int)
        self.assertIsInstance(info.lifetime_s, int)

    def test_events_the_sdk_reads_are_documented(self) -> None:
        event_types = set(resolve(SCHEMAS["Event"])["properties"]["type"]["enum"])
        # "transfer" and "progress" are the transfer stream's (docs/transfer.md).
        read = {"start", "stdout", "stderr", "exit", "result", "display", "error", "end",
                "supervisor_restart"}
        self.assertEqual(sorted(read - event_types), [])

    def test_a_wrong_type_is_caught(self) -> None:
        """The checker itself: a float where the schema has an integer is reported."""
        found = problems({"keep_alive_s": 1.5}, {"$ref": "#/components/schemas/SandboxSpec"},
                         "create")
        self.assertEqual(len(found), 1)
        self.assertIn("keep_alive_s", found[0])
        found = problems({"keep_alive": 1}, {"$ref": "#/components/schemas/SandboxSpec"},
                         "create")
        self.assertIn("field 'keep_alive' is not in schema SandboxSpec", found[0])


if __name__ == "__main__":
    unittest.main()
