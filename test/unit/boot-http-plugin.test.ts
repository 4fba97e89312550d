import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootFilesPlugin } from "../../conductor/drivers/boot/http-plugin.ts";

describe("boot files plugin", () => {
  let base: string;
  let app: FastifyInstance;
  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), "anvil-bootfiles-"));
    const root = join(base, "root");
    await mkdir(join(root, "nodes"), { recursive: true });
    await writeFile(join(root, "boot.ipxe"), "#!ipxe\n");
    await writeFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "#!ipxe\nkernel x\n");
    await writeFile(join(base, "secret"), "outside the root\n");
    await symlink(join(base, "secret"), join(root, "nodes", "escape.ipxe"));
    app = Fastify();
    await app.register(bootFilesPlugin, { prefix: "/boot", root });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await rm(base, { recursive: true, force: true });
  });

  it("serves files under the prefix", async () => {
    const response = await app.inject({ method: "GET", url: "/boot/nodes/52-54-00-aa-bb-01.ipxe" });
    expect(response.statusCode).toBe(200);
    expect(response.body).toBe("#!ipxe\nkernel x\n");
    expect(response.headers["content-type"]).toMatch(/^text\/plain/);
  });

  it("answers HEAD", async () => {
    const response = await app.inject({ method: "HEAD", url: "/boot/boot.ipxe" });
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-length"]).toBe("7");
  });

  it.each([
    "/boot/../secret",
    "/boot/%2e%2e/secret",
    "/boot/nodes/%2e%2e/%2e%2e/secret",
    "/boot/nodes/..%2f..%2fsecret",
    "/boot/nodes/escape.ipxe",
    "/boot/nodes",
    "/boot/",
    "/boot/nodes//52-54-00-aa-bb-01.ipxe",
    "/boot/%00",
  ])("refuses %s", async (url) => {
    const response = await app.inject({ method: "GET", url });
    expect(response.statusCode).toBe(404);
    expect(response.body).not.toContain("outside the root");
  });

  it("is read-only", async () => {
    const response = await app.inject({ method: "PUT", url: "/boot/boot.ipxe", payload: "x" });
    expect(response.statusCode).toBe(404);
  });
});
