import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PeerCertificate } from "node:tls";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkConductorIdentity } from "../../agent/link/tls-pin.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { makeImpostorChains } from "../helpers/tls.ts";
import { caFingerprintOf, kernelParamValues, pinFromValues } from "../../agent/cmdline.ts";
import { checkConductorSchemes, redirectAllowed } from "../../agent/link/endpoints.ts";

const PIN = "ab".repeat(32);
const OTHER = "cd".repeat(32);
const colons = (hex: string): string => (hex.toUpperCase().match(/../g) ?? []).join(":");

describe("the certificate pin from the boot parameters", () => {
  it("collects every value a key is given, a bare key as empty", () => {
    const line = `quiet anvil.ca_fingerprint=${PIN} root=/dev/ram0 anvil.ca_fingerprint console="ttyS0 x"`;
    expect(kernelParamValues(line, "anvil.ca_fingerprint")).toEqual([PIN, ""]);
    expect(kernelParamValues(line, "console")).toEqual(["ttyS0 x"]);
    expect(kernelParamValues(line, "absent")).toEqual([]);
  });

  it("no pin given is no pin; one, or the same one twice in any spelling, is that pin", () => {
    expect(pinFromValues([])).toBeUndefined();
    expect(pinFromValues([PIN])).toBe(PIN);
    expect(pinFromValues([colons(PIN), PIN])).toBe(PIN);
  });

  it.each([
    ["empty", [""], /is empty/],
    ["blank", ["  "], /is empty/],
    ["an empty duplicate after a good one", [PIN, ""], /is empty/],
    ["not hex", ["zz".repeat(32)], /not a SHA-256/],
    ["a SHA-1", ["ab".repeat(20)], /not a SHA-256/],
    ["two different pins", [PIN, OTHER], /different fingerprints/],
  ])("refuses %s", (_, values, message) => {
    expect(() => pinFromValues(values)).toThrow(message);
  });

  it("the conductor's parameter map goes through the same rules", () => {
    expect(caFingerprintOf(new Map([["anvil.ca_fingerprint", PIN]]))).toBe(PIN);
    expect(caFingerprintOf(new Map())).toBeUndefined();
    expect(() => caFingerprintOf(new Map([["anvil.ca_fingerprint", ""]]))).toThrow(/is empty/);
  });

  it("any command line either yields a well-formed pin (one that was given), none when none was given, or throws (fast-check)", () => {
    const word = fc.oneof(
      fc.constantFrom(PIN, OTHER, colons(PIN), "", "quiet", "anvil.ca_fingerprint"),
      fc.string({ maxLength: 70 }),
    );
    const param = fc.oneof(
      word.map((value) => `anvil.ca_fingerprint=${value}`),
      word.filter((value) => !/\s|"/.test(value)),
    );
    fc.assert(
      fc.property(fc.array(param, { maxLength: 6 }), (words) => {
        const values = kernelParamValues(words.join(" "), "anvil.ca_fingerprint");
        let pin: string | undefined;
        try {
          pin = pinFromValues(values);
        } catch (error) {
          expect(error).toBeInstanceOf(Error);
          expect(values.length).toBeGreaterThan(0);
          return;
        }
        if (values.length === 0) expect(pin).toBeUndefined();
        else expect(pin).toMatch(/^[0-9a-f]{64}$/);
      }),
      { numRuns: 500 },
    );
  });
});

describe("no downgrade of the link", () => {
  it.each([
    ["wss://a/v1/agent", "ws://b/v1/agent", false, false],
    ["wss://a/v1/agent", "ws://b/v1/agent", true, false],
    ["wss://a/v1/agent", "WS://b/v1/agent", false, false],
    ["wss://a/v1/agent", "wss://b/v1/agent", false, true],
    ["wss://a/v1/agent", "wss://b/v1/agent", true, true],
    ["ws://a/v1/agent", "ws://b/v1/agent", false, true],
    ["ws://a/v1/agent", "wss://b/v1/agent", false, true],
    ["ws://a/v1/agent", "ws://b/v1/agent", true, false],
    ["wss://a/v1/agent", "https://b/v1/agent", false, false],
  ] as const)("a redirect from %s to %s (pinned: %s) is followed: %s", (...row) => {
    const [from, to, pinned, allowed] = row;
    expect(redirectAllowed(from, to, pinned)).toBe(allowed);
  });

  it("refuses a conductor list that mixes wss:// and ws://, or has ws:// beside a pin", () => {
    expect(() => checkConductorSchemes(["wss://a", "ws://b"], false)).toThrow(/mix wss:\/\/ and ws:\/\//);
    expect(() => checkConductorSchemes(["ws://a"], true)).toThrow(/pin is set/);
    expect(() => checkConductorSchemes(["http://a"], false)).toThrow(/neither/);
    expect(() => checkConductorSchemes(["wss://a", "wss://b"], true)).not.toThrow();
    expect(() => checkConductorSchemes(["ws://a", "ws://b"], false)).not.toThrow();
  });
});

describe("checkConductorIdentity", () => {
  /** A certificate as Node's getPeerCertificate gives it, for 127.0.0.1. */
  const peer = (pem: string): PeerCertificate => {
    const x509 = new X509Certificate(pem);
    return {
      raw: x509.raw,
      subject: { CN: "x" },
      subjectaltname: x509.subjectAltName ?? "",
    } as unknown as PeerCertificate;
  };

  it("wants the dialled IP in the subjectAltName and serverAuth when the leaf lists usages", async () => {
    const dir = await mkdtemp(join(tmpdir(), "anvil-eku-"));
    try {
      const lab = await makeLabCa({ dir: join(dir, "lab"), names: ["127.0.0.1"] });
      const chains = await makeImpostorChains(dir, lab);
      const leaf = async (file: string) => peer(await readFile(file, "utf8"));
      expect(checkConductorIdentity("127.0.0.1", await leaf(chains.genuine.leafFile))).toBeUndefined();
      expect(checkConductorIdentity("127.0.0.1", await leaf(chains.clientOnly.leafFile))).toMatchObject({
        code: "ERR_ANVIL_CERT_PURPOSE",
      });
      expect(checkConductorIdentity("127.0.0.1", await leaf(chains.wrongHost.leafFile))).toMatchObject({
        code: "ERR_TLS_CERT_ALTNAME_INVALID",
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
