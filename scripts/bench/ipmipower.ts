// FreeIPMI's ipmipower as a power status reader for many BMCs in one process: the credentials go in a
// private config file (--config-file), never argv; the hosts (not secret) go in argv as host:port.
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface IpmipowerCredentials {
  username: string;
  password: string;
}

/** One line of `ipmipower --stat`: "host: on", "host: off" or "host: <error>". */
export interface IpmipowerAnswer {
  host: string;
  state: "on" | "off" | "error";
  /** The error text when state is "error". */
  detail?: string;
}

/**
 * Parses ipmipower's output, one "host: answer" a line; lines of any other shape are skipped. Never throws.
 * NOTE: ipmipower prints the host without its port, so BMCs sharing an address cannot be told apart here.
 */
export function parseIpmipowerOutput(stdout: string): IpmipowerAnswer[] {
  const answers: IpmipowerAnswer[] = [];
  for (const line of stdout.split("\n")) {
    const at = line.lastIndexOf(": ");
    if (at <= 0) continue;
    const host = line.slice(0, at).trim();
    const answer = line.slice(at + 2).trim();
    if (host === "" || /\s/.test(host)) continue;
    if (answer === "on" || answer === "off") answers.push({ host, state: answer });
    else if (answer !== "") answers.push({ host, state: "error", detail: answer });
  }
  return answers;
}

/** The config file's text: LAN_2_0, cipher suite 3, the credentials (ipmi_sim needs `opensesspriv`). */
export function ipmipowerConfig(credentials: IpmipowerCredentials): string {
  for (const value of [credentials.username, credentials.password]) {
    if (/[\s#]/.test(value) || value === "")
      throw new Error("ipmipower's config file cannot hold this credential");
  }
  return [
    "driver-type LAN_2_0",
    "cipher-suite-id 3",
    "privilege-level ADMIN",
    `username ${credentials.username}`,
    `password ${credentials.password}`,
    // NOTE: ipmi_sim answers Open Session with maximum privilege 0; FreeIPMI refuses that ("privilege level
    // cannot be obtained for this user") unless told to take the Open Session's level
    "workaround-flags opensesspriv",
    "",
  ].join("\n");
}

/**
 * Runs one `ipmipower --stat` over `hosts` ("addr:port"), `fanout` at a time. Resolves with the parsed
 * answers and the child's CPU seconds (from its rusage, reaped), whatever its exit code.
 */
export async function ipmipowerStat(
  hosts: readonly string[],
  options: IpmipowerCredentials & { fanout?: number; sessionTimeoutMs?: number },
): Promise<{ answers: IpmipowerAnswer[]; stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), "anvil-ipmipower-"));
  const config = join(dir, "freeipmi.conf");
  try {
    await writeFile(config, ipmipowerConfig(options), { mode: 0o600 });
    const args = ["--config-file", config, "--stat", "-h", hosts.join(",")];
    if (options.fanout !== undefined) args.push("--fanout", String(options.fanout));
    args.push("--session-timeout", String(options.sessionTimeoutMs ?? 20_000));
    const child = spawn("ipmipower", args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    await new Promise<void>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", () => resolve());
    });
    return { answers: parseIpmipowerOutput(stdout), stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
