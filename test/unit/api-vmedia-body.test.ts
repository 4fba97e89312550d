import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseDeviceTypes, parseVmediaBody } from "../../conductor/api/node-vmedia.ts";
import { Invalid } from "../../conductor/errors.ts";

/** Ironic's VMEDIA_ATTACH_VALIDATOR and device_types list, read from an operator's request. */
describe("the virtual media request parsers", () => {
  it("takes Ironic's bodies, local by default", () => {
    expect(parseVmediaBody({ device_type: "cdrom", image_url: "http://h/x.iso" })).toEqual({
      device: "cdrom",
      url: "http://h/x.iso",
      source: "local",
    });
    expect(
      parseVmediaBody({
        device_type: "disk",
        image_url: "NFS://h/share/x.img",
        image_download_source: "http",
      }),
    ).toEqual({ device: "disk", url: "NFS://h/share/x.img", source: "http" });
  });

  it("names the first missing field, then unexpected ones, then each field's fault", () => {
    const fault = (body: unknown) => {
      try {
        parseVmediaBody(body);
      } catch (error) {
        expect(error).toBeInstanceOf(Invalid);
        return (error as Error).message;
      }
      return "accepted";
    };
    expect(fault([])).toBe("Schema error for vmedia: [] is not of type 'object'");
    expect(fault({ x: true })).toBe("Schema error for vmedia: 'device_type' is a required property");
    expect(fault({ device_type: 1, image_url: null, a: 1, b: 2 })).toBe(
      "Schema error for vmedia: Additional properties are not allowed ('a', 'b' were unexpected)",
    );
    expect(fault({ device_type: false, image_url: "http://h" })).toBe(
      "Schema error for vmedia: False is not of type 'string'",
    );
    expect(fault({ device_type: ["a,b", { k: null }], image_url: "http://h" })).toBe(
      "Schema error for vmedia: ['a,b', {'k': None}] is not of type 'string'",
    );
    expect(fault({ device_type: "cdrom", image_url: "http://[::1" })).toBe(
      "Invalid image_url: 'http://[::1' is not a valid URL",
    );
  });

  it("answers any JSON value with a request or an Invalid, nothing else", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), fc.jsonValue(), (device, url, source) => {
        for (const body of [device, { device_type: device, image_url: url, image_download_source: source }]) {
          try {
            const parsed = parseVmediaBody(body);
            expect(["disk", "cdrom", "floppy"]).toContain(parsed.device);
            expect(URL.canParse(parsed.url)).toBe(true);
          } catch (error) {
            expect(error).toBeInstanceOf(Invalid);
          }
        }
      }),
      { numRuns: 500 },
    );
  });

  it("reads device_types as Ironic's string_list: comma separated, repeated, lower-cased, unique", () => {
    expect(parseDeviceTypes(undefined)).toBeNull();
    expect(parseDeviceTypes(" , ")).toBeNull();
    expect(parseDeviceTypes("CDROM, floppy,cdrom")).toEqual(["cdrom", "floppy"]);
    expect(parseDeviceTypes(["disk", "cdrom,disk"])).toEqual(["disk", "cdrom"]);
    expect(() => parseDeviceTypes("cdrom,cat")).toThrow(
      "Invalid device type(s) cat (valid are disk, cdrom, floppy)",
    );
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.array(fc.string())), (raw) => {
        try {
          const devices = parseDeviceTypes(raw);
          for (const d of devices ?? []) expect(["disk", "cdrom", "floppy"]).toContain(d);
        } catch (error) {
          expect(error).toBeInstanceOf(Invalid);
        }
      }),
    );
  });
});
