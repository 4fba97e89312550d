import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { RedfishConnections, RedfishError } from "../../conductor/drivers/redfish/client.ts";
import { parseRedfishDriverInfo } from "../../conductor/drivers/redfish/driver-info.ts";
import { RedfishPower } from "../../conductor/drivers/redfish/power.ts";
import { parsePin } from "../../conductor/drivers/redfish/tls.ts";
import { toHttpError } from "../../conductor/api/errors.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";
import { selfSignedCert } from "../helpers/tls.ts";

function nodeFor(bmc: RedfishBmc, verifyCa: string): DriverNode {
  return {
    uuid: "7c7d3c55-2f4c-4b7e-9d35-1f0a7d6c2b11",
    name: "pinned",
    driver_info: {
      redfish_address: bmc.url,
      redfish_system_id: "/redfish/v1/Systems/node-1",
      redfish_username: "admin",
      redfish_password: "s3cret",
      redfish_verify_ca: verifyCa,
    },
    properties: {},
    instance_info: {},
    driver_internal_info: {},
    ports: [],
  };
}

describe("redfish_verify_ca=sha256:<fingerprint> against a real HTTPS BMC on loopback", () => {
  let dir = "";
  let bmc: RedfishBmc;
  let pin = ""; // AB:CD:… as openssl and Node print it
  let otherPin = "";
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "anvil-redfish-pin-"));
    const cert = await selfSignedCert(join(dir));
    const other = await selfSignedCert(mkdtempSync(join(dir, "other-")));
    pin = new X509Certificate(cert.cert).fingerprint256;
    otherPin = new X509Certificate(other.cert).fingerprint256;
    bmc = await startRedfishBmc({ password: "s3cret", systems: [{ id: "node-1" }], tls: cert });
  });
  afterAll(async () => {
    await bmc?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the right pin connects (colons or none, either case) to a certificate no CA vouches for", async () => {
    expect(pin).not.toBe(otherPin);
    for (const value of [`sha256:${pin}`, `SHA256:${pin.replaceAll(":", "").toLowerCase()}`]) {
      const conn = new RedfishConnections({ backoffMs: 1 });
      try {
        expect(await new RedfishPower({ connections: conn }).getPowerState(nodeFor(bmc, value))).toBe(
          "power off",
        );
      } finally {
        await conn.close();
      }
    }
  });

  it("a wrong pin is refused with a clear error, not retried, nothing sent, never unverified", async () => {
    const before = bmc.requests.length;
    const conn = new RedfishConnections({ backoffMs: 1, attempts: 4 });
    try {
      const error = await new RedfishPower({ connections: conn })
        .getPowerState(nodeFor(bmc, `sha256:${otherPin}`))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedfishError);
      const message = (error as Error).message;
      expect(message).toContain(`does not match redfish_verify_ca sha256:${otherPin}`);
      expect(message).toContain(`fingerprint sha256:${pin}`);
      expect(message).not.toContain("s3cret");
      // the BMC never saw a request (not even the service root): the connection ended at the handshake
      expect(bmc.requests.length).toBe(before);
      expect(toHttpError(error).status).toBe(503);
    } finally {
      await conn.close();
    }
  });

  it("parses pins and refuses malformed ones as InvalidDriverInfo naming the field", () => {
    const info = (value: string) =>
      parseRedfishDriverInfo({ redfish_address: "bmc", redfish_verify_ca: value });
    expect(info(`sha256:${pin}`).verifyCa).toEqual({ kind: "pin", sha256: pin.replaceAll(":", "") });
    expect(() => info("sha256:AB:CD")).toThrow(
      /driver_info.redfish_verify_ca is invalid: sha256: needs 64 hex/,
    );
    expect(() => info(`sha1:${pin}`)).toThrow(/driver_info.redfish_verify_ca is invalid/);
    fc.assert(
      fc.property(fc.string({ maxLength: 120 }), (value) => {
        const parsed = parsePin(value);
        if (parsed !== null) expect(parsed).toMatch(/^[0-9A-F]{64}$/);
      }),
    );
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.boolean(), (bytes, colons) => {
        const hex = Buffer.from(bytes).toString("hex");
        const written = colons ? hex.match(/../g)!.join(":") : hex;
        expect(parsePin(`sha256:${written}`)).toBe(hex.toUpperCase());
      }),
    );
  });
});
