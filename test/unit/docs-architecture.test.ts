import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const page = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");

/** Every path the page names in backticks or links: files with an extension, folders ending in a slash. */
function namedPaths(text: string): string[] {
  const inTicks = [...text.matchAll(/`([a-z0-9_./-]+)`/gi)].map((m) => m[1]!);
  const linked = [...text.matchAll(/\]\(([a-z0-9_./-]+\.md)\)/gi)].map((m) => `docs/${m[1]!}`);
  return [...inTicks, ...linked].filter((p) => /\.(ts|md|sh)$/.test(p) || p.endsWith("/"));
}

describe("docs/architecture.md, the newcomer's map", () => {
  it("stays short: at most 150 lines", () => {
    expect(page.split("\n").length).toBeLessThanOrEqual(150);
  });

  it("names only files and folders that exist", () => {
    const paths = namedPaths(page);
    expect(paths.length).toBeGreaterThan(40);
    // a bare name in the folder table (`api/`) is a conductor folder; the rest are paths from the root
    const missing = paths.filter(
      (p) => !existsSync(join(ROOT, p)) && !existsSync(join(ROOT, "conductor", p)),
    );
    expect(missing).toEqual([]);
  });

  it("says each paragraph once", () => {
    const sentences = page
      .replace(/\n/g, " ")
      .split(/(?<=\.)\s+/)
      .filter((s) => s.length > 60);
    expect(sentences.length - new Set(sentences).size).toBe(0);
  });
});
