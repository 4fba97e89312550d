import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { IsoBuildError } from "./iso.ts";

export interface DeployFileOptions {
  /** Where downloaded deploy kernels and ramdisks are kept. */
  dir: string;
  /** Bound on one download. Default 300 s. */
  timeoutMs?: number;
  /** A larger file is refused. Default 2 GiB. */
  maxBytes?: number;
}

/**
 * The deploy kernel and ramdisk as local files for the ISO builder: a file:// URL or an absolute path is used
 * where it is; an http(s) URL is downloaded once per conductor run (to a file named after the URL's digest)
 * and reused, as Ironic's image cache keeps the deploy images it puts on an ISO.
 */
export class DeployFiles {
  private readonly fetched = new Map<string, Promise<string>>();

  constructor(private readonly options: DeployFileOptions) {}

  /** @throws IsoBuildError when the file cannot be read or downloaded */
  async local(location: string, signal?: AbortSignal): Promise<string> {
    if (location.startsWith("/") || location.startsWith("file:")) {
      const path = location.startsWith("/") ? location : fileURLToPath(location);
      const info = await stat(path).catch(() => null);
      if (!info?.isFile()) throw new IsoBuildError(`deploy image ${path} is not a readable file`);
      return path;
    }
    let pending = this.fetched.get(location);
    if (!pending) {
      pending = this.download(location, signal);
      this.fetched.set(location, pending);
      // a failed download is tried again next time
      pending.catch(() => this.fetched.delete(location));
    }
    return pending;
  }

  private async download(location: string, signal?: AbortSignal): Promise<string> {
    let url: URL;
    try {
      url = new URL(location);
    } catch {
      throw new IsoBuildError(`deploy image ${JSON.stringify(location).slice(0, 80)} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new IsoBuildError(`deploy image scheme ${url.protocol} is not supported for virtual media`);
    await mkdir(this.options.dir, { recursive: true });
    const name = createHash("sha256").update(location).digest("hex").slice(0, 32);
    const path = join(this.options.dir, `deploy-${name}`);
    const part = `${path}.part`;
    const timeout = AbortSignal.timeout(this.options.timeoutMs ?? 300_000);
    const bound = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const max = this.options.maxBytes ?? 2 * 1024 ** 3;
    try {
      const response = await fetch(url, { signal: bound, redirect: "error" });
      if (!response.ok || !response.body)
        throw new IsoBuildError(`downloading deploy image ${url.origin}${url.pathname}: ${response.status}`);
      let seen = 0;
      const limit = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          seen += chunk.length;
          done(seen > max ? new IsoBuildError(`deploy image larger than ${max} bytes`) : null, chunk);
        },
      });
      await pipeline(Readable.fromWeb(response.body), limit, createWriteStream(part), { signal: bound });
      await rename(part, path);
      return path;
    } catch (error) {
      await rm(part, { force: true });
      if (error instanceof IsoBuildError) throw error;
      throw new IsoBuildError(
        `downloading deploy image ${url.origin}${url.pathname} failed: ${(error as Error).message}`,
      );
    }
  }
}
