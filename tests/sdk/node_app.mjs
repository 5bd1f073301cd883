// An app on the official Node SDK, unmodified, as tests/sdk_apps.rs drives
// it: the scenario is JSON in argv[2]; what happens is printed as one JSON
// object per line on stdout.
//
// scenario: {sdk, uri, token?, model, provider, prompt?, systemMessage?,
//            transforms?: {SECTION: "prefix:TEXT" | "replace:TEXT" | "hang"},
//            waitForGo?: a line on stdin before the prompt is sent,
//            resume?: SESSION_ID (resumed instead of created),
//            abandon?: PROMPT (sent, then the process exits mid-turn),
//            lifecycle?: each session.lifecycle notice printed; the app
//                        waits (bounded) for session.deleted before it ends,
//            mcpServers?}
import { pathToFileURL } from "node:url";

const s = JSON.parse(process.argv[2]);
// The SDK as installed by scripts/install-sdks.sh (scenario.sdk: its entry).
const { CopilotClient, RuntimeConnection, approveAll } = await import(pathToFileURL(s.sdk).href);
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// A transform section's callback, as the scenario names it.
function callback(section, how) {
  return async (content) => {
    say({ event: "transform", section, bytes: content.length });
    if (how === "hang") return new Promise(() => {});
    const [kind, text] = [how.slice(0, how.indexOf(":")), how.slice(how.indexOf(":") + 1)];
    return kind === "prefix" ? text + content : text;
  };
}

let systemMessage = s.systemMessage ? structuredClone(s.systemMessage) : undefined;
if (s.transforms && !systemMessage) systemMessage = { mode: "customize", sections: {} };
for (const [section, how] of Object.entries(s.transforms ?? {})) {
  systemMessage.sections[section] = { action: callback(section, how) };
}

const client = new CopilotClient({
  connection: RuntimeConnection.forUri(s.uri, s.token ? { connectionToken: s.token } : {}),
});
// Told of a delete (the bridge's, when an admin disposed the session).
let deleted;
const gone = new Promise((resolve) => (deleted = resolve));
try {
  await client.start();
  say({ event: "connected" });
  if (s.lifecycle) {
    client.onLifecycle((e) => {
      say({ event: "lifecycle", type: e.type, sessionId: e.sessionId });
      if (e.type === "session.deleted") deleted();
    });
  }
  const open = s.resume ? (config) => client.resumeSession(s.resume, config) : (config) => client.createSession(config);
  const session = await open({
    model: s.model,
    provider: s.provider,
    streaming: true,
    onPermissionRequest: approveAll,
    ...(systemMessage ? { systemMessage } : {}),
    ...(s.mcpServers ? { mcpServers: s.mcpServers } : {}),
  });
  say({ event: "created", sessionId: session.sessionId });
  if (s.waitForGo) {
    // The test says when to go on (one line on stdin), once it watches.
    await new Promise((resolve) => process.stdin.once("data", resolve));
  }
  if (s.abandon) {
    // Gone mid-turn, as a crashed app is: the prompt sent, nothing closed.
    await session.send({ prompt: s.abandon });
    say({ event: "abandoned" });
    process.exit(0);
  }
  if (s.prompt) {
    const reply = await session.sendAndWait({ prompt: s.prompt }, 120000);
    say({ event: "reply", content: reply?.data?.content ?? null });
  }
  await session.disconnect?.();
  say({ event: "done" });
} catch (e) {
  say({ event: "error", message: String(e?.message ?? e), code: e?.code ?? null });
  if (s.lifecycle) await Promise.race([gone, new Promise((r) => setTimeout(r, 10000))]);
} finally {
  // Bounded: the SDK's stop can wait on a connection the bridge closed.
  try { await Promise.race([client.stop(), new Promise((r) => setTimeout(r, 5000))]); } catch {}
  process.exit(0);
}
