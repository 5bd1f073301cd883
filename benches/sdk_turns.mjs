// The SDK app of benches/sdk_apps.rs: the official Node SDK, unmodified,
// on two targets (the bridge's [sdk] listen, and the runtime directly),
// interleaved. Each round and target: a session whose `tone` has a
// callback, its first turn (the render: one transform callback), a second
// turn (no callback), then disconnect. Prints one JSON object: per target,
// the first and plain turns in ms and the callback's own time at the app.
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

const s = JSON.parse(process.argv[2]);
const { CopilotClient, RuntimeConnection, approveAll } = await import(pathToFileURL(s.sdk).href);

const clients = {};
for (const t of s.targets) {
  const c = new CopilotClient({
    connection: RuntimeConnection.forUri(t.uri, t.token ? { connectionToken: t.token } : {}),
  });
  await c.start();
  clients[t.name] = c;
}
const out = Object.fromEntries(s.targets.map((t) => [t.name, { first: [], plain: [], callback: [] }]));

async function round(name) {
  const r = out[name];
  const session = await clients[name].createSession({
    model: s.model,
    provider: s.provider,
    streaming: true,
    onPermissionRequest: approveAll,
    systemMessage: {
      mode: "customize",
      sections: {
        tone: {
          action: async (content) => {
            const t0 = performance.now();
            const v = content + " (house style)";
            r.callback.push(performance.now() - t0);
            return v;
          },
        },
      },
    },
  });
  let t0 = performance.now();
  await session.sendAndWait({ prompt: s.prompt }, 60000);
  r.first.push(performance.now() - t0);
  t0 = performance.now();
  await session.sendAndWait({ prompt: s.prompt }, 60000);
  r.plain.push(performance.now() - t0);
  await session.disconnect();
}

for (let i = 0; i < s.rounds; i++) {
  const order = i % 2 === 0 ? s.targets : [...s.targets].reverse();
  for (const t of order) await round(t.name);
}
for (const c of Object.values(clients)) await c.stop();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
