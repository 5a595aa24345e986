// Drives teaspill's AG-UI route with the official JS client, as a frontend would.
// Input (argv[2], JSON): {url, key, thread, kind, text, approve, tools, toolAnswer}. With
// `approve` set, a run that ends on interrupts is resumed once with that answer to each.
// `tools` are frontend tools sent with every run; with `toolAnswer` set, a run that ends
// after calls of them runs once more with a `tool` message answering each.
// Output (stdout, JSON): {runs: [{events, result, interrupts}], messages}.
import { HttpAgent } from "@ag-ui/client";

const given = JSON.parse(process.argv[2]);
const agent = new HttpAgent({
  url: given.url,
  threadId: given.thread,
  headers: { Authorization: `Bearer ${given.key}` },
});
agent.addMessage({ id: "user-1", role: "user", content: given.text });

async function run(index, extra) {
  const events = [];
  const outcome = await agent.runAgent(
    { runId: `run-${index}`, forwardedProps: { kind: given.kind }, tools: given.tools ?? [], ...extra },
    { onEvent: ({ event }) => { events.push(event); } },
  );
  return { events, result: outcome.result ?? null, interrupts: [...agent.pendingInterrupts] };
}

const runs = [await run(1, {})];
const open = runs[0].interrupts;
if (given.approve !== undefined && open.length) {
  const resume = open.map((interrupt) => ({
    interruptId: interrupt.id,
    status: "resolved",
    payload: { approve: given.approve, note: "from the AG-UI client" },
  }));
  runs.push(await run(2, { resume }));
}
const frontend = new Set((given.tools ?? []).map((tool) => tool.name));
const asked = runs[0].events.filter((e) => e.type === "TOOL_CALL_START" && frontend.has(e.toolCallName));
if (given.toolAnswer !== undefined && asked.length) {
  asked.forEach((call, n) => agent.addMessage(
    { id: `tool-${n}`, role: "tool", toolCallId: call.toolCallId, content: given.toolAnswer }));
  runs.push(await run(2, {}));
}
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
