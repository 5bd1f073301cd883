#!/usr/bin/env python3
"""Vendors the part of the Copilot runtime's published JSON schemas the bridge reads.

The runtime (@github/copilot) ships `session-events.schema.json` and
`api.schema.json`. The bridge reads a few fields of a few events and sends a
few calls; this writes `schemas/runtime/wire.schema.json` with exactly those,
each field with the type and requiredness the official schema gives it, and
`crates/runtime/build.rs` generates the Rust types from it (typify).

Why a projection and not the whole schema: a field the bridge does not read
must not decide whether an event is understood (a newer runtime reshaping
`toolTelemetry` must not drop `tool.execution_complete`), so only read fields
are kept, unknown fields are allowed (`additionalProperties` dropped), and
enums the bridge passes on as text are kept as strings. Everything kept is
checked: a missing required field or a wrong type is a counted mismatch.

Usage: scripts/vendor-runtime-schema.py [SCHEMA_DIR] [VERSION]
  SCHEMA_DIR defaults to ~/.cache/copilot/pkg/linux-x64/VERSION/schemas (the
  CLI unpacks there on its first run); VERSION defaults to the pinned one.
"""

import copy
import hashlib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINNED = re.search(
    r'VERSION="\$\{COPILOT_CLI_VERSION:-([^}]+)\}"',
    open(os.path.join(ROOT, "scripts", "install-runtime.sh")).read(),
).group(1)

# Events: type -> (definition in session-events.schema.json, fields read).
EVENTS = {
    "assistant.message_delta": ("AssistantMessageDeltaData", ["messageId", "deltaContent"]),
    "assistant.message": ("AssistantMessageData", ["messageId", "content"]),
    "assistant.reasoning_delta": ("AssistantReasoningDeltaData", ["reasoningId", "deltaContent"]),
    "assistant.reasoning": ("AssistantReasoningData", ["reasoningId", "content"]),
    "assistant.usage": (
        "AssistantUsageData",
        ["model", "inputTokens", "outputTokens", "cacheReadTokens"],
    ),
    "tool.execution_start": ("ToolExecutionStartData", ["toolCallId", "toolName", "arguments"]),
    "tool.execution_complete": ("ToolExecutionCompleteData", ["toolCallId", "success", "result"]),
    "permission.requested": ("PermissionRequestedData", ["requestId", "permissionRequest"]),
    "external_tool.requested": (
        "ExternalToolRequestedData",
        ["requestId", "toolCallId", "toolName", "arguments"],
    ),
    "session.error": ("ErrorData", ["errorType", "message"]),
    "session.warning": ("WarningData", ["warningType"]),
    "session.mcp_servers_loaded": ("McpServersLoadedData", ["servers"]),
    "session.mcp_server_status_changed": (
        "McpServerStatusChangedData",
        ["serverName", "status", "error"],
    ),
}

# Definitions those refer to, with the fields read.
NESTED = {
    "ToolExecutionCompleteResult": ["content"],
    "McpServersLoadedServer": ["name", "status", "error"],
}

# The CLI's model layer streams its own events, `model.*` (model.turn_started,
# model.model_call_success, model.tool_execution, model.log, ...: names built
# at run time, in no schema), seen on 1.0.92 and 1.0.102 in the e2e runs:
# known, so not mismatches; the bridge acts on none. docs/compatibility.md.
OBSERVED_EVENT_PREFIXES = ["model."]

# Enums passed on as text (a new value is not a mismatch).
AS_TEXT = {"McpServerStatus"}

# Calls: method -> (path in api.schema.json, params type name, fields sent,
# result type name, fields read). Params are what we send: kept whole as the
# schema has them minus fields we never send.
CALLS = {
    "ping": (["server", "ping"], "PingParams", ["message"], "PingResult", ["protocolVersion"]),
    "connect": (["server", "connect"], None, None, "ConnectResult", ["protocolVersion", "version"]),
    "session.send": (["session", "send"], "SessionSendParams", ["sessionId", "prompt", "mode"], None, None),
    "session.abort": (["session", "abort"], "SessionAbortParams", ["sessionId"], None, None),
    "session.model.switchTo": (
        ["session", "model", "switchTo"],
        "ModelSwitchToParams",
        ["sessionId", "modelId"],
        None,
        None,
    ),
    "session.agent.select": (["session", "agent", "select"], "AgentSelectParams", ["sessionId", "name"], None, None),
    "session.agent.deselect": (["session", "agent", "deselect"], "AgentDeselectParams", ["sessionId"], None, None),
}


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def deref(schema, defs):
    while "$ref" in schema:
        schema = defs[schema["$ref"].split("/")[-1]]
    return schema


def project(schema, keep, defs, name):
    """The object schema `schema` with only the fields in `keep`."""
    schema = deref(schema, defs)
    props = schema.get("properties", {})
    missing = [k for k in keep if k not in props]
    if missing:
        sys.exit(f"{name}: the schema has no field {missing}: update the projection")
    out = {"type": "object", "title": name, "properties": {}}
    if "description" in schema:
        out["description"] = schema["description"]
    for k in keep:
        out["properties"][k] = field(props[k], defs)
    required = [k for k in schema.get("required", []) if k in keep]
    if required:
        out["required"] = required
    return out


def field(schema, defs):
    schema = copy.deepcopy(schema)
    if schema.get("x-opaque-json"):
        return {"description": schema.get("description", "any JSON")}
    ref = schema.get("$ref", "").split("/")[-1]
    if ref in AS_TEXT:
        return {"type": "string", "description": schema.get("description", ref)}
    if ref and ref not in NESTED and ref not in KEEP_WHOLE:
        # A referenced string enum the bridge checks: kept as the schema has it.
        return field(defs[ref], defs)
    if schema.get("type") == "array" and "$ref" in schema.get("items", {}):
        schema["items"] = field(schema["items"], defs)
    return schema


KEEP_WHOLE = {"SendMode"}


def permission_request(defs):
    """`PermissionRequest` is a union of twelve kinds, each with `kind`; the
    bridge reads `kind` and a few fields some kinds have. One object: `kind`
    required, the rest as the kinds that carry them type them."""
    variants = [deref(v, defs) for v in defs["PermissionRequest"]["anyOf"]]
    props = {"kind": {"type": "string", "description": "The kind of permission asked"}}
    for k in ["toolCallId", "toolName", "intention", "fullCommandText", "args"]:
        found = [v["properties"][k] for v in variants if k in v.get("properties", {})]
        if not found:
            sys.exit(f"PermissionRequest: no kind has {k}: update the projection")
        types = {json.dumps({**field(f, defs), "description": ""}, sort_keys=True) for f in found}
        props[k] = field(found[0], defs) if len(types) == 1 else {"description": f"{k}, typed per kind"}
    return {
        "type": "object",
        "title": "PermissionRequest",
        "description": "A permission request, whatever its kind",
        "properties": props,
        "required": ["kind"],
    }


def main():
    version = sys.argv[2] if len(sys.argv) > 2 else PINNED
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        f"~/.cache/copilot/pkg/linux-x64/{version}/schemas"
    )
    ev_path = os.path.join(folder, "session-events.schema.json")
    api_path = os.path.join(folder, "api.schema.json")
    events = json.load(open(ev_path))
    api = json.load(open(api_path))
    edefs, adefs = events["definitions"], api["definitions"]

    out = {}
    for ty, (name, keep) in EVENTS.items():
        d = edefs[name]
        out[name] = project(d, keep, edefs, name)
    for name, keep in NESTED.items():
        out[name] = project(edefs[name], keep, edefs, name)
    for name in KEEP_WHOLE:
        out[name] = copy.deepcopy(adefs[name])
    perm = out["PermissionRequestedData"]["properties"]
    perm["permissionRequest"] = {"$ref": "#/definitions/PermissionRequest"}
    out["PermissionRequest"] = permission_request(edefs)
    for key in ("McpServersLoadedData",):
        servers = out[key]["properties"]["servers"]
        servers["items"] = {"$ref": "#/definitions/McpServersLoadedServer"}
    tcr = out["ToolExecutionCompleteData"]["properties"]
    tcr["result"] = {"$ref": "#/definitions/ToolExecutionCompleteResult"}
    for name in list(out):
        for p in out[name].get("properties", {}).values():
            if p.get("$ref", "").split("/")[-1] in KEEP_WHOLE:
                p["$ref"] = "#/definitions/" + p["$ref"].split("/")[-1]

    for method, (path, pname, pkeep, rname, rkeep) in CALLS.items():
        node = api
        for p in path:
            node = node[p]
        if node.get("rpcMethod") != method:
            sys.exit(f"{method}: not at {'.'.join(path)} in api.schema.json")
        if pname:
            out[pname] = project(node["params"], pkeep, adefs, pname)
        if rname:
            out[rname] = project(node["result"], rkeep, adefs, rname)
    for name in list(out):
        for p in out[name].get("properties", {}).values():
            if p.get("$ref", "").split("/")[-1] in KEEP_WHOLE:
                p["$ref"] = "#/definitions/" + p["$ref"].split("/")[-1]

    types = sorted(
        {
            d["properties"]["type"]["const"]
            for d in edefs.values()
            if isinstance(d, dict) and "const" in d.get("properties", {}).get("type", {})
        }
    )
    doc = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": "Written by scripts/vendor-runtime-schema.py; do not edit. "
        "The fields of the Copilot runtime's wire the bridge reads and sends.",
        "x-source": {
            "package": "@github/copilot",
            "version": version,
            "session-events.schema.json": sha256(ev_path),
            "api.schema.json": sha256(api_path),
        },
        "x-eventTypes": types,
        "x-observedEventPrefixes": OBSERVED_EVENT_PREFIXES,
        "definitions": dict(sorted(out.items())),
    }
    dest = os.path.join(ROOT, "schemas", "runtime", "wire.schema.json")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(dest, ROOT)}: {len(out)} definitions, {len(types)} event types, from {version}")


if __name__ == "__main__":
    main()
