import { spawn } from "node:child_process";
import { once } from "node:events";
import { createHash } from "node:crypto";
import { exec } from "../../shared/system/exec.ts";

/** A running packet capture (tshark, which runs dumpcap) writing a pcap file. */
export interface Capture {
  file: string;
  /** Stops it (SIGINT, so the last packets are flushed) and resolves once the file is complete. */
  stop(): Promise<void>;
}

/**
 * Captures TCP to or from any of `ports` on `iface` into `file` (classic pcap, whole packets); resolves once
 * tshark says it is capturing, so nothing sent after this is missed.
 * @throws Error when tshark exits or says nothing within 30 s (not installed, no permission)
 */
export async function startCapture(options: {
  file: string;
  iface: string;
  ports: number[];
}): Promise<Capture> {
  const filter = options.ports.map((port) => `tcp port ${port}`).join(" or ");
  const child = spawn(
    "tshark",
    ["-q", "-n", "-i", options.iface, "-f", filter, "-F", "pcap", "-w", options.file],
    {
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  const exited = once(child, "exit");
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tshark did not start capturing: ${stderr}`)), 30_000);
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (/Capturing on/.test(stderr)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`tshark exited (${code}): ${stderr}`));
    });
  });
  return {
    file: options.file,
    async stop() {
      if (child.exitCode === null) child.kill("SIGINT");
      await exited;
    },
  };
}

/** TLS handshake messages in a pcap for one server port, as tshark dissects them. */
export interface TlsHandshakes {
  /** ClientHellos sent to the port. */
  clientHellos: number;
  /** ServerHellos sent from the port. */
  serverHellos: number;
  /** The versions the server chose (e.g. "0x0304" for TLS 1.3). */
  versions: string[];
}

/** Counts the TLS handshakes to and from `port` in a pcap (the port is decoded as TLS whatever its number). */
export async function tlsHandshakes(file: string, port: number): Promise<TlsHandshakes> {
  const fields = async (filter: string, field: string): Promise<string[]> => {
    const result = await exec(
      "tshark",
      ["-n", "-r", file, "-d", `tcp.port==${port},tls`, "-Y", filter, "-T", "fields", "-e", field],
      { timeoutMs: 300_000 },
    );
    if (result.code !== 0) throw new Error(`tshark -r ${file}: ${result.stderr.trim()}`);
    return result.stdout.split("\n").filter((line) => line !== "");
  };
  const clients = await fields(`tls.handshake.type == 1 && tcp.dstport == ${port}`, "frame.number");
  const servers = await fields(
    `tls.handshake.type == 2 && tcp.srcport == ${port}`,
    "tls.handshake.extensions.supported_version",
  );
  return {
    clientHellos: clients.length,
    serverHellos: servers.length,
    versions: [...new Set(servers.flatMap((line) => line.split(",")))],
  };
}

const TOKEN_LENGTH = 43; // 32 random bytes in base64url, as the conductor issues agent tokens
const BASE64URL = new Uint8Array(256);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
  BASE64URL[c.charCodeAt(0)] = 1;

/**
 * Looks for an agent token in captured bytes when only its SHA-256 is known (the conductor stores nothing
 * else): every 43-character window of every base64url run is hashed and compared. Returns the token found,
 * or null. Pure.
 */
export function findTokenByDigest(bytes: Uint8Array, digests: ReadonlySet<string>): string | null {
  let start = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i < bytes.length && BASE64URL[bytes[i]!] === 1) continue;
    for (let at = start; at + TOKEN_LENGTH <= i; at++) {
      const candidate = Buffer.from(bytes.subarray(at, at + TOKEN_LENGTH)).toString("latin1");
      if (digests.has(createHash("sha256").update(candidate, "utf8").digest("hex"))) return candidate;
    }
    start = i + 1;
  }
  return null;
}
