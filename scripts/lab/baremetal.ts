import { exec } from "../../shared/system/exec.ts";
import type { LabAccess } from "./access.ts";

/**
 * The stock `baremetal` client (python3-ironicclient) pointed at a conductor: no auth, or keystoneauth's
 * http_basic plugin, and --os-cacert for https.
 */
export interface Baremetal {
  /** Runs `baremetal ARGS`; rejects with the client's stderr when it exits non-zero. */
  run(args: string[], options?: { timeoutMs?: number }): Promise<string>;
  /** `baremetal ARGS -f json`, parsed. */
  json(args: string[]): Promise<Record<string, unknown>>;
  /** The node's provision state, power state and last error. */
  node(
    name: string,
  ): Promise<{ provision_state: string; power_state: string | null; last_error: string | null }>;
}

export function baremetal(endpoint: string, access: LabAccess = {}): Baremetal {
  const global = [
    ...(access.username === undefined
      ? ["--os-auth-type", "none"]
      : ["--os-auth-type", "http_basic", "--os-username", access.username]),
    ...["--os-endpoint", endpoint],
    ...(access.caCert === undefined ? [] : ["--os-cacert", access.caCert]),
  ];
  // the password goes through the environment (OS_PASSWORD, which the client reads like --os-password), so
  // it never shows in a process listing
  const env: Record<string, string> = { HOME: process.env.HOME ?? "/tmp" };
  if (access.password !== undefined) env.OS_PASSWORD = access.password;
  const run: Baremetal["run"] = async (args, options = {}) => {
    const result = await exec("baremetal", [...global, ...args], {
      env,
      timeoutMs: options.timeoutMs ?? 120_000,
    });
    if (result.code !== 0) {
      throw new Error(
        `baremetal ${args.join(" ")} exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`,
      );
    }
    return result.stdout;
  };
  const json: Baremetal["json"] = async (args) =>
    JSON.parse(await run([...args, "-f", "json"])) as Record<string, unknown>;
  return {
    run,
    json,
    async node(name) {
      const shown = await json([
        "node",
        "show",
        name,
        "--fields",
        "provision_state",
        "power_state",
        "last_error",
      ]);
      return {
        provision_state: String(shown.provision_state),
        power_state: (shown.power_state as string | null) ?? null,
        last_error: (shown.last_error as string | null) ?? null,
      };
    },
  };
}
