import { describe, expect, it } from "vitest";
import { parseServerSentEvents, type ServerSentEvent } from "../../conductor/cli/sse.ts";

async function collect(chunks: string[]): Promise<ServerSentEvent[]> {
  const encoder = new TextEncoder();
  async function* source(): AsyncGenerator<Uint8Array> {
    for (const chunk of chunks) yield encoder.encode(chunk);
  }
  const events: ServerSentEvent[] = [];
  for await (const event of parseServerSentEvents(source())) events.push(event);
  return events;
}

describe("server-sent events reader", () => {
  it("parses events split across chunks and skips comments", async () => {
    const events = await collect([
      ": anvil event stream\n\n",
      "id: 1\nevent: provi",
      'sion\ndata: {"a":1}\n\n: keepalive\n\n',
      "event: progress\r\ndata: x\r\ndata: y\r\n\r\n",
    ]);
    expect(events).toEqual([
      { event: "provision", data: '{"a":1}', id: "1" },
      { event: "progress", data: "x\ny", id: "1" },
    ]);
  });

  it("keeps multi-byte characters split between chunks", async () => {
    const bytes = new TextEncoder().encode("data: café\n\n");
    async function* source(): AsyncGenerator<Uint8Array> {
      yield bytes.slice(0, 10); // ends inside "é"
      yield bytes.slice(10);
    }
    const events: ServerSentEvent[] = [];
    for await (const event of parseServerSentEvents(source())) events.push(event);
    expect(events).toEqual([{ event: "message", data: "café" }]);
  });
});
