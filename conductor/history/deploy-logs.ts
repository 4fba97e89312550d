import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { gunzip as gunzipCallback, gzip as gzipCallback } from "node:zlib";
import { maskSecretsInTextYielding } from "../../shared/secrets.ts";
import { readTar, writeTar, type TarEntry } from "./tar.ts";

// zlib's thread pool, not the event loop: an archive may unpack to tens of MiB
const gunzip = promisify(gunzipCallback);
const gzip = promisify(gzipCallback);

/** One stored archive, as the API lists it. */
export interface DeployLogInfo {
  /** The archive's file name without `.tar.gz` (Ironic's `<node>[_<instance>][_<label>]_<timestamp>`). */
  id: string;
  created_at: string;
  /** Why it was collected: the failed state ("deploy failed", "clean failed", …), "on request", … */
  reason: string;
  /** Bytes of the stored (compressed) archive. */
  size: number;
  instance_uuid: string | null;
}

export interface DeployLogLimits {
  maxPerNode: number;
  maxBytesPerNode: number;
  maxUnpackedBytes: number;
}

/** Files one archive may hold: the agent sends about ten. */
const MAX_ENTRIES = 256;
/** An id as this store makes them (node uuid, instance uuid, label, timestamp): nothing that walks paths. */
const ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Ironic's timestamp in log file names (%Y-%m-%d-%H:%M:%S), with milliseconds so two a second differ. */
function stamp(at: Date): string {
  const iso = at.toISOString(); // 2026-11-27T04:20:00.123Z
  return `${iso.slice(0, 10)}-${iso.slice(11, 23)}`;
}

/** A label for the file name from the reason: "deploy failed" → "deploy-failed". */
function labelOf(reason: string): string {
  return (
    reason
      .replace(/[^A-Za-z0-9]+/g, "-")
      .replace(/^-|-$/g, "")
      .slice(0, 40) || "logs"
  );
}

/**
 * One file of the agent's archive, its secrets masked: every file is text (logs, command output, JSON);
 * bytes that are not UTF-8 are replaced rather than kept, so nothing escapes the masking undecoded. Masked in
 * slices that yield to the event loop: an archive may unpack to max_unpacked_bytes, and other requests wait
 * on the loop meanwhile.
 */
async function masked(entry: TarEntry): Promise<TarEntry> {
  const text = await maskSecretsInTextYielding(entry.data.toString("utf8"));
  return { name: entry.name, data: Buffer.from(text, "utf8") };
}

/**
 * The deploy ramdisk's logs kept per node on this conductor's disk (Ironic's deploy_logs_storage_backend
 * `local`): `<dir>/<node uuid>/<id>.tar.gz` with a `<id>.json` beside it. Each archive is unpacked (bounded),
 * masked file by file and packed again, so what is stored and served holds no secret the agent let through;
 * per node only the newest `maxPerNode` archives within `maxBytesPerNode` stay.
 */
export class DeployLogStore {
  constructor(
    private readonly dir: string,
    private readonly limits: DeployLogLimits,
  ) {}

  private nodeDir(node: string): string {
    if (!UUID.test(node)) throw new Error(`not a node uuid: ${node}`);
    return join(this.dir, node);
  }

  /**
   * Stores the agent's archive (gzip tar, as its collect_logs returns it) and rotates the node's logs.
   * @throws TarError (malformed or past a limit), RangeError (unpacks past maxUnpackedBytes), fs errors
   */
  async save(
    node: { uuid: string; instance_uuid: string | null },
    archive: Buffer,
    options: { reason: string; at?: Date },
  ): Promise<DeployLogInfo> {
    const at = options.at ?? new Date();
    const tar = await gunzip(archive, { maxOutputLength: this.limits.maxUnpackedBytes });
    const entries = await readTar(tar, { maxEntries: MAX_ENTRIES, maxBytes: this.limits.maxUnpackedBytes });
    const reasonFile = { name: "reason.txt", data: Buffer.from(`${options.reason}\n`) };
    const maskedEntries: TarEntry[] = [];
    for (const entry of entries) maskedEntries.push(await masked(entry));
    const stored = await gzip(await writeTar([reasonFile, ...maskedEntries], at));
    const dir = this.nodeDir(node.uuid);
    await mkdir(dir, { recursive: true, mode: 0o750 });
    const fields = [node.uuid, ...(node.instance_uuid ? [node.instance_uuid] : []), labelOf(options.reason)];
    let id = `${fields.join("_")}_${stamp(at)}`;
    for (let n = 2; (await stat(join(dir, `${id}.json`)).catch(() => null)) !== null; n++)
      id = `${fields.join("_")}_${stamp(at)}.${n}`;
    const info: DeployLogInfo = {
      id,
      created_at: at.toISOString(),
      reason: options.reason,
      size: stored.length,
      instance_uuid: node.instance_uuid,
    };
    await writeFile(join(dir, `${id}.tar.gz`), stored, { mode: 0o640 });
    // the listing reads the .json files: written last (by rename), an archive is listed only once whole
    await writeFile(join(dir, `${id}.json.tmp`), JSON.stringify(info), { mode: 0o640 });
    await rename(join(dir, `${id}.json.tmp`), join(dir, `${id}.json`));
    await this.rotate(node.uuid);
    return info;
  }

  /** The node's archives, oldest first. */
  async list(node: string): Promise<DeployLogInfo[]> {
    const dir = this.nodeDir(node);
    const names = await readdir(dir).catch(() => [] as string[]);
    const infos: DeployLogInfo[] = [];
    for (const name of names) {
      if (!name.endsWith(".json")) continue;
      const text = await readFile(join(dir, name), "utf8").catch(() => null);
      if (text === null) continue;
      try {
        infos.push(JSON.parse(text) as DeployLogInfo);
      } catch {
        continue;
      }
    }
    return infos.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  /** One archive's bytes (gzip tar) and its record; null when the node has no archive of that id. */
  async read(node: string, id: string): Promise<{ info: DeployLogInfo; archive: Buffer } | null> {
    if (!ID.test(id)) return null;
    const info = (await this.list(node)).find((item) => item.id === id);
    if (!info) return null;
    const archive = await readFile(join(this.nodeDir(node), `${id}.tar.gz`)).catch(() => null);
    return archive === null ? null : { info, archive };
  }

  /** The files of a stored archive (this store wrote it: masked already). */
  async unpack(archive: Buffer): Promise<TarEntry[]> {
    const tar = await gunzip(archive, { maxOutputLength: this.limits.maxUnpackedBytes + 1024 * 1024 });
    return readTar(tar, { maxEntries: MAX_ENTRIES + 1, maxBytes: this.limits.maxUnpackedBytes + 1024 });
  }

  /** Removes the oldest archives past the node's count and byte bounds; the newest always stays. */
  private async rotate(node: string): Promise<void> {
    const infos = await this.list(node);
    let bytes = infos.reduce((sum, info) => sum + info.size, 0);
    let count = infos.length;
    for (const info of infos) {
      if (count <= 1) break;
      if (count <= this.limits.maxPerNode && bytes <= this.limits.maxBytesPerNode) break;
      await this.remove(node, info.id);
      count--;
      bytes -= info.size;
    }
  }

  private async remove(node: string, id: string): Promise<void> {
    const dir = this.nodeDir(node);
    await rm(join(dir, `${id}.json`), { force: true });
    await rm(join(dir, `${id}.tar.gz`), { force: true });
  }
}
