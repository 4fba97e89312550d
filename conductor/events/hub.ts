import { maskSecrets } from "../../shared/secrets.ts";

/** One change the event stream carries. */
export interface ConductorEvent {
  type: string;
  node: string;
  [key: string]: unknown;
}

type Listener = (event: ConductorEvent & { seq: number; at: string }) => void;

/**
 * In-process fan-out of node events, synchronous and unbuffered: each listener must return at once and
 * bound its own backlog (the SSE endpoint disconnects a subscriber that stops reading).
 */
export class EventHub {
  private readonly listeners = new Set<Listener>();
  /** In-process consumers (metrics): told of every event, not counted as subscribers. */
  private readonly observers = new Set<Listener>();
  private seq = 0;

  publish(event: ConductorEvent): void {
    // masked here, once: whatever carries events out (SSE, logs) never sees a secret
    const stamped = { ...maskSecrets(event), seq: ++this.seq, at: new Date().toISOString() };
    for (const observer of this.observers) observer(stamped);
    for (const listener of this.listeners) listener(stamped);
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Like subscribe, for the conductor's own bookkeeping: not counted in `subscribers`. */
  observe(observer: Listener): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  get subscribers(): number {
    return this.listeners.size;
  }
}
