import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { configDriveValue } from "../../conductor/cli/configdrive-arg.ts";
import { UsageError } from "../../conductor/cli/errors.ts";

describe("--configdrive", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-cli-cd-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("sends inline JSON as an object", () => {
    expect(configDriveValue('{"meta_data": {"hostname": "n1"}}')).toEqual({ meta_data: { hostname: "n1" } });
  });

  it("reads a JSON file as an object", () => {
    const file = join(dir, "cd.json");
    writeFileSync(file, JSON.stringify({ meta_data: { uuid: "u" }, user_data: "#cloud-config\n" }));
    expect(configDriveValue(file)).toEqual({ meta_data: { uuid: "u" }, user_data: "#cloud-config\n" });
  });

  it("sends a base64 text file as is, without its line breaks", () => {
    const file = join(dir, "cd.b64");
    writeFileSync(file, "H4sIAAAA\nAAAD\n");
    expect(configDriveValue(file)).toBe("H4sIAAAAAAAD");
  });

  it("gzips and base64-encodes a binary file (an ISO)", () => {
    const file = join(dir, "cd.iso");
    const iso = Buffer.from([0, 1, 2, 0xff, 0x43, 0x44, 0x30, 0x30, 0x31]);
    writeFileSync(file, iso);
    const value = configDriveValue(file);
    expect(typeof value).toBe("string");
    expect(gunzipSync(Buffer.from(value as string, "base64")).equals(iso)).toBe(true);
  });

  it("passes URLs through and refuses missing files and bad JSON", () => {
    expect(configDriveValue("https://store/cd.iso.gz")).toBe("https://store/cd.iso.gz");
    expect(() => configDriveValue(join(dir, "missing"))).toThrow(UsageError);
    expect(() => configDriveValue("{not json")).toThrow(/not valid JSON/);
  });
});
