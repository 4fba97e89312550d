import { z } from "zod";
import { parseStrictBool } from "../../../shared/strict-bool.ts";
import { InvalidDriverInfo } from "../errors.ts";
import { parsePin } from "./tls.ts";

/** How the conductor trusts the BMC's certificate: the system's CAs, none at all, or a CA bundle file. */
export type VerifyCa =
  | { kind: "system" }
  | { kind: "off" }
  | { kind: "file"; path: string }
  /** the leaf certificate's SHA-256 fingerprint (upper-case hex): no CA, exactly this certificate */
  | { kind: "pin"; sha256: string };

export interface RedfishDriverInfo {
  /** scheme://host[:port], no path ("https" when the operator gave a bare host). */
  origin: string;
  /** The system's resource path, or null to use the only member of /redfish/v1/Systems. */
  systemId: string | null;
  username: string;
  password: string;
  verifyCa: VerifyCa;
  authType: "session" | "basic" | "auto";
}

const schema = z.object({
  redfish_address: z.string().min(1).max(2048),
  redfish_system_id: z.string().min(1).max(1024).optional(),
  redfish_username: z.string().max(256).default(""),
  redfish_password: z.string().max(1024).default(""),
  redfish_verify_ca: z.union([z.boolean(), z.string().min(1).max(4096)]).default(true),
  redfish_auth_type: z.enum(["session", "basic", "auto"]).default("auto"),
});

function fail(field: string, reason: string): never {
  throw new InvalidDriverInfo(`driver_info.${field} ${reason}`);
}

function originOf(address: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `https://${address}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return fail("redfish_address", "is invalid: not a URL or host name");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    fail("redfish_address", `is invalid: scheme ${url.protocol.slice(0, -1)} is not http or https`);
  if (url.username || url.password)
    fail("redfish_address", "is invalid: credentials go in redfish_username/redfish_password");
  if (url.pathname !== "/" && url.pathname !== "")
    fail("redfish_address", "is invalid: it must not have a path");
  return url.origin;
}

function verifyCaOf(value: boolean | string): VerifyCa {
  if (typeof value === "boolean") return value ? { kind: "system" } : { kind: "off" };
  const asBool = parseStrictBool(value);
  if (asBool !== undefined) return asBool ? { kind: "system" } : { kind: "off" };
  if (/^sha256:/i.test(value)) {
    const sha256 = parsePin(value);
    if (!sha256)
      fail("redfish_verify_ca", "is invalid: sha256: needs 64 hex digits (pairs may be colon-separated)");
    return { kind: "pin", sha256 };
  }
  if (!value.startsWith("/"))
    fail(
      "redfish_verify_ca",
      "is invalid: a boolean, an absolute path to a CA bundle, or sha256:<the certificate's fingerprint>",
    );
  return { kind: "file", path: value };
}

/**
 * Reads and checks the Redfish fields of driver_info, with Ironic's names and defaults.
 * @throws InvalidDriverInfo naming the first offending field.
 */
export function parseRedfishDriverInfo(driverInfo: Record<string, unknown>): RedfishDriverInfo {
  const result = schema.safeParse(driverInfo);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue?.path.join(".") || "driver_info";
    fail(
      field,
      driverInfo[field] === undefined ? "is required" : `is invalid: ${issue?.message ?? "bad value"}`,
    );
  }
  const info = result.data;
  const systemId = info.redfish_system_id ?? null;
  if (systemId !== null && !/^\/redfish\/v1\/[^\s?#]+$/.test(systemId))
    fail("redfish_system_id", "is invalid: a resource path such as /redfish/v1/Systems/1");
  return {
    origin: originOf(info.redfish_address),
    systemId: systemId?.replace(/\/+$/, "") ?? null,
    username: info.redfish_username,
    password: info.redfish_password,
    verifyCa: verifyCaOf(info.redfish_verify_ca),
    authType: info.redfish_auth_type,
  };
}

/** Driver properties served at /v1/drivers/redfish/properties. */
export const REDFISH_PROPERTIES: Record<string, string> = {
  redfish_address: "The URL (https://host[:port]) or host of the node's Redfish service. Required.",
  redfish_system_id:
    "The ComputerSystem's resource path, e.g. /redfish/v1/Systems/1. Optional when the service has one system.",
  redfish_username: "User name for the Redfish service. Optional.",
  redfish_password: "Password for the Redfish service. Optional.",
  redfish_verify_ca:
    "true (default: verify against the system CAs), false (no verification), the path of a CA bundle, or " +
    "sha256:<fingerprint> to trust exactly the BMC certificate with that SHA-256 fingerprint (Anvil's addition).",
  redfish_auth_type:
    "session, basic or auto (default: a session, basic authentication if sessions are refused).",
  deploy_kernel: "URL of the deploy kernel. Required unless the conductor has a default.",
  deploy_ramdisk: "URL of the deploy ramdisk. Required unless the conductor has a default.",
};
