import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { readFile, truncate, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { agentEndpointOf } from "../../conductor/agents/endpoint.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { recordingLogger, sampleInventory } from "../helpers/agent.ts";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";
import { sha256 } from "../helpers/disk.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";

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
    let link: AgentLink | undefined;
    try {
      const first = await startConductor(config);
      const image = randomBytes(8 * 1024 * 1024);
      await writeFile(join(dir, "image.raw"), image);
      let resume = (): void => undefined;
      images.serve("/image.raw", join(dir, "image.raw"), {
        pauseAfterBytes: 4 * 1024 * 1024,
        resumeWhen: new Promise<void>((r) => (resume = r)),
      });
      const mac = "52:54:00:0e:4e:01";
      const disk = join(dir, "node.disk");
      await writeFile(disk, "");
      await truncate(disk, 64 * 1024 * 1024);
      const created = await api(`${first.url}/v1/nodes`, {
        method: "POST",
        body: {
          driver: "fake-hardware",
          deploy_interface: "direct",
          automated_clean: false,
          instance_info: {
            image_source: `${images.url}/image.raw`,
            image_os_hash_algo: "sha256",
            image_os_hash_value: sha256(image),
          },
        },
      });
      const uuid = (created.body as { uuid: string }).uuid;
      await api(`${first.url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: mac } });
      const put = (url: string, target: string) =>
        api(`${url}/v1/nodes/${uuid}/states/provision`, { method: "PUT", body: { target } });
      await put(first.url, "manage");
      await waitForState(first.url, uuid, "manageable");
      await put(first.url, "provide");
      await waitForState(first.url, uuid, "available");
      await put(first.url, "active");
      await waitForState(first.url, uuid, "wait call-back");

      const agentLog = recordingLogger();
      link = new AgentLink({
        url: agentEndpointOf(first.url),
        backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [mac], diskFile: disk }) }),
        commands: COMMANDS,
        logger: agentLog,
        agentVersion: "test",
        backoff: { initialMs: 100, maxMs: 300 },
      });
      link.start();
      for (;;) {
        const node = (await api(`${first.url}/v1/nodes/${uuid}`)).body as { deploy_step: { step?: string } };
        if (node.deploy_step.step === "write_image" && images.requests.length > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }

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
      resume();
      const done = await waitForState(second.url, uuid, "active");
      expect(done).toMatchObject({ last_error: null });
      expect(images.requests.filter((r) => r.path === "/image.raw")).toHaveLength(1);
      const runs = agentLog.lines.filter(
        (l) => l.includes('"command started"') && l.includes('"write_image"'),
      );
      expect(runs).toHaveLength(1);
      expect(agentLog.lines.filter((l) => l.includes("CANCELLED"))).toEqual([]);
      expect(sha256((await readFile(disk)).subarray(0, image.length))).toBe(sha256(image));
    } finally {
      await link?.stop();
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
