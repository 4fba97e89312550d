import { randomBytes } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { buildConfigDrive, gzipBase64 } from "../../conductor/images/configdrive.ts";

/** Counts event-loop turns (setImmediate callbacks) until `work` settles. */
async function turnsDuring<T>(work: () => Promise<T>): Promise<{ result: T; turns: number }> {
  let turns = 0;
  let running = true;
  const spin = (): void => {
    if (!running) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  try {
    return { result: await work(), turns };
  } finally {
    running = false;
  }
}

describe("config drive packing keeps the event loop turning", () => {
  it("gzips and encodes 40 MB while other callbacks run", async () => {
    // random bytes: gzip can't shrink them, so every byte is worked on
    const iso = randomBytes(40 * 1024 * 1024);
    const { result, turns } = await turnsDuring(() => gzipBase64(iso));
    console.log(`config drive: 40 MiB packed with ${turns} event-loop turns meanwhile`);
    // a synchronous gzip gives 0 turns; the thread pool and sliced encoding give one per slice at least
    expect(turns).toBeGreaterThanOrEqual(10);
    expect(gunzipSync(Buffer.from(result, "base64")).equals(iso)).toBe(true);
  });

  it("builds a config-2 ISO from the JSON form", async () => {
    const encoded = await buildConfigDrive({ meta_data: { uuid: "u" }, user_data: "#cloud-config\n" });
    const iso = gunzipSync(Buffer.from(encoded, "base64"));
    expect(iso.subarray(0x8001, 0x8006).toString()).toBe("CD001");
    expect(iso.includes(Buffer.from("config-2"))).toBe(true);
  });
});
