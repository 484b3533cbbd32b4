// The ACP session lifecycle driven by the official TypeScript SDK (@agentclientprotocol/sdk).
//
// Usage: node lifecycle.mjs PYTHON DB_URL PROJECT_DIR OTHER_DIR
//
// Spawns `PYTHON -m todo_sessions acp` on DB_URL and runs, through the SDK's client app (which
// validates every message it receives against the schema): initialize → new → prompt → list
// (every page, the cwd filter, a bad cursor) → close (twice) → resume → prompt → fork → list →
// delete → load of the deleted id → list. Prints one JSON report on stdout for
// tests/acp_bridge/test_typescript_client.py to check against the store; exits non-zero on
// any failure.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk/unstable";

const [python, url, project, other] = process.argv.slice(2);
const agent = spawn(python, ["-m", "todo_sessions", "acp"], {
  env: { ...process.env, TODO_SESSIONS_URL: url },
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

const updates = [];
const app = acp
  .client({ name: "todo-sessions-ts-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
  })
  .onRequest(acp.methods.client.session.requestPermission, () => ({
    outcome: { outcome: "cancelled" },
  }));

const { agent: calls } = acp.methods;

async function errorCode(promise) {
  try {
    await promise;
  } catch (error) {
    return error.code ?? null;
  }
  return null;
}

async function listAll(ctx, params) {
  const pages = [];
  let cursor;
  do {
    const page = await ctx.request(calls.session.list, cursor ? { ...params, cursor } : params);
    pages.push(page.sessions);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return pages;
}

const kinds = (sessionId, since) =>
  updates
    .slice(since)
    .filter((u) => u.sessionId === sessionId)
    .map((u) => u.update.sessionUpdate);

const report = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(calls.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { plan: {} },
  });
  const { sessionId } = await ctx.request(calls.session.new, { cwd: project, mcpServers: [] });
  const first = await ctx.request(calls.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "write the tests\nship it" }],
  });
  const promptKinds = kinds(sessionId, 0);

  const pages = await listAll(ctx, {});
  const others = await listAll(ctx, { cwd: other });
  const badCursor = await errorCode(ctx.request(calls.session.list, { cursor: "not a cursor" }));

  await ctx.request(calls.session.close, { sessionId });
  await ctx.request(calls.session.close, { sessionId });
  const beforeResume = updates.length;
  await ctx.request(calls.session.resume, { sessionId, cwd: project, mcpServers: [] });
  const resumeKinds = kinds(sessionId, beforeResume);
  const second = await ctx.request(calls.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "one more" }],
  });

  const fork = await ctx.request(calls.session.fork, { sessionId, cwd: project, mcpServers: [] });
  const forked = (await listAll(ctx, { cwd: project }))
    .flat()
    .find((s) => s.sessionId === fork.sessionId);
  await ctx.request(calls.session.delete, { sessionId: fork.sessionId });
  const loadDeleted = await errorCode(
    ctx.request(calls.session.load, { sessionId: fork.sessionId, cwd: project, mcpServers: [] }),
  );
  const resumeUnknown = await errorCode(
    ctx.request(calls.session.resume, { sessionId: "no-such-session", cwd: project }),
  );
  const after = await listAll(ctx, {});

  return {
    sessionCapabilities: Object.keys(init.agentCapabilities?.sessionCapabilities ?? {}).sort(),
    loadSession: init.agentCapabilities?.loadSession ?? false,
    sessionId,
    stopReasons: [first.stopReason, second.stopReason],
    promptKinds,
    pageSizes: pages.map((p) => p.length),
    listed: pages.flat().map((s) => ({
      sessionId: s.sessionId,
      cwd: s.cwd,
      title: s.title ?? null,
      updatedAt: s.updatedAt ?? null,
      meta: s._meta ?? null,
    })),
    others: others.flat().map((s) => s.sessionId),
    badCursor,
    resumeKinds,
    forkId: fork.sessionId,
    forkParent: forked?._meta?.parentSessionId ?? null,
    loadDeleted,
    resumeUnknown,
    after: after.flat().map((s) => s.sessionId),
  };
});

agent.stdin.end();
const code = await exited;
process.stdout.write(JSON.stringify({ ...report, agentExit: code }) + "\n");
