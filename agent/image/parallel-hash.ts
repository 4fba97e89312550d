import { Worker } from "node:worker_threads";
import type { ChecksumAlgo } from "../../shared/image.ts";

/** Shared memory the bytes are copied into for the worker; a MiB at a time is handed over. */
const RING_BYTES = 8 * 1024 * 1024;
const BATCH_BYTES = 1024 * 1024;

/** Atomics.waitAsync (ES2024; in Node since 16), which this project's TypeScript lib does not declare yet. */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
) => { async: false; value: string } | { async: true; value: Promise<string> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

// The worker hashes ring ranges in order and counts the bytes it is done with (a wrapping int32) in `done[0]`;
// "prefix" answers the digest of what it hashed so far (a resume checkpoint's), null the final digest.
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createHash } = require("node:crypto");
const ring = new Uint8Array(workerData.ring);
const done = new Int32Array(workerData.done);
const hash = createHash(workerData.algo);
parentPort.on("message", (range) => {
  if (range === null) {
    parentPort.postMessage(hash.digest("hex"));
    return;
  }
  if (range === "prefix") {
    parentPort.postMessage(hash.copy().digest("hex"));
    return;
  }
  hash.update(ring.subarray(range[0], range[0] + range[1]));
  Atomics.add(done, 0, range[1]);
  Atomics.notify(done, 0);
});
`;

/**
 * A hash computed on a worker thread while the caller goes on receiving: each update copies the bytes into a
 * shared ring (a memcpy, far cheaper than the hash) and hands the worker a MiB at a time; the caller waits only
 * when the worker is a whole ring behind. Measured in docs/images.md: receiving and hashing on one thread
 * take the sum of both, here the larger.
 */
export class ParallelHash {
  private readonly ring = Buffer.from(new SharedArrayBuffer(RING_BYTES));
  private readonly done = new Int32Array(new SharedArrayBuffer(4));
  private readonly worker: Worker;
  private readonly failed: Promise<never>;
  /** Who waits for the worker's next digests, in the order they were asked. */
  private readonly answers: ((digest: string) => void)[] = [];
  /** Bytes copied into the ring, as a wrapping int32 (compared with done[0], which wraps alike). */
  private copied = 0;
  /** The ring offset of the next byte, and the start and length of what the worker has not been given yet. */
  private at = 0;
  private batchStart = 0;
  private batchLength = 0;

  constructor(algo: ChecksumAlgo) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { ring: this.ring.buffer, done: this.done.buffer, algo },
    });
    this.failed = new Promise<never>((_, reject) => {
      this.worker.once("error", reject);
    });
    this.failed.catch(() => undefined); // surfaced by the next wait or the digest
    this.worker.on("message", (digest: string) => this.answers.shift()?.(digest));
  }

  /** Copies `data` for the worker; resolves once it is in the ring (waiting for room when the worker lags). */
  async update(data: Buffer): Promise<void> {
    let from = 0;
    while (from < data.length) {
      const room = await this.room();
      const n = Math.min(room, data.length - from, RING_BYTES - this.at);
      data.copy(this.ring, this.at, from, from + n);
      from += n;
      this.at += n;
      this.batchLength += n;
      this.copied = (this.copied + n) | 0;
      if (this.batchLength >= BATCH_BYTES || this.at === RING_BYTES) this.hand();
      if (this.at === RING_BYTES) this.at = 0;
    }
  }

  /** The hex digest of everything updated so far; more may follow. @throws the worker's error */
  async prefixDigest(): Promise<string> {
    return this.ask("prefix");
  }

  /** The hex digest of everything updated; the worker stops. @throws the worker's error */
  async digest(): Promise<string> {
    try {
      return await this.ask(null);
    } finally {
      await this.worker.terminate();
    }
  }

  private ask(what: "prefix" | null): Promise<string> {
    this.hand();
    const digest = new Promise<string>((resolve) => this.answers.push(resolve));
    this.worker.postMessage(what);
    return Promise.race([digest, this.failed]);
  }

  /** Stops the worker (when the stream fails). */
  close(): void {
    void this.worker.terminate();
  }

  private hand(): void {
    if (this.batchLength === 0) return;
    this.worker.postMessage([this.batchStart, this.batchLength]);
    this.batchStart = this.at === RING_BYTES ? 0 : this.at;
    this.batchLength = 0;
  }

  /** Free bytes in the ring, once there are some. */
  private async room(): Promise<number> {
    for (;;) {
      const done = Atomics.load(this.done, 0);
      const free = RING_BYTES - ((this.copied - done) | 0);
      if (free > 0) return free;
      // the worker is a whole ring behind (its batches are all handed over: one is at least a MiB)
      this.hand();
      const wait = waitAsync(this.done, 0, done);
      if (wait.async) await Promise.race([wait.value, this.failed]);
    }
  }
}
