/** How many agent connections the gateway holds, in total and from one source address. */
export interface ConnectionCapsOptions {
  maxConnections: number;
  maxConnectionsPerSource: number;
}

export type CapDecision = { ok: true } | { ok: false; status: 429 | 503; message: string };

/**
 * Counts open agent connections per source address. The gateway asks before it accepts an upgrade and
 * tells it when a connection closes, so a refused peer never costs more than an HTTP answer.
 */
export class ConnectionCaps {
  private readonly perSource = new Map<string, number>();
  private total = 0;

  constructor(private readonly options: ConnectionCapsOptions) {}

  /** Takes a slot for `source`, or says why not (the caller answers the upgrade with the status). */
  tryOpen(source: string): CapDecision {
    if (this.total >= this.options.maxConnections) {
      return { ok: false, status: 503, message: "The conductor holds as many agent connections as it may." };
    }
    const mine = this.perSource.get(source) ?? 0;
    if (mine >= this.options.maxConnectionsPerSource) {
      return { ok: false, status: 429, message: "Too many agent connections from this address." };
    }
    this.perSource.set(source, mine + 1);
    this.total += 1;
    return { ok: true };
  }

  /** Gives back a slot taken by tryOpen. */
  close(source: string): void {
    const mine = this.perSource.get(source) ?? 0;
    if (mine <= 0) return;
    if (mine === 1) this.perSource.delete(source);
    else this.perSource.set(source, mine - 1);
    this.total -= 1;
  }

  get open(): number {
    return this.total;
  }
}
