/**
 * A min-heap of (key, a, b) number triples in typed arrays, ordered by key: the qcow2 converter's
 * "what happens when host cluster K passes" queue. Host clusters stream past in ascending order, so the
 * converter only ever asks for the smallest key. Typed columns cost 24 bytes an entry (a Map of objects
 * cost 50+), push and pop are O(log n), and every growth is first reserved from a budget that several
 * queues share (it throws when spent).
 */
const ENTRY_BYTES = 24;

export class ClusterQueue {
  size = 0;
  private keys: Float64Array;
  private as: Float64Array;
  private bs: Float64Array;

  constructor(private readonly budget: { reserve(bytes: number): void }) {
    const initial = 64;
    budget.reserve(initial * ENTRY_BYTES);
    this.keys = new Float64Array(initial);
    this.as = new Float64Array(initial);
    this.bs = new Float64Array(initial);
  }

  /** The smallest key, or Infinity when empty. */
  peekKey(): number {
    return this.size === 0 ? Infinity : (this.keys[0] as number);
  }

  push(key: number, a: number, b = 0): void {
    if (this.size === this.keys.length) this.grow();
    let at = this.size++;
    // Sift up: move parents down until the new key's place is found.
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if ((this.keys[parent] as number) <= key) break;
      this.move(parent, at);
      at = parent;
    }
    this.keys[at] = key;
    this.as[at] = a;
    this.bs[at] = b;
  }

  /** Removes the smallest entry; `into` receives its columns. Call only when size > 0. */
  pop(into: { key: number; a: number; b: number }): void {
    into.key = this.keys[0] as number;
    into.a = this.as[0] as number;
    into.b = this.bs[0] as number;
    const last = --this.size;
    if (last === 0) return;
    const key = this.keys[last] as number;
    const a = this.as[last] as number;
    const b = this.bs[last] as number;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= last) break;
      if (child + 1 < last && (this.keys[child + 1] as number) < (this.keys[child] as number)) child += 1;
      if ((this.keys[child] as number) >= key) break;
      this.move(child, at);
      at = child;
    }
    this.keys[at] = key;
    this.as[at] = a;
    this.bs[at] = b;
  }

  private move(from: number, to: number): void {
    this.keys[to] = this.keys[from] as number;
    this.as[to] = this.as[from] as number;
    this.bs[to] = this.bs[from] as number;
  }

  private grow(): void {
    const capacity = this.keys.length * 2;
    this.budget.reserve((capacity - this.keys.length) * ENTRY_BYTES);
    const widen = (column: Float64Array): Float64Array => {
      const wider = new Float64Array(capacity);
      wider.set(column);
      return wider;
    };
    this.keys = widen(this.keys);
    this.as = widen(this.as);
    this.bs = widen(this.bs);
  }
}
