import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { api, startConductor } from "../helpers/conductor.ts";

/** Starts a fake-hardware deploy that takes a few steps of `fakeDelayMs`, then stops the conductor. */
async function stopDuringDeploy(
  stopGraceS: number,
): Promise<{ state: string; reservation: string | null; lastError: string | null }> {
  const ctx = await startConductor({ fakeDelayMs: 400, stopGraceS });
  const put = (uuid: string, target: string) =>
    api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, { method: "PUT", body: { target } });
  const node = (await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } }))
    .body as {
    uuid: string;
  };
  const settle = async (state: string) => {
    for (;;) {
      const current = (await api(`${ctx.url}/v1/nodes/${node.uuid}`)).body as { provision_state: string };
      if (current.provision_state === state) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await put(node.uuid, "manage");
  await settle("manageable");
  await put(node.uuid, "provide");
  await settle("available");
  expect((await put(node.uuid, "active")).status).toBe(202);
  await ctx.conductor.stop();
  const store = new SqliteStore(ctx.config.databasePath);
  const after = await store.getNode(node.uuid);
  await store.close();
  rmSync(dirname(ctx.config.databasePath), { recursive: true, force: true });
  return { state: after!.provision_state, reservation: after!.reservation, lastError: after!.last_error };
}

describe("a graceful stop", () => {
  it("lets work in flight finish within the grace period", async () => {
    const after = await stopDuringDeploy(30);
    expect(after).toEqual({ state: "active", reservation: null, lastError: null });
  });

  it("hands back what does not finish: the lock released, the work cancelled", async () => {
    const after = await stopDuringDeploy(0);
    expect(after.state).not.toBe("active");
    expect(after.reservation).toBeNull();
  });
});
