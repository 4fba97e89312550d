import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import { nodeCaughtMidWrite } from "../helpers/mid-write.ts";

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

  it("keeps an agent's step: a restart mid write_image neither cancels nor fails it, and the next start finishes it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "anvil-graceful-agent-"));
    const images = await startHttpImageServer();
    const port = await freePort();
    const config = { port, databasePath: join(dir, "anvil.sqlite"), stopGraceS: 0, fakeDelayMs: 0 };
    let second: Awaited<ReturnType<typeof startConductor>> | undefined;
    let node: Awaited<ReturnType<typeof nodeCaughtMidWrite>> | undefined;
    try {
      const first = await startConductor(config);
      node = await nodeCaughtMidWrite({ url: first.url, dir, images, mac: "52:54:00:0e:4e:01" });
      const uuid = node.uuid;
      node.boot([first.url]);
      const writing = await node.writing();

      await first.conductor.stop(); // grace 0: cut off mid write_image
      const store = new SqliteStore(config.databasePath);
      const stopped = await store.getNode(uuid);
      await store.close();
      expect(stopped).toMatchObject({
        provision_state: "wait call-back",
        reservation: null,
        last_error: null,
      });

      second = await startConductor(config); // the same database, the same address
      node.resume();
      const done = await waitForState(second.url, uuid, "active");
      expect(done).toMatchObject({ last_error: null });
      await node.expectWrittenOnce(writing);
    } finally {
      await node?.stop();
      await second?.stop();
      await images.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A loopback port free now, for a conductor that must come back at the same address. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
