import { randomBytes, randomUUID } from "node:crypto";
import type { Logger } from "../../shared/log.ts";
import { SWARM_CHUNK_BYTES } from "../../shared/swarm.ts";
import type { SwarmAnswer, SwarmDropReason, SwarmPeer } from "../../shared/swarm.ts";

export interface SwarmTrackerOptions {
  logger: Logger;
  chunkBytes?: number;
  /** How long an agent waits for a chunk's assignee before it takes the chunk from the store. Default 30 s. */
  assigneeWaitMs?: number;
  /** Peers named per answer. Default 4. */
  peersPerAnswer?: number;
  /**
   * Store fetches one member makes at once while other members could take the next chunks. Default 1: in a
   * wave moving in step, the first asker took every chunk of its read-ahead window, then fed all the others
   * alone (an 8-node 64 MiB wave spent 5.4 s where its store needed 1.8 s).
   */
  storeFetchesPerMember?: number;
  /** Told of what an operator should see: a peer dropped for bad bytes, store bytes that disagree. */
  onEvent?: (event: SwarmTrackerEvent) => void;
}

export interface SwarmTrackerEvent {
  type: "swarm.peer_dropped" | "swarm.anchor_conflict";
  node: string;
  wave: string;
  index: number;
  peer?: string;
  reason?: string;
}

export interface SwarmJoin {
  image: string;
  checksum?: string | undefined;
  size: number;
  endpoint: string;
}

interface Member {
  node: string;
  url: string;
  holds: Set<number>;
  /** Answers that named this member as a peer: the next answers prefer the least named. */
  named: number;
}

interface Waiter {
  node: string;
  resolve: (answer: SwarmAnswer) => void;
  timer: NodeJS.Timeout;
}

interface Wave {
  id: string;
  key: string;
  token: string;
  chunks: number;
  members: Map<string, Member>;
  /** The first SHA-256 an assignee reported from the store's bytes, per chunk: what peers' bytes must match. */
  anchors: Map<number, string>;
  /** The member fetching each chunk from the store now. */
  assignees: Map<number, string>;
  waiters: Map<number, Waiter[]>;
  /** Peers that served bytes not matching the anchor: never named again in this wave. */
  banned: Set<string>;
}

/**
 * The conductor's side of swarm deploys: groups agents writing the same image (URL without query, checksum,
 * size) with peer links of the same kind (TLS or plain) into a wave, and per chunk knows who holds it, its anchor hash and who fetches it from the store. A
 * chunk nobody holds is assigned to the first agent asking; later askers wait (bounded) for its assignee,
 * then get the peers that hold it. State is in memory: a restarted conductor forgets its waves, and agents
 * then finish from the store.
 */
export class SwarmTracker {
  private readonly waves = new Map<string, Wave>();
  private readonly byKey = new Map<string, Wave>();
  private readonly chunkBytes: number;
  private readonly waitMs: number;
  private readonly peersPerAnswer: number;
  private readonly fetchesPerMember: number;

  constructor(private readonly options: SwarmTrackerOptions) {
    this.chunkBytes = options.chunkBytes ?? SWARM_CHUNK_BYTES;
    this.waitMs = options.assigneeWaitMs ?? 30_000;
    this.peersPerAnswer = options.peersPerAnswer ?? 4;
    this.fetchesPerMember = options.storeFetchesPerMember ?? 1;
  }

  /**
   * Adds the node to the image's wave (creating it), and answers with the wave's id and token. TLS (https://)
   * and plain endpoints never share a wave: a TLS wave's token (its peers' key) is never handed to a member
   * whose peers are dialled in the clear, nor a TLS member sent to a plain peer.
   */
  join(node: string, request: SwarmJoin): SwarmAnswer {
    const scheme = new URL(request.endpoint).protocol;
    const key = `${scheme}\n${request.image}\n${request.checksum ?? ""}\n${request.size}`;
    let wave = this.byKey.get(key);
    if (wave === undefined) {
      wave = {
        id: randomUUID(),
        key,
        token: randomBytes(32).toString("base64url"),
        chunks: Math.ceil(request.size / this.chunkBytes),
        members: new Map(),
        anchors: new Map(),
        assignees: new Map(),
        waiters: new Map(),
        banned: new Set(),
      };
      this.waves.set(wave.id, wave);
      this.byKey.set(key, wave);
    }
    // A node in another wave (an earlier deploy it never left) leaves it first.
    this.leave(node);
    wave.members.set(node, { node, url: request.endpoint, holds: new Set(), named: 0 });
    this.options.logger.info(
      { node, wave: wave.id, members: wave.members.size },
      "agent joined a swarm wave",
    );
    return { kind: "joined", wave: wave.id, token: wave.token, chunk_bytes: this.chunkBytes };
  }

  /** Where `node` gets chunk `index`: peers that hold it, the store (assignee or fallback), after a bounded wait. */
  ask(node: string, waveId: string, index: number): Promise<SwarmAnswer> {
    const wave = this.waves.get(waveId);
    if (wave === undefined || !wave.members.has(node))
      return Promise.resolve({ kind: "refused", message: "not a member of this wave" });
    if (index >= wave.chunks)
      return Promise.resolve({ kind: "refused", message: `chunk ${index} is past the image's end` });
    const peers = this.peersAnswer(wave, node, index);
    if (peers) return Promise.resolve(peers);
    const assignee = wave.assignees.get(index);
    if (assignee === node) return Promise.resolve({ kind: "store" });
    if ((assignee === undefined || !wave.members.has(assignee)) && this.mayFetch(wave, node)) {
      wave.assignees.set(index, node);
      return Promise.resolve({ kind: "store" });
    }
    // Someone else fetches it, or nobody yet and this member already fetches its share: the chunk goes to
    // the next member that asks for it with a free hand, or to this one once its own fetch is done.
    return new Promise((resolve) => {
      const waiter: Waiter = {
        node,
        resolve,
        timer: setTimeout(() => {
          this.removeWaiter(wave, index, waiter);
          resolve({ kind: "store" });
        }, this.waitMs),
      };
      const list = wave.waiters.get(index) ?? [];
      list.push(waiter);
      wave.waiters.set(index, list);
    });
  }

  /** `node` holds chunk `index`, hashing to sha256; from the store, the first such hash becomes the anchor. */
  have(node: string, held: { wave: string; index: number; sha256: string; store: boolean }): void {
    const { index, sha256, store: fromStore } = held;
    const wave = this.waves.get(held.wave);
    const member = wave?.members.get(node);
    if (wave === undefined || member === undefined || index >= wave.chunks) return;
    if (wave.assignees.get(index) === node) {
      wave.assignees.delete(index);
      this.handOut(wave, node);
    }
    const anchor = wave.anchors.get(index);
    if (anchor === undefined && fromStore) wave.anchors.set(index, sha256);
    else if (anchor !== sha256) {
      // Two agents read different bytes from the store for one range (the object changed, or one lies):
      // the whole-image checksum decides for each; this holder is not named to others.
      this.options.logger.warn({ node, wave: wave.id, index }, "swarm chunk hash differs from its anchor");
      this.options.onEvent?.({ type: "swarm.anchor_conflict", node, wave: wave.id, index });
      this.wake(wave, index);
      return;
    }
    member.holds.add(index);
    this.wake(wave, index);
  }

  /** A chunk `node` no longer holds or failed to fetch, or a peer that failed it. */
  drop(node: string, waveId: string, drop: { index: number; peer?: string; reason: SwarmDropReason }): void {
    const wave = this.waves.get(waveId);
    const member = wave?.members.get(node);
    if (wave === undefined || member === undefined) return;
    const { index, peer, reason } = drop;
    if (peer === undefined) {
      member.holds.delete(index);
      if (wave.assignees.get(index) === node) {
        wave.assignees.delete(index);
        this.wake(wave, index);
        this.handOut(wave, node);
      }
      return;
    }
    if (reason === "bad_bytes" && !wave.banned.has(peer)) {
      wave.banned.add(peer);
      this.options.logger.warn(
        { node, peer, wave: wave.id, index },
        "swarm peer served bytes not matching the anchor: dropped for the wave",
      );
      this.options.onEvent?.({ type: "swarm.peer_dropped", node, wave: wave.id, index, peer, reason });
    } else if (reason !== "bad_bytes") {
      // unreachable or stalled for this one: it is not named for this chunk again
      wave.members.get(peer)?.holds.delete(index);
    }
  }

  /**
   * Takes `node` out of wave `waveId` (it finished and stopped serving, or failed), or out of every wave (its
   * link closed); its assigned chunks move on. A leave names its wave: an agent still serving an earlier
   * wave's chunks (its linger time) while it writes the next image leaves the earlier wave only.
   */
  leave(node: string, waveId?: string): void {
    for (const wave of this.waves.values()) {
      if (waveId !== undefined && wave.id !== waveId) continue;
      if (!wave.members.delete(node)) continue;
      for (const [index, list] of wave.waiters) {
        for (const waiter of list.filter((w) => w.node === node)) {
          this.removeWaiter(wave, index, waiter);
          waiter.resolve({ kind: "refused", message: "left the wave" });
        }
      }
      for (const [index, assignee] of [...wave.assignees]) {
        if (assignee !== node) continue;
        wave.assignees.delete(index);
        this.wake(wave, index);
      }
      if (wave.members.size === 0) {
        this.waves.delete(wave.id);
        this.byKey.delete(wave.key);
      }
    }
  }

  /** Waves and their member counts (tests, metrics). */
  stats(): Array<{ wave: string; members: number; anchors: number }> {
    return [...this.waves.values()].map((w) => ({
      wave: w.id,
      members: w.members.size,
      anchors: w.anchors.size,
    }));
  }

  close(): void {
    for (const node of new Set([...this.waves.values()].flatMap((w) => [...w.members.keys()])))
      this.leave(node);
  }

  /** Whether `node` may take one more chunk from the store: under its share, or alone in the wave. */
  private mayFetch(wave: Wave, node: string): boolean {
    if (wave.members.size <= 1) return true;
    let fetching = 0;
    for (const assignee of wave.assignees.values()) if (assignee === node) fetching += 1;
    return fetching < this.fetchesPerMember;
  }

  /** `node` finished a store fetch: the first chunk it waits for that nobody fetches becomes its own. */
  private handOut(wave: Wave, node: string): void {
    for (const [index, list] of wave.waiters) {
      if (!this.mayFetch(wave, node)) return;
      const assignee = wave.assignees.get(index);
      if (assignee !== undefined && wave.members.has(assignee)) continue;
      const waiter = list.find((w) => w.node === node);
      if (waiter === undefined) continue;
      this.removeWaiter(wave, index, waiter);
      wave.assignees.set(index, node);
      waiter.resolve({ kind: "store" });
    }
  }

  private peersAnswer(wave: Wave, node: string, index: number): SwarmAnswer | undefined {
    const sha256 = wave.anchors.get(index);
    if (sha256 === undefined) return undefined;
    const holders = [...wave.members.values()]
      .filter((m) => m.node !== node && m.holds.has(index) && !wave.banned.has(m.node))
      .sort((a, b) => a.named - b.named)
      .slice(0, this.peersPerAnswer);
    if (holders.length === 0) return undefined;
    for (const holder of holders) holder.named += 1;
    const peers: SwarmPeer[] = holders.map((m) => ({ node: m.node, url: m.url }));
    return { kind: "peers", sha256, peers };
  }

  /** Answers the chunk's waiters: with peers when some hold it, else the first becomes its assignee. */
  private wake(wave: Wave, index: number): void {
    const list = wave.waiters.get(index);
    if (list === undefined) return;
    wave.waiters.delete(index);
    for (const waiter of list) {
      clearTimeout(waiter.timer);
      const peers = this.peersAnswer(wave, waiter.node, index);
      if (peers) {
        waiter.resolve(peers);
        continue;
      }
      const assignee = wave.assignees.get(index);
      if ((assignee === undefined || !wave.members.has(assignee)) && this.mayFetch(wave, waiter.node)) {
        wave.assignees.set(index, waiter.node);
        waiter.resolve({ kind: "store" });
        continue;
      }
      // still someone else's to fetch: wait again (a fresh bound)
      waiter.timer = setTimeout(() => {
        this.removeWaiter(wave, index, waiter);
        waiter.resolve({ kind: "store" });
      }, this.waitMs);
      const again = wave.waiters.get(index) ?? [];
      again.push(waiter);
      wave.waiters.set(index, again);
    }
  }

  private removeWaiter(wave: Wave, index: number, waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const list = wave.waiters.get(index);
    if (list === undefined) return;
    const rest = list.filter((w) => w !== waiter);
    if (rest.length === 0) wave.waiters.delete(index);
    else wave.waiters.set(index, rest);
  }
}
