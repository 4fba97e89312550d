import { z } from "zod";
import { InvalidDriverInfo } from "../errors.ts";

// Ports arrive as numbers from JSON clients and as strings from the CLI (`--driver-info ipmi_port=6230`).
const port = z.coerce.number().int().min(1).max(65535);

/** The IPMI part of a node's driver_info; other keys (deploy_kernel, ...) are ignored here. */
export const ipmiDriverInfoSchema = z.object({
  // A leading "-" would read as an ipmitool option; whitespace never belongs in a host name.
  ipmi_address: z
    .string()
    .min(1)
    .regex(/^[^\s-][^\s]*$/, "must be a host name or IP address"),
  ipmi_port: port.default(623),
  ipmi_username: z.string().default(""),
  ipmi_password: z.string().default(""),
  ipmi_priv_level: z.enum(["ADMINISTRATOR", "OPERATOR", "USER", "CALLBACK"]).default("ADMINISTRATOR"),
  ipmi_cipher_suite: z.coerce.number().int().min(0).max(17).default(3),
  ipmi_terminal_port: port.optional(),
});
export type IpmiDriverInfo = z.infer<typeof ipmiDriverInfoSchema>;

/**
 * Reads and checks the IPMI fields of driver_info.
 * @throws InvalidDriverInfo naming the first offending field.
 */
export function parseIpmiDriverInfo(driverInfo: Record<string, unknown>): IpmiDriverInfo {
  const result = ipmiDriverInfoSchema.safeParse(driverInfo);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue?.path.join(".") || "driver_info";
  const reason =
    driverInfo[field] === undefined ? "is required" : `is invalid: ${issue?.message ?? "bad value"}`;
  throw new InvalidDriverInfo(`driver_info.${field} ${reason}`);
}

/** "host:port", the key under which commands to one BMC are serialised. */
export function bmcKey(info: Pick<IpmiDriverInfo, "ipmi_address" | "ipmi_port">): string {
  return `${info.ipmi_address}:${info.ipmi_port}`;
}
