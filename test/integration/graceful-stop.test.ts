import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import { nodeCaughtMidWrite } from "../helpers/mid-write.ts";

/** Starts a fake-hardware deploy that takes a few steps of `fakeDelayMs`, then stops the conductor. */
async function stopDuringDeploy(
  stopGraceS: number,
): Promise<{ state: string; reservation: string | null; lastError: string | null }> {
  const ctx = await startConductor({ fakeDelayMs: 400, stopGraceS });
  const put = (uuid: string, target: string) =>
    api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, { method: "PUT", body: { target } });
  const created = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const node = created.body as { uuid: string };
  // each verb's 202 read, each state awaited with a deadline (a refused verb hung here, unnamed), released
  await provisionThrough(ctx.url, node.uuid, [
    ["manage", "manageable"],
    ["provide", "available"],
  ]);
  await released(ctx.url, node.uuid);
  const deploy = await put(node.uuid, "active");
  expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
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
