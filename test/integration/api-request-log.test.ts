import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startConductor } from "../helpers/conductor.ts";
import { recordingLogger } from "../helpers/log.ts";

const lines: string[] = [];
let ctx: Awaited<ReturnType<typeof startConductor>>;

beforeAll(async () => {
  ctx = await startConductor({}, { logger: recordingLogger(lines, "info") });
});
afterAll(async () => {
  await ctx.stop();
});

describe("request ids", () => {
  it("a refused request's id, returned in OpenStack-Request-Id, finds its log line", async () => {
    const { status, headers } = await api(`${ctx.url}/v1/nodes/no-such-node`);
    expect(status).toBe(404);
    const id = headers.get("openstack-request-id");
    expect(id).toMatch(/^req-/);
    const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.request_id === id);
    expect(line).toMatchObject({ method: "GET", url: "/v1/nodes/no-such-node", status: 404 });
  });

  it("every response carries a distinct request id", async () => {
    const ids = new Set<string | null>();
    for (let i = 0; i < 5; i++)
      ids.add((await api(`${ctx.url}/v1/nodes`)).headers.get("openstack-request-id"));
    expect(ids.size).toBe(5);
  });
});
