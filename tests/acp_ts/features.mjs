// The newer ACP updates driven by the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0).
//
// Usage: node features.mjs PYTHON AGENT_SCRIPT DB_URL PROJECT_DIR MODE
//
// Spawns `PYTHON AGENT_SCRIPT DB_URL` (tests/acp_bridge/scripted_agent.py: scripted models, a
// subagent tool, automatic compaction) and, as a client that advertises everything
// (MODE=everything: plan, subagents, session.compaction) or nothing (MODE=nothing), runs:
// initialize → authenticate (no key set: refused) → new → prompts (plan, delegate, fail) →
// set_config_option (a model not offered: refused; then beta) → prompt → a slow prompt
// cancelled with $/cancel_request → list (with and without _meta.includeSubagents) →
// load of the parent and of each announced child. Every message the agent sends is
// validated against the SDK's zod schemas (stable where the type is stable, else unstable).
// Prints one JSON report for tests/acp_bridge/test_acp_features_stdio.py.

import { spawn } from "node:child_process";
import { PassThrough, Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk/unstable";
import * as stable from "./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js";
import * as unstable from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

const [python, script, url, project, mode] = process.argv.slice(2);
const env = { ...process.env };
delete env.TODO_SESSIONS_SCRIPTED_KEY;
const agent = spawn(python, [script, url], { env, stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));

// -- every message, both ways, recorded for validation ------------------------------------------
const sent = new Map(); // request id → method
const received = [];
function lines(onMessage) {
  let buffer = "";
  const tap = new PassThrough();
  tap.on("data", (chunk) => {
    buffer += chunk.toString("utf8");
    let at;
    while ((at = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, at).trim();
      buffer = buffer.slice(at + 1);
      if (line) onMessage(JSON.parse(line));
    }
  });
  return tap;
}
const toAgent = new PassThrough();
toAgent.pipe(agent.stdin);
toAgent.pipe(lines((m) => m.method && m.id !== undefined && sent.set(m.id, m.method)));
const fromAgent = new PassThrough();
agent.stdout.pipe(fromAgent);
agent.stdout.pipe(lines((m) => received.push(m)));
const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(fromAgent));

const STABLE_KINDS = new Set(
  stable.zSessionUpdate.options.map((o) => o.def.right.shape.sessionUpdate.value),
);
const RESPONSES = {
  initialize: [stable.zInitializeResponse],
  authenticate: [stable.zAuthenticateResponse],
  "session/new": [stable.zNewSessionResponse],
  "session/load": [stable.zLoadSessionResponse],
  "session/prompt": [stable.zPromptResponse],
  "session/list": [stable.zListSessionsResponse],
  "session/set_config_option": [stable.zSetSessionConfigOptionResponse],
};

function validate() {
  const errors = [];
  const checked = {};
  const note = (name) => (checked[name] = (checked[name] ?? 0) + 1);
  for (const message of received) {
    if (message.method === "session/update") {
      const kind = message.params?.update?.sessionUpdate;
      const schemas = STABLE_KINDS.has(kind) ? stable : unstable;
      const result = schemas.zSessionNotification.safeParse(message.params);
      note(`${STABLE_KINDS.has(kind) ? "stable" : "unstable"}:${kind}`);
      if (!result.success) errors.push({ kind, error: result.error.message });
    } else if ("result" in message) {
      const method = sent.get(message.id);
      const [schema] = RESPONSES[method] ?? [];
      if (!schema) continue;
      const result = schema.safeParse(message.result);
      note(`response:${method}`);
      if (!result.success) errors.push({ method, error: result.error.message });
    } else if ("error" in message) {
      const result = unstable.zError.safeParse(message.error);
      note("error");
      if (!result.success) errors.push({ error: result.error.message });
    }
  }
  return { errors, checked };
}

// -- the client ---------------------------------------------------------------------------------
const updates = [];
const app = acp
  .client({ name: "todo-sessions-ts-features" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
  });
const { agent: calls } = acp.methods;

async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    return { code: error.code ?? null, message: error.message, data: error.data ?? null };
  }
  return null;
}

const capabilities =
  mode === "everything" ? { plan: {}, subagents: {}, session: { compaction: {} } } : {};

const report = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(calls.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: capabilities,
  });
  const authMethods = init.authMethods ?? [];
  const authError = await failure(
    ctx.request(calls.authenticate, { methodId: authMethods[0]?.id ?? "none" }),
  );
  const created = await ctx.request(calls.session.new, { cwd: project, mcpServers: [] });
  const { sessionId } = created;
  const stops = [];
  for (const text of ["plan nosummary", "delegate tests", "fail lint"]) {
    const answer = await ctx.request(calls.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    stops.push(answer.stopReason);
  }
  const badConfig = await failure(
    ctx.request(calls.session.setConfigOption, { sessionId, configId: "model", value: "gamma" }),
  );
  const switched = await ctx.request(calls.session.setConfigOption, {
    sessionId,
    configId: "model",
    value: "beta",
  });
  const afterSwitch = await ctx.request(calls.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "hello" }],
  });
  stops.push(afterSwitch.stopReason);
  const live = updates.slice();

  // a slow prompt, cancelled by $/cancel_request once it streams
  const mark = updates.length;
  const abort = new AbortController();
  const slow = ctx.request(
    calls.session.prompt,
    { sessionId, prompt: [{ type: "text", text: "slow" }] },
    { cancellationSignal: abort.signal },
  );
  while (!updates.slice(mark).some((u) => u.update.sessionUpdate === "agent_message_chunk")) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  abort.abort();
  const cancelled = (await slow).stopReason;

  const listed = (await ctx.request(calls.session.list, { cwd: project })).sessions;
  const listedAll = (
    await ctx.request(calls.session.list, { cwd: project, _meta: { includeSubagents: true } })
  ).sessions;

  const beforeLoad = updates.length;
  const loaded = await ctx.request(calls.session.load, { sessionId, cwd: project, mcpServers: [] });
  const children = [
    ...new Set(
      live
        .filter((u) => u.update.sessionUpdate === "subagent_update")
        .map((u) => u.update.sessionId),
    ),
  ];
  for (const child of children) {
    await ctx.request(calls.session.load, { sessionId: child, cwd: project, mcpServers: [] });
  }
  return {
    authMethods,
    authError,
    newOptions: created.configOptions ?? null,
    loadOptions: loaded.configOptions ?? null,
    switched: switched.configOptions,
    badConfig,
    stops,
    cancelled,
    sessionId,
    live,
    replayed: updates.slice(beforeLoad),
    listed: listed.map((s) => s.sessionId),
    listedAll: listedAll.map((s) => s.sessionId),
  };
});

agent.stdin.end();
const code = await exited;
process.stdout.write(JSON.stringify({ ...report, ...validate(), agentExit: code }) + "\n");
