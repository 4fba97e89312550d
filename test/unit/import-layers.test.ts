import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkImportLayers, cyclesOf } from "../../scripts/check/import-layers.ts";

const roots: string[] = [];

/** A throwaway conductor/-like tree: path -> source. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "layers-"));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe("import layers", () => {
  it("the conductor imports one way", () => {
    expect(checkImportLayers(resolve(import.meta.dirname, "../../conductor"))).toEqual([]);
  });

  it("refuses a cycle of type-only imports between two files of one folder", () => {
    const root = tree({
      "drivers/a.ts": 'import type { B } from "./b.ts";\nexport type A = B;\n',
      "drivers/b.ts": 'import type { A } from "./a.ts";\nexport type B = { a?: A };\n',
    });
    expect(checkImportLayers(root)).toEqual(["import cycle: drivers/a.ts -> drivers/b.ts -> drivers/a.ts"]);
  });

  it("refuses a cycle through a re-export across folders", () => {
    const root = tree({
      "tasks/a.ts": 'export { b } from "../flows/b.ts";\n',
      "flows/b.ts": 'import { c } from "./c.ts";\nexport const b = c;\n',
      "flows/c.ts": 'import type { a } from "../tasks/a.ts";\nexport const c = 1 as unknown as typeof a;\n',
    });
    const problems = checkImportLayers(root);
    expect(problems).toContain("import cycle: flows/b.ts -> flows/c.ts -> tasks/a.ts -> flows/b.ts");
    expect(problems).toContain("tasks/a.ts imports flows/b.ts: flows is above tasks");
  });

  it("refuses a lower folder importing a higher one, and allows the reverse", () => {
    const root = tree({
      "api/route.ts": 'import { power } from "../operations/power.ts";\nexport const r = power;\n',
      "operations/power.ts": 'import { x } from "../drivers/x.ts";\nexport const power = x;\n',
      "drivers/x.ts": 'import { r } from "../api/route.ts";\nexport const x = 1;\nvoid r;\n',
    });
    const problems = checkImportLayers(root);
    expect(problems).toContain("drivers/x.ts imports api/route.ts: api is above drivers");
    expect(problems.filter((p) => p.startsWith("api/") || p.startsWith("operations/"))).toEqual([]);
  });

  it("refuses a folder in no layer", () => {
    const root = tree({ "utils/helpers.ts": "export const x = 1;\n" });
    expect(checkImportLayers(root)).toEqual(['utils/helpers.ts: "utils" is in no layer of LAYERS']);
  });

  it("reports a cycle once, whichever file the walk starts from", () => {
    const edges = [
      { from: "a.ts", to: "b.ts" },
      { from: "b.ts", to: "c.ts" },
      { from: "c.ts", to: "a.ts" },
      { from: "c.ts", to: "d.ts" },
    ];
    expect(cyclesOf(edges)).toHaveLength(1);
    expect(cyclesOf(edges.slice(0, 2))).toEqual([]);
  });
});
