// A compaction made by another process, sent to a TypeScript SDK 2.4.0 client as it lands.
//
// Usage: node elsewhere.mjs PYTHON AGENT_SCRIPT DB_URL PROJECT_DIR SESSION_ID MODE
//
// Spawns `PYTHON AGENT_SCRIPT DB_URL` (tests/acp_bridge/scripted_agent.py) and, as a client
// that advertises everything (MODE=everything) or nothing (MODE=nothing): initialize →
// session/load SESSION_ID → prints `LOADED` (the test then compacts the session from its own
// process) → waits until the compaction arrives (a completed compaction_update; a legacy
// client: the summary's user_message_chunk) → a prompt → session/load again. Every message
// the agent sends is validated against the SDK's zod schemas. Prints one JSON report for
// tests/acp_bridge/test_acp_features_stdio.py.

import * as acp from "@agentclientprotocol/sdk/unstable";

import { spawnRecorded } from "./recorded.mjs";

const [python, script, url, project, sessionId, mode] = process.argv.slice(2);
const { agent, exited, stream, validate } = spawnRecorded(python, script, url);

const updates = [];
const app = acp
  .client({ name: "todo-sessions-ts-elsewhere" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
  });
const { agent: calls } = acp.methods;
const capabilities =
  mode === "everything" ? { plan: {}, subagents: {}, session: { compaction: {} } } : {};
const landed = (u) =>
  mode === "everything"
    ? u.update.sessionUpdate === "compaction_update" && u.update.status === "completed"
    : u.update.sessionUpdate === "user_message_chunk";

const report = await app.connectWith(stream, async (ctx) => {
  await ctx.request(calls.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: capabilities,
  });
  await ctx.request(calls.session.load, { sessionId, cwd: project, mcpServers: [] });
  const loaded = updates.length;
  process.stdout.write("LOADED\n");
  let waited = 0;
  while (!updates.slice(loaded).some(landed)) {
    if ((waited += 20) > 120000) throw new Error("the compaction never arrived");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const arrived = updates.length;
  const answer = await ctx.request(calls.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "hello" }],
  });
  const seen = updates.length;
  await ctx.request(calls.session.load, { sessionId, cwd: project, mcpServers: [] });
  return {
    stop: answer.stopReason,
    firstLoad: updates.slice(0, loaded),
    landed: updates.slice(loaded, arrived),
    seen: updates.slice(0, seen),
    replayed: updates.slice(seen),
  };
});

agent.stdin.end();
const code = await exited;
process.stdout.write(JSON.stringify({ ...report, ...validate(), agentExit: code }) + "\n");
