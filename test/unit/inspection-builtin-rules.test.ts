import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadBuiltInRules } from "../../conductor/flows/apply-rules.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-builtin-rules-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("built-in inspection rules (YAML)", () => {
  it("loads a list of rules, numbering those without a uuid, with any priority", async () => {
    const path = file(
      "ok.yaml",
      [
        "- description: everything is a test machine",
        "  priority: 100000",
        "  actions:",
        "    - op: add-trait",
        "      args: {name: CUSTOM_TEST}",
        "- uuid: 5f0bd7a4-9b77-4b8e-a1d4-1f1e0a5d7c10",
        "  conditions:",
        "    - op: '!is-empty'",
        "      args: {value: '{inventory[bmc_address]}'}",
        "  actions:",
        "    - {op: set-attribute, args: {path: driver_info.ipmi_address, value: '{inventory[bmc_address]}'}}",
        "- actions: [{op: log, args: {msg: hello}}]",
      ].join("\n"),
    );
    const rules = await loadBuiltInRules(path);
    expect(rules.map((r) => r.uuid)).toEqual([
      "00000000-0000-0000-0000-000000000000",
      "5f0bd7a4-9b77-4b8e-a1d4-1f1e0a5d7c10",
      "00000000-0000-0000-0000-000000000001",
    ]);
    expect(rules[0]).toMatchObject({ priority: 100000, phase: "main", built_in: true, sensitive: false });
    expect(await loadBuiltInRules(undefined)).toEqual([]);
  });

  it("refuses a file that is not a list, or holds a rule the API would refuse, naming it", async () => {
    await expect(loadBuiltInRules(file("map.yaml", "a: 1"))).rejects.toThrow(
      "should contain a list of rules",
    );
    await expect(
      loadBuiltInRules(file("bad.yaml", "- actions: [{op: add-trait, args: {}}]")),
    ).rejects.toThrow(
      "Error parsing built-in rule 0 of " +
        join(dir, "bad.yaml") +
        ": Invalid parameters for action operator add-trait: missing required argument(s): name",
    );
    await expect(loadBuiltInRules(join(dir, "missing.yaml"))).rejects.toThrow(/ENOENT/);
  });
});
