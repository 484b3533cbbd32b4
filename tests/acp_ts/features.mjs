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

import * as acp from "@agentclientprotocol/sdk/unstable";

import { spawnRecorded } from "./recorded.mjs";

const [python, script, url, project, mode] = process.argv.slice(2);
const { agent, exited, stream, validate } = spawnRecorded(python, script, url);

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
