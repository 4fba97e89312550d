import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startConductor } from "../helpers/conductor.ts";

/**
 * Signed image links across conductors: the key lives in the shared database, so a link one conductor signs
 * verifies on another on the same database, and on the same conductor after a restart.
 */
describe("signed image links on a cluster's database", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-links-"));
  const images = join(dir, "images");
  mkdirSync(images);
  writeFileSync(join(images, "disk.raw"), "the image");
  const shared = { databasePath: join(dir, "anvil.sqlite"), images: { localRoot: images } };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The path and query of a link conductor `ctx` signs for disk.raw. */
  function linkFrom(ctx: Awaited<ReturnType<typeof startConductor>>): string {
    const url = new URL(ctx.conductor.provisioner.deps.sign(new URL(`file://${images}/disk.raw`)));
    return `${url.pathname}${url.search}`;
  }

  it("another conductor's link verifies; a plain GET does not", async () => {
    const one = await startConductor({ ...shared, name: "links-one" });
    const two = await startConductor({ ...shared, name: "links-two" });
    try {
      const link = linkFrom(one);
      const there = await fetch(`${two.url}${link}`);
      expect(there.status).toBe(200);
      expect(await there.text()).toBe("the image");
      expect((await fetch(`${two.url}/images/disk.raw`)).status).toBe(403);
      expect((await fetch(`${one.url}/images/disk.raw`)).status).toBe(403);
    } finally {
      await two.stop();
      await one.stop();
    }
  });

  it("a restart keeps links valid within their lifetime", async () => {
    const before = await startConductor({ ...shared, name: "links-restart" });
    const link = linkFrom(before);
    await before.stop();
    const after = await startConductor({ ...shared, name: "links-restart" });
    try {
      expect((await fetch(`${after.url}${link}`)).status).toBe(200);
      const tampered = link.replace(
        /anvil_expires=(\d+)/,
        (_m, e: string) => `anvil_expires=${Number(e) + 60}`,
      );
      expect((await fetch(`${after.url}${tampered}`)).status).toBe(403);
    } finally {
      await after.stop();
    }
  });
});
