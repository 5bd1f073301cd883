"""An app on the official Python SDK, unmodified, as tests/sdk_apps.rs
drives it: the scenario is JSON in argv[1]; what happens is printed as one
JSON object per line on stdout (see node_app.mjs)."""

import asyncio
import json
import sys

from copilot import CopilotClient, PermissionHandler, RuntimeConnection

s = json.loads(sys.argv[1])


def say(o):
    print(json.dumps(o), flush=True)


def callback(section, how):
    async def transform(content):
        say({"event": "transform", "section": section, "bytes": len(content)})
        if how == "hang":
            await asyncio.Event().wait()
        kind, _, text = how.partition(":")
        return text + content if kind == "prefix" else text

    return transform


async def main():
    system_message = s.get("systemMessage")
    if s.get("transforms"):
        system_message = system_message or {"mode": "customize", "sections": {}}
        for section, how in s["transforms"].items():
            system_message["sections"][section] = {"action": callback(section, how)}
    p = s["provider"]
    client = CopilotClient(
        connection=RuntimeConnection.for_uri(s["uri"], connection_token=s.get("token"))
    )
    try:
        await client.start()
        say({"event": "connected"})
        kwargs = {}
        if system_message:
            kwargs["system_message"] = system_message
        session = await client.create_session(
            on_permission_request=PermissionHandler.approve_all,
            model=s["model"],
            provider={"type": p["type"], "base_url": p["baseUrl"], "api_key": p["apiKey"]},
            streaming=True,
            **kwargs,
        )
        say({"event": "created", "sessionId": session.session_id})
        if s.get("prompt"):
            reply = await session.send_and_wait(s["prompt"], timeout=120.0)
            content = getattr(getattr(reply, "data", None), "content", None)
            say({"event": "reply", "content": content})
        await session.disconnect()
        say({"event": "done"})
    except Exception as e:  # noqa: BLE001 - reported to the test
        say({"event": "error", "message": str(e), "code": getattr(e, "code", None)})
    finally:
        try:
            await client.stop()
        except Exception:  # noqa: BLE001
            pass


asyncio.run(main())
