import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidDriverInfo } from "../../conductor/drivers/errors.ts";
import { RedfishConnections, RedfishError } from "../../conductor/drivers/redfish/client.ts";
import { parseRedfishDriverInfo } from "../../conductor/drivers/redfish/driver-info.ts";
import { inventoryFromRedfish, normaliseMac } from "../../conductor/drivers/redfish/inspect.ts";
import {
  ComputerSystemSchema,
  DriveSchema,
  EthernetInterfaceSchema,
  errorMessageOf,
  ProcessorSchema,
} from "../../conductor/drivers/redfish/schemas.ts";
import { InventorySchema } from "../../shared/inventory.ts";

// JSON shaped like Redfish: the keys the parsers read, with values of any JSON type
const keys = [
  "Id",
  "Name",
  "Manufacturer",
  "Model",
  "PowerState",
  "Boot",
  "BootSourceOverrideMode",
  "ProcessorSummary",
  "Count",
  "LogicalProcessorCount",
  "MemorySummary",
  "TotalSystemMemoryGiB",
  "MACAddress",
  "CapacityBytes",
  "MediaType",
  "InstructionSet",
  "TotalThreads",
  "MaxSpeedMHz",
  "error",
  "message",
  "@Message.ExtendedInfo",
  "MessageId",
  "Message",
  "Actions",
  "#ComputerSystem.Reset",
  "target",
  "@odata.id",
  "IPv4Addresses",
  "Address",
];
const redfishish = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.jsonValue({ maxDepth: 1 }),
    fc.dictionary(fc.constantFrom(...keys), tie("value"), { maxKeys: 6 }),
    fc.array(tie("value"), { maxLength: 3 }),
  ),
})).value;

describe("Redfish parsers on generated input", () => {
  it("parse any JSON into a typed value or a failure, never a throw", () => {
    fc.assert(
      fc.property(redfishish, (value) => {
        for (const schema of [ComputerSystemSchema, ProcessorSchema, DriveSchema, EthernetInterfaceSchema]) {
          const result = schema.safeParse(value);
          if (result.success) expect(typeof result.data).toBe("object");
        }
        expect(typeof errorMessageOf(value)).toBe("string");
      }),
      { numRuns: 500 },
    );
  });

  it("turn whatever parses into an inventory the inventory schema accepts", () => {
    const parsed = <T>(schema: { safeParse(v: unknown): { success: boolean; data?: T } }) =>
      redfishish
        .map((v) => schema.safeParse(v))
        .filter((r) => r.success)
        .map((r) => r.data as T);
    fc.assert(
      fc.property(
        fc.record({
          system: parsed(ComputerSystemSchema),
          processors: fc.array(parsed(ProcessorSchema), { maxLength: 3 }),
          memoryMiB: fc.array(fc.double({ min: 0, max: 1e7, noNaN: true }), { maxLength: 4 }),
          drives: fc.array(parsed(DriveSchema), { maxLength: 3 }),
          nics: fc.array(parsed(EthernetInterfaceSchema), { maxLength: 3 }),
        }),
        (hw) => {
          const inventory = inventoryFromRedfish({ ...hw, simpleDevices: [] });
          expect(InventorySchema.safeParse(inventory).success).toBe(true);
          for (const nic of inventory.interfaces)
            expect(nic.mac_address).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a memory size no JSON integer holds in bytes is unknown, not an inventory the schema refuses", () => {
    const of = (TotalSystemMemoryGiB: number) =>
      inventoryFromRedfish({
        system: ComputerSystemSchema.parse({ MemorySummary: { TotalSystemMemoryGiB } }),
        processors: [],
        memoryMiB: [],
        drives: [],
        nics: [],
        simpleDevices: [],
      });
    // fast-check's counterexample: 2^33 MiB, whose bytes are 2^53
    const huge = of(8388607.999511719);
    expect(huge.memory).toEqual({ total: 0, physical_mb: null });
    expect(InventorySchema.safeParse(huge).success).toBe(true);
    expect(of(8388607).memory).toEqual({ total: 8388607 * 2 ** 30, physical_mb: 8388607 * 1024 });
  });

  it("normalise a MAC in any case and separator, and nothing else", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 6, maxLength: 6 }),
        fc.constantFrom(":", "-"),
        fc.boolean(),
        (bytes, sep, upper) => {
          const text = bytes.map((b) => b.toString(16).padStart(2, "0")).join(sep);
          const expected = bytes.every((b) => b === 0)
            ? null
            : bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
          expect(normaliseMac(upper ? text.toUpperCase() : text)).toBe(expected);
        },
      ),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (text) => {
        const mac = normaliseMac(text);
        if (mac !== null) expect(mac).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
      }),
    );
  });

  it("read driver_info into a value or InvalidDriverInfo naming a field, never anything else", () => {
    const field = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.boolean(),
      fc.integer(),
      fc.constant(null),
      fc.constantFrom(
        "https://10.0.0.1",
        "10.0.0.1:8443",
        "/etc/ssl/ca.pem",
        "false",
        "/redfish/v1/Systems/1",
        "ftp://x",
        "http://u:p@h/",
      ),
    );
    fc.assert(
      fc.property(
        fc.record(
          {
            redfish_address: field,
            redfish_system_id: field,
            redfish_username: field,
            redfish_password: field,
            redfish_verify_ca: field,
            redfish_auth_type: fc.oneof(field, fc.constantFrom("session", "basic", "auto")),
          },
          { requiredKeys: [] },
        ),
        (info) => {
          try {
            const parsed = parseRedfishDriverInfo(info);
            expect(parsed.origin).toMatch(/^https?:\/\/[^/]+$/);
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidDriverInfo);
            expect(String(error)).toMatch(/driver_info\.redfish_\w+ is (required|invalid)/);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("read the driver_info forms operators use", () => {
    expect(parseRedfishDriverInfo({ redfish_address: "10.0.0.1" })).toEqual({
      origin: "https://10.0.0.1",
      systemId: null,
      username: "",
      password: "",
      verifyCa: { kind: "system" },
      authType: "auto",
    });
    const info = parseRedfishDriverInfo({
      redfish_address: "http://127.0.0.1:8000/",
      redfish_system_id: "/redfish/v1/Systems/node-1/",
      redfish_verify_ca: "False",
      redfish_auth_type: "session",
    });
    expect([info.origin, info.systemId, info.verifyCa, info.authType]).toEqual([
      "http://127.0.0.1:8000",
      "/redfish/v1/Systems/node-1",
      { kind: "off" },
      "session",
    ]);
    expect(
      parseRedfishDriverInfo({ redfish_address: "h", redfish_verify_ca: "/etc/ca.pem" }).verifyCa,
    ).toEqual({ kind: "file", path: "/etc/ca.pem" });
    expect(() => parseRedfishDriverInfo({})).toThrow("driver_info.redfish_address is required");
    expect(() => parseRedfishDriverInfo({ redfish_address: "http://u:pw@h" })).toThrow(
      /credentials go in redfish_username/,
    );
    expect(() => parseRedfishDriverInfo({ redfish_address: "h", redfish_verify_ca: "maybe" })).toThrow(
      /redfish_verify_ca is invalid/,
    );
  });
});

describe("the Redfish client on a hostile BMC's bytes", () => {
  let server: Server;
  let url = "";
  let next = { status: 200, body: Buffer.alloc(0) };
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(next.status, { "Content-Type": "application/json" });
      res.end(next.body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("answers with a parsed resource or a RedfishError, whatever the status and body", async () => {
    const conn = new RedfishConnections({ backoffMs: 1, attempts: 2, maxBodyBytes: 4096 });
    const client = conn.client(parseRedfishDriverInfo({ redfish_address: url }));
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(200, 201, 204, 400, 401, 404, 409, 500, 503),
          fc.oneof(
            fc.uint8Array({ maxLength: 6000 }),
            redfishish.map((v) => new TextEncoder().encode(JSON.stringify(v) ?? "")),
          ),
          async (status, bytes) => {
            next = { status, body: Buffer.from(bytes) };
            try {
              const system = await client.get("/redfish/v1/Systems/1", ComputerSystemSchema);
              expect(status).toBeLessThan(400);
              expect(typeof system).toBe("object");
            } catch (error) {
              expect(error).toBeInstanceOf(RedfishError);
            }
          },
        ),
        { numRuns: 150 },
      );
    } finally {
      await conn.close();
    }
  });
});
