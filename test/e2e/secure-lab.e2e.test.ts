import Database from "better-sqlite3";
import { randomBytes } from "node:crypto";
import { readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { findTokenByDigest, startCapture, tlsHandshakes } from "../../scripts/lab/capture.ts";
import { labDown, labUp, REPO_ROOT } from "../../scripts/lab/lab.ts";
import type { RecordedEvent } from "../../scripts/lab/events.ts";
import type { LabState } from "../../scripts/lab/state.ts";
import {
  provision,
  provisionStates,
  setInstanceImage,
  startWalk,
  testImage,
} from "../../scripts/lab/walk.ts";

const labs: string[] = [];
afterAll(async () => {
  for (const dir of labs) await labDown(dir);
});

/**
 * What must never cross the wire in clear, as the conductor's database holds it: the digests of every agent
 * token issued (the token itself is never stored) and the config drive as the conductor hands it to the agent.
 * Polled, because each boot into the ramdisk retires the previous token.
 */
function watchSecrets(databasePath: string) {
  const digests = new Set<string>();
  const configdrives = new Set<string>();
  let db: Database.Database | null = null;
  const poll = (): void => {
    try {
      db ??= new Database(databasePath, { readonly: true, fileMustExist: true });
      for (const row of db.prepare("SELECT digest FROM agent_tokens").all() as { digest: string }[])
        digests.add(row.digest);
      for (const row of db.prepare("SELECT doc FROM nodes").all() as { doc: string }[]) {
        const info = (JSON.parse(row.doc) as { instance_info?: { configdrive?: unknown } }).instance_info;
        if (typeof info?.configdrive === "string") configdrives.add(info.configdrive);
      }
    } catch {
      // the conductor has not created its database yet, or holds a write lock: the next poll reads it
    }
  };
  const timer = setInterval(poll, 250);
  return {
    digests,
    configdrives,
    stop() {
      clearInterval(timer);
      poll();
      db?.close();
    },
  };
}

/** One walk and what was captured during it. */
interface CapturedWalk {
  state: LabState;
  /** The loopback capture. */
  bytes: Buffer;
  pcap: string;
  /** The node NIC's captures, one per power-on. */
  nicFiles: string[];
  marker: string;
  password: string;
  basicHeader: string;
  digests: Set<string>;
  /** Four 64-character slices of the config drive as sent to the agent (gzip + base64, from the database). */
  configdriveSlices: string[];
  console: string;
  events: RecordedEvent[];
  provideMs: number;
  deployMs: number;
  totalMs: number;
}

/**
 * A one-node lab with http_basic (and TLS or not), driven by the stock CLI enroll → manage → provide →
 * deploy with a config drive whose meta_data uuid is a random marker (the test image prints it from the
 * drive), while tshark captures loopback: every byte between the node and the conductor crosses it (QEMU's
 * slirp forwards the guest's 10.0.2.100:80 and :443 to the host's ports through `busybox nc`), and so does
 * the stock CLI's traffic.
 */
async function capturedWalk(name: string, tls: boolean): Promise<CapturedWalk> {
  const started = Date.now();
  const dir = join(REPO_ROOT, ".tmp", "e2e", name);
  labs.push(dir);
  await rm(dir, { recursive: true, force: true });
  const state = await labUp({ dir, nodes: 1, port: 0, tls, auth: "http_basic", captureNic: true });
  const auth = state.auth!;
  const password = (await readFile(auth.passwordFile, "utf8")).trim();
  const ports = [state.conductorPort, ...(state.bootPort === null ? [] : [state.bootPort])];
  const lo = await startCapture({ file: join(dir, "lo.pcap"), iface: "lo", ports });
  const secrets = watchSecrets(join(state.dir, "conductor", "anvil.sqlite"));
  const walk = await startWalk(state);
  const marker = `anvil-secure-lab-${randomBytes(12).toString("hex")}`;
  let provideMs = 0;
  let deployMs = 0;
  let console_ = "";
  try {
    const { bm, node, probe } = walk;
    await provision(walk, ["manage"]);
    provideMs = await provision(walk, ["provide"]); // automated cleaning: one boot into the ramdisk
    await setInstanceImage(walk, await testImage(state));
    deployMs = await provision(walk, [
      "deploy",
      "--config-drive",
      JSON.stringify({ meta_data: { uuid: marker, hostname: node.name } }),
    ]);
    expect(await bm.node(node.name)).toMatchObject({ provision_state: "active", last_error: null });
    console_ = await probe.waitForSerial(
      new RegExp(`ANVIL-TEST-IMAGE-CONFIGDRIVE \\S+ uuid=${marker}`),
      180_000,
    );
  } finally {
    walk.stopEvents();
    await lo.stop();
    secrets.stop();
    await labDown(dir);
  }
  expect(secrets.configdrives.size).toBe(1);
  const configdrive = [...secrets.configdrives][0]!;
  const configdriveSlices = [0, 1, 2, 3].map((k) => configdrive.slice(k * 64 + 100, k * 64 + 164));
  expect(configdriveSlices.every((slice) => slice.length === 64)).toBe(true);
  const nicDir = join(state.nodes[0]!.dir, "vm");
  return {
    state,
    bytes: await readFile(lo.file),
    pcap: lo.file,
    nicFiles: (await readdir(nicDir)).filter((f) => /^nic-\d+\.pcap$/.test(f)).map((f) => join(nicDir, f)),
    marker,
    password,
    basicHeader: Buffer.from(`${auth.username}:${password}`).toString("base64"),
    digests: secrets.digests,
    configdriveSlices,
    console: console_,
    events: walk.events,
    provideMs,
    deployMs,
    totalMs: Date.now() - started,
  };
}

/** Captures are 100-200 MB a run: kept when a case fails (to look at), removed once it passed. */
async function dropCaptures(run: CapturedWalk): Promise<void> {
  for (const file of [run.pcap, ...run.nicFiles]) await rm(file, { force: true });
}

/** Which of the secrets the captured bytes hold in clear. */
function leaks(bytes: Buffer, run: CapturedWalk): string[] {
  const found: string[] = [];
  if (findTokenByDigest(bytes, run.digests) !== null) found.push("agent token");
  if (bytes.includes(run.marker)) found.push("config drive marker");
  if (run.configdriveSlices.some((slice) => bytes.includes(slice)))
    found.push("config drive (as sent to the agent)");
  if (bytes.includes(run.password)) found.push("password");
  if (bytes.includes(run.basicHeader)) found.push("Basic credentials");
  return found;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

describe("the lab with http_basic, driven by the stock baremetal CLI, under a traffic capture", () => {
  it("with TLS: enroll → manage → provide → deploy with a config drive → the VM boots it; no token, config drive or password crosses in clear", async () => {
    const run = await capturedWalk("secure", true);
    const tls = run.state.tls!;
    // the ramdisk was told to dial wss:// and pin the lab CA, and its agent was welcomed that way
    expect(run.console).toContain("ANVIL-TEST-IMAGE-BOOTED anvil-test");
    expect(run.console).toContain("anvil.conductor=wss://10.0.2.100/v1/agent");
    expect(run.console).toContain(`anvil.ca_fingerprint=${tls.caFingerprint}`);
    expect(run.console.match(/welcomed by the conductor/g)?.length).toBeGreaterThanOrEqual(2);
    expect(
      run.events.filter((e) => e.type === "agent" && e.connected === true).length,
    ).toBeGreaterThanOrEqual(2);
    expect(provisionStates(run.events)).toContain("wait call-back");
    expect(run.digests.size).toBeGreaterThanOrEqual(2); // one token per boot into the ramdisk

    // the node's own NIC (QEMU's filter-dump, one pcap per power-on): provide's ramdisk, deploy's, the image
    expect(run.nicFiles.length).toBeGreaterThanOrEqual(3);
    let nicHellos = 0;
    for (const file of run.nicFiles) {
      nicHellos += (await tlsHandshakes(file, 443)).clientHellos;
      expect(leaks(await readFile(file), run)).toEqual([]);
    }
    // the agent's WSS in each of the two ramdisk boots, and the image over https in the deploy's
    expect(nicHellos).toBeGreaterThanOrEqual(3);

    // loopback: not empty and on the right interface (TLS handshakes to the conductor from the node and the
    // CLI, each answered; the iPXE script fetched in clear from the boot port, with the public pin in it)...
    const handshakes = await tlsHandshakes(run.pcap, run.state.conductorPort);
    expect(handshakes.clientHellos).toBeGreaterThanOrEqual(nicHellos + 1);
    expect(handshakes.serverHellos).toBe(handshakes.clientHellos);
    expect(run.bytes.includes("#!ipxe")).toBe(true);
    expect(run.bytes.includes(`anvil.ca_fingerprint=${tls.caFingerprint}`)).toBe(true);
    // ...and no secret
    expect(leaks(run.bytes, run)).toEqual([]);

    console.log(
      [
        "\nsecure lab e2e: http_basic + TLS, one node enroll → active (QEMU TCG)",
        `  provide (manageable → available)  ${seconds(run.provideMs)}`,
        `  deploy (available → active)       ${seconds(run.deployMs)}`,
        `  lab up → image booted             ${seconds(run.totalMs)}`,
        `  loopback capture                  ${(run.bytes.length / 1e6).toFixed(1)} MB, ${handshakes.clientHellos} TLS ClientHellos to :${run.state.conductorPort}, all answered (server versions ${handshakes.versions.join(", ")})`,
        `  node NIC captures                 ${run.nicFiles.length} power-ons, ${nicHellos} ClientHellos to 10.0.2.100:443`,
        `  searched for                      ${run.digests.size} agent tokens (SHA-256 of every 43-char base64url window), the marker, 4 config drive slices, the password, the Basic credentials: none found`,
      ].join("\n"),
    );
    await dropCaptures(run);
  });

  it("control, without TLS: the same walk and the same search find every one of them in clear", async () => {
    const run = await capturedWalk("plain", false);
    expect(run.console).toContain("anvil.conductor=ws://10.0.2.100/v1/agent");
    expect(run.console).not.toContain("anvil.ca_fingerprint=");
    expect((await tlsHandshakes(run.pcap, run.state.conductorPort)).clientHellos).toBe(0);
    // the password itself never travels (only its Basic encoding), so it is not expected here
    expect(leaks(run.bytes, run)).toEqual([
      "agent token",
      "config drive marker",
      "config drive (as sent to the agent)",
      "Basic credentials",
    ]);
    console.log(
      `\ncontrol lab e2e (http_basic, no TLS): ${seconds(run.totalMs)}; found in clear: ${leaks(run.bytes, run).join(", ")}`,
    );
    await dropCaptures(run);
  });
});
