import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";

// cloud.sh's counts name files (nova-compute-I's pid and config) and go into SQL (compute-I's host): anything but
// a whole number is refused before the script touches its directory.
const CLOUD = join(import.meta.dirname, "../../scripts/cloud/cloud.sh");
const parent = mkdtempSync(join(tmpdir(), "anvil-cloud-args-"));
const dir = join(parent, "cloud");

function cloudSh(args: string[]): { code: number | null; stderr: string } {
  const r = spawnSync("bash", [CLOUD, ...args], {
    env: { ...process.env, ANVIL_CLOUD_DIR: dir },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { code: r.status, stderr: r.stderr };
}

afterAll(() => rmSync(parent, { recursive: true, force: true }));

describe("cloud.sh's counts", () => {
  it("refuses a compute number or count that is not a whole number, naming it, and creates nothing", () => {
    const notWhole = fc.string({ maxLength: 12 }).filter((s) => !/^[0-9]+$/.test(s) && !s.includes("\0"));
    fc.assert(
      fc.property(
        notWhole,
        fc.constantFrom(["stop-compute"], ["start-compute"], ["up", "--computes"], ["up", "--lab-nodes"]),
        (value, command) => {
          const r = cloudSh([...command, value]);
          expect(r.code).toBe(1);
          expect(r.stderr).toContain("a whole number of at least");
          expect(existsSync(dir)).toBe(false);
        },
      ),
      { numRuns: 40 },
    );
    for (const [command, value] of [
      [["start-compute"], "0"],
      [["stop-compute"], "1' OR '1'='1"],
      [["up", "--computes"], "0"],
    ] as const) {
      const r = cloudSh([...command, value]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`not '${value}'`);
    }
  });

  it("takes a whole number: stop-compute of one not running stops nothing and says so", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 999 }), (i) => {
        const r = cloudSh(["stop-compute", String(i)]);
        expect(r.code).toBe(0);
        expect(r.stderr).toContain(`nova-compute-${i} stopped`);
      }),
      { numRuns: 5 },
    );
  });
});
