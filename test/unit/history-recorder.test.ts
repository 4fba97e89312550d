import { describe, expect, it } from "vitest";
import fc from "fast-check";
import type { NodeHistoryRecord } from "../../shared/history.ts";
import { silentLogger } from "../../shared/log.ts";
import { HistoryRecorder } from "../../conductor/history/recorder.ts";
import { maskDeep, maskPatch } from "../../conductor/history/redact.ts";

function recorder(lastError: string | null = null) {
  const stored: NodeHistoryRecord[] = [];
  const history = new HistoryRecorder({
    store: {
      addNodeHistory: async (r) => void stored.push(r),
      getNode: async () => ({ last_error: lastError }) as never,
    },
    logger: silentLogger,
    conductor: "c1",
  });
  return { history, stored };
}

describe("history recorder", () => {
  it("1.115: a transition records the state reached, its target and the whole seconds the state left lasted", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 10 ** 7 }), async (ms) => {
        const stored: NodeHistoryRecord[] = [];
        const now = new Date("2026-11-27T12:00:00.000Z");
        const history = new HistoryRecorder({
          store: { addNodeHistory: async (r) => void stored.push(r), getNode: async () => null },
          logger: silentLogger,
          conductor: "c1",
          now: () => now,
        });
        await history.onEvent({
          type: "provision",
          node: "n1",
          from: "deploying",
          from_since: new Date(now.getTime() - ms).toISOString(),
          event: "done",
          provision_state: "active",
          target_provision_state: null,
        });
        expect(stored[0]).toMatchObject({
          state: "active",
          target_provision_state: null,
          duration_seconds: Math.floor(ms / 1000),
        });
      }),
      { numRuns: 50 },
    );
  });

  it("1.115: an entry without a snapshot reads the node; a node gone leaves the fields null", async () => {
    const stored: NodeHistoryRecord[] = [];
    const nodes: Record<string, unknown> = {
      n1: { provision_state: "manageable", target_provision_state: null, provision_updated_at: null },
    };
    const history = new HistoryRecorder({
      store: {
        addNodeHistory: async (r) => void stored.push(r),
        getNode: async (id) => (nodes[id] ?? null) as never,
      },
      logger: silentLogger,
      conductor: "c1",
    });
    await history.record({ node: "n1", event: "x", eventType: "update" });
    await history.record({ node: "gone", event: "y", eventType: "update" });
    expect(stored.map((r) => [r.state, r.duration_seconds])).toEqual([
      ["manageable", null],
      [null, null],
    ]);
  });

  it("a failed transition is an ERROR entry whose event is the node's last_error", async () => {
    const { history, stored } = recorder("Timeout reached while waiting for callback for node n1");
    await history.onEvent({
      type: "provision",
      node: "n1",
      from: "wait call-back",
      event: "fail",
      provision_state: "deploy failed",
    });
    expect(stored[0]).toMatchObject({
      severity: "ERROR",
      event: "Timeout reached while waiting for callback for node n1",
      event_type: "provisioning",
      user: null,
    });
  });

  it("background outcomes are attributed to whoever started the operation", async () => {
    const { history, stored } = recorder();
    history.noteActor("n1", { user: "alice", project: "A", remoteAddress: "192.0.2.9", requestId: "req-1" });
    await history.onEvent({
      type: "power",
      node: "n1",
      power_state: "power off",
      error: "Failed to change power state",
    });
    expect(stored[0]).toMatchObject({
      severity: "ERROR",
      user: "alice",
      request_id: "req-1",
      event_type: "power",
    });
  });

  it("agent and progress events are not history", async () => {
    const { history, stored } = recorder();
    await history.onEvent({ type: "progress", node: "n1" });
    await history.onEvent({ type: "agent", node: "n1", connected: true });
    expect(stored).toEqual([]);
  });
});

describe("masking", () => {
  it("masks secret keys at any depth and secret patch paths", () => {
    expect(maskDeep({ a: { ipmi_password: "x", list: [{ token: "t" }] }, configdrive: "iso" })).toEqual({
      a: { ipmi_password: "******", list: [{ token: "******" }] },
      configdrive: "******",
    });
    expect(maskPatch([{ op: "add", path: "/driver_info/ipmi_password", value: "x" }])).toEqual([
      { op: "add", path: "/driver_info/ipmi_password", value: "******" },
    ]);
  });

  it("never lets a value under a secret key through, whatever the shape", () => {
    let tried = 0;
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ minLength: 1 }), (value, secret) => {
        tried++;
        const masked = JSON.stringify(maskDeep({ wrap: [value, { bmc_password: `§§MARK§§${secret}` }] }));
        expect(masked).not.toContain(JSON.stringify(`§§MARK§§${secret}`));
      }),
      { numRuns: 500 },
    );
    console.log(`maskDeep: ${tried} generated documents`);
  });
});
