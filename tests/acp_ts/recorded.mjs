// The wire between a TypeScript SDK client and a spawned agent, recorded both ways, and every
// message the agent sent validated against the SDK's zod schemas (stable where the type is
// stable, else unstable). Shared by features.mjs and elsewhere.mjs.

import { spawn } from "node:child_process";
import { PassThrough, Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk/unstable";
import * as stable from "./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js";
import * as unstable from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

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

// Spawn `python script url` (no key variable in its environment) and record its wire:
// { agent, exited, stream, validate }.
export function spawnRecorded(python, script, url) {
  const env = { ...process.env };
  delete env.TODO_SESSIONS_SCRIPTED_KEY;
  const agent = spawn(python, [script, url], { env, stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));
  const sent = new Map(); // request id → method
  const received = [];
  const toAgent = new PassThrough();
  toAgent.pipe(agent.stdin);
  toAgent.pipe(lines((m) => m.method && m.id !== undefined && sent.set(m.id, m.method)));
  const fromAgent = new PassThrough();
  agent.stdout.pipe(fromAgent);
  agent.stdout.pipe(lines((m) => received.push(m)));
  const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(fromAgent));

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

  return { agent, exited, stream, validate };
}
