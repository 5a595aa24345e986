// Drives teaspill's AG-UI route with the official JS client, as a frontend would.
// Input (argv[2], JSON): {url, key, thread, kind, text, approve}. With `approve` set, a
// run that ends on interrupts is resumed once with that answer to each.
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
    { runId: `run-${index}`, forwardedProps: { kind: given.kind }, ...extra },
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
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
