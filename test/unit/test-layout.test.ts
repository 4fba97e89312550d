import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

function files(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files(path, out);
    else out.push(relative(ROOT, path));
  }
  return out;
}

describe("the test layout", () => {
  const all = ["agent", "conductor", "shared", "scripts", "ui", "test"].flatMap((d) => files(join(ROOT, d)));

  it("keeps every test under test/ (unit/, integration/, contract/, e2e/)", () => {
    const tests = all.filter((f) => f.endsWith(".test.ts"));
    expect(tests.length).toBeGreaterThan(100);
    expect(tests.filter((f) => !/^test\/(unit|integration|contract|e2e)\//.test(f))).toEqual([]);
  });

  it("polls through test/helpers/wait.ts, not a copy of its own", () => {
    const copies = all.filter(
      (f) =>
        f.startsWith("test/") &&
        f !== "test/helpers/wait.ts" &&
        /^(export )?async function (until|waitFor)\b/m.test(readFileSync(join(ROOT, f), "utf8")),
    );
    expect(copies).toEqual([]);
  });
});
