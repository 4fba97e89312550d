import type { WireError } from "../../shared/errors.ts";

/** A result frame's outcome, as the agent sent it. */
export type ResultOutcome = { ok: true; value: unknown } | { ok: false; error: WireError };

interface Kept {
  uuid: string;
  outcome: ResultOutcome;
  bytes: number;
  at: number;
}

export interface UnclaimedLimits {
  /** Results kept per node (the oldest goes first). */
  perNode: number;
  /** Results and bytes kept in all (the oldest goes first). */
  total: number;
  totalBytes: number;
  /** A result older than this is not handed out. */
  maxAgeMs: number;
}

export const DEFAULT_UNCLAIMED_LIMITS: UnclaimedLimits = {
  perNode: 4,
  total: 1024,
  totalBytes: 8 * 1024 * 1024,
  maxAgeMs: 60 * 60 * 1000,
};

/**
 * Results that arrived for a command id no call here waits for: after a takeover, the agent re-sends what
 * it finished for the dead conductor before the new owner's step asks again for that id. Kept, bounded, until
 * a call with the id claims it (only for the node whose agent sent it).
 */
export class UnclaimedResults {
  private readonly kept = new Map<string, Kept>();
  private bytes = 0;

  constructor(
    private readonly limits: UnclaimedLimits = DEFAULT_UNCLAIMED_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.kept.size;
  }

  keep(id: string, uuid: string, outcome: ResultOutcome): void {
    const bytes = id.length + (JSON.stringify(outcome)?.length ?? 0);
    if (bytes > this.limits.totalBytes) return;
    this.drop(id);
    this.kept.set(id, { uuid, outcome, bytes, at: this.now() });
    this.bytes += bytes;
    // the node's oldest beyond its share, then anyone's oldest beyond the bounds (a scan of at most `total`)
    const mine = [...this.kept].filter(([, k]) => k.uuid === uuid);
    for (const [oldId] of mine.slice(0, Math.max(0, mine.length - this.limits.perNode))) this.drop(oldId);
    for (const [oldId] of this.kept) {
      if (this.bytes <= this.limits.totalBytes && this.kept.size <= this.limits.total) break;
      this.drop(oldId);
    }
  }

  /** The result for `id` sent by `uuid`'s agent, removed; undefined when none (or too old). */
  claim(id: string, uuid: string): ResultOutcome | undefined {
    const kept = this.kept.get(id);
    if (!kept || kept.uuid !== uuid) return undefined;
    this.drop(id);
    return this.now() - kept.at <= this.limits.maxAgeMs ? kept.outcome : undefined;
  }

  private drop(id: string): void {
    const kept = this.kept.get(id);
    if (!kept) return;
    this.kept.delete(id);
    this.bytes -= kept.bytes;
  }
}
