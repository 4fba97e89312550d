import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { readRange } from "../helpers/disk.ts";
import { startGlance, type ThrowawayGlance } from "../helpers/glance.ts";
import { runOk } from "../helpers/run.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

const MiB = 1024 * 1024;
const SERVICE = "anvil-service";
const sha512 = (data: Buffer) => createHash("sha512").update(data).digest("hex");

/**
 * Glance image sources against Debian's glance-api: the conductor resolves the UUID with its service
 * credentials, pulls the image once into its cache (digest checked while streaming) and hands the agent a
 * signed, expiring link to it; the agent writes it to a simulated node's disk.
 */
describe("deploying Glance images through the conductor's cache", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-glance-deploy-"));
  let glance: ThrowawayGlance;
  let executable = "";
  let image: Buffer;
  const agents: AgentProcess[] = [];
  let macCounter = 0x10;

  beforeAll(async () => {
    [glance, executable] = await Promise.all([startGlance(), ensureAgentBuilt()]);
    // a whole-disk image: GPT with one partition and random data in it
    await writeFile(join(dir, "disk.raw"), Buffer.alloc(8 * MiB));
    await runOk("sfdisk", ["--quiet", "--label", "gpt", join(dir, "disk.raw")], {
      input: "start=2048, size=8192, name=rootfs\n",
    });
    image = await readFile(join(dir, "disk.raw"));
    randomBytes(3 * MiB).copy(image, 1 * MiB);
  }, 300_000);
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
  });
  afterAll(async () => {
    await glance?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const conductor = (maxBytes = 64 * MiB) =>
    startConductor({
      glance: { endpoint: glance.url, headers: glance.headers(SERVICE), serviceProject: SERVICE },
      images: { cache: { maxBytes } },
    });
  type Ctx = Awaited<ReturnType<typeof conductor>>;

  /** A fake-hardware node of `owner` with the agent's deploy, no automated clean, made available. */
  async function availableNode(ctx: Ctx, name: string, owner: string) {
    const mac = `52:54:00:00:02:${(macCounter++).toString(16).padStart(2, "0")}`;
    const node = await enrollSimulatedNode({
      url: ctx.url,
      dir,
      name,
      mac,
      executable,
      body: { owner, automated_clean: false },
    });
    await provisionThrough(ctx.url, name, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    await released(ctx.url, name); // the test's PATCH and deploy come next
    return { ...node, name, boot: () => agents.push(node.boot()) };
  }
  const provision = (url: string, node: string, body: Record<string, unknown>) =>
    api(`${url}/v1/nodes/${node}/states/provision`, { method: "PUT", body });
  const setImage = (url: string, node: string, source: string) =>
    api(`${url}/v1/nodes/${node}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_info/image_source", value: source }],
    });

  it("deploys a project's private image by UUID: the disk holds it, the agent's link is signed", async () => {
    const id = await glance.createImage({ project: "p1", data: image });
    const ctx = await conductor();
    try {
      const node = await availableNode(ctx, "g1", "p1");
      expect((await setImage(ctx.url, "g1", id)).status).toBe(200);
      expect((await provision(ctx.url, "g1", { target: "active" })).status).toBe(202);
      await waitForState(ctx.url, "g1", "wait call-back");
      node.boot();
      const done = await waitForState(ctx.url, "g1", "active");
      expect(done.last_error).toBeNull();
      expect((await readRange(node.disk, 0, image.length)).equals(image)).toBe(true);
      expect(glance.fileGets(id)).toBe(1);

      // what the agent is given: the cache behind a signed link (no Glance address, no token)
      const stored = (await ctx.conductor.store.getNode(node.uuid))!;
      const resolved = await ctx.conductor.provisioner.deps.imageSources!.resolve(stored);
      try {
        const link = new URL(String(resolved.instanceInfo.image_source));
        expect(link.pathname).toBe(`/image-cache/${id}`);
        expect(link.searchParams.get("anvil_sig")).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(resolved.instanceInfo.image_os_hash_algo).toBe("sha512");
        expect(resolved.instanceInfo.image_os_hash_value).toBe(sha512(image));
        const bytes = Buffer.from(await (await fetch(link)).arrayBuffer());
        expect(sha512(bytes)).toBe(sha512(image));
        expect((await fetch(`${ctx.url}/image-cache/${id}`)).status).toBe(403);
        expect(JSON.stringify(resolved.instanceInfo)).not.toContain(glance.url);
      } finally {
        resolved.release();
      }
      expect(glance.fileGets(id)).toBe(1); // a hit
    } finally {
      await ctx.stop();
    }
  }, 240_000);

  it("two nodes on one image: one download from Glance; and the time to first byte, miss vs hit", async () => {
    const id = await glance.createImage({ project: "p1", data: image, visibility: "public" });
    const ctx = await conductor();
    try {
      const a = await availableNode(ctx, "g2a", "p2");
      const b = await availableNode(ctx, "g2b", "p3");
      for (const n of [a, b]) expect((await setImage(ctx.url, n.name, `glance://${id}`)).status).toBe(200);
      for (const n of [a, b])
        expect((await provision(ctx.url, n.name, { target: "active" })).status).toBe(202);
      for (const n of [a, b]) await waitForState(ctx.url, n.name, "wait call-back");
      a.boot();
      b.boot();
      for (const n of [a, b]) expect((await waitForState(ctx.url, n.name, "active")).last_error).toBeNull();
      for (const n of [a, b]) expect((await readRange(n.disk, 0, image.length)).equals(image)).toBe(true);
      expect(glance.fileGets(id)).toBe(1);
      const pulled = ctx.conductor.images.cache!.stats.bytesDownloaded;
      expect(pulled).toBe(image.length);

      // time to first byte through the conductor: a miss downloads and verifies first, a hit does not
      const fresh = await glance.createImage({ project: "p1", data: image, visibility: "public" });
      const node = (await ctx.conductor.store.getNode(a.uuid))!;
      const ttfb = async (source: string) => {
        const began = performance.now();
        const resolved = await ctx.conductor.provisioner.deps.imageSources!.resolve({
          ...node,
          instance_info: { image_source: source },
        });
        const response = await fetch(String(resolved.instanceInfo.image_source));
        const reader = response.body!.getReader();
        await reader.read();
        const ms = performance.now() - began;
        await reader.cancel();
        resolved.release();
        return ms;
      };
      const miss = await ttfb(fresh);
      const hit = await ttfb(fresh);
      console.log(
        `glance cache: ${image.length} B image, 2 nodes, ${pulled} B pulled from Glance; ` +
          `time to first byte miss ${miss.toFixed(1)} ms, hit ${hit.toFixed(1)} ms`,
      );
      expect(glance.fileGets(fresh)).toBe(1);
    } finally {
      await ctx.stop();
    }
  }, 240_000);

  it("another project's private image is refused with Ironic's text", async () => {
    const id = await glance.createImage({ project: "p1", data: image });
    const ctx = await conductor();
    try {
      await availableNode(ctx, "g3", "p2");
      await setImage(ctx.url, "g3", id);
      expect((await provision(ctx.url, "g3", { target: "active" })).status).toBe(202);
      const failed = await waitForState(ctx.url, "g3", "deploy failed");
      expect(failed.last_error).toBe(`Not authorized for image ${id}.`);
      expect(glance.fileGets(id)).toBe(0);
    } finally {
      await ctx.stop();
    }
  }, 240_000);

  it("an image whose bytes do not match Glance's digest fails the deploy with a clear last_error", async () => {
    const id = await glance.createImage({ project: "p1", data: image });
    // the store's copy goes bad after upload (bit rot, a tampered backend): same size, other bytes
    const corrupt = Buffer.from(image);
    corrupt[2 * MiB] = corrupt[2 * MiB]! ^ 0xff;
    await writeFile(join(glance.storeDir, id), corrupt);
    const ctx = await conductor();
    try {
      const node = await availableNode(ctx, "g4", "p1");
      await setImage(ctx.url, "g4", id);
      await provisionThrough(ctx.url, "g4", [["active", "wait call-back"]]);
      node.boot();
      const failed = await waitForState(ctx.url, "g4", "deploy failed");
      expect(failed.last_error).toMatch(
        new RegExp(
          `Image ${id} failed its checksum: expected sha512 ${sha512(image)}, got ${sha512(corrupt)}`,
        ),
      );
      expect((await readRange(node.disk, 0, 4096)).equals(Buffer.alloc(4096))).toBe(true);
    } finally {
      await ctx.stop();
    }
  }, 240_000);
});
