import { hash } from "node:crypto";

/** Points per member: Ironic's hash_partition_exponent is 5 (32); 2^7 gives a tighter balance for little cost. */
export const DEFAULT_PARTITION_EXPONENT = 7;

/** Where keys placed before are: every detail page places each of its 1,000 nodes (its `conductor`) again. */
const placed = new Map<string, number>();
/** More keys than a fleet of 10^5 nodes has; past it the cache starts again (about 11 MiB when full). */
const PLACED_MAX = 1 << 17;

/** 48 bits of MD5: plenty to place a few thousand points without collisions, and exact in a JS number. */
function position(key: string): number {
  let at = placed.get(key);
  if (at === undefined) {
    // NOTE: the one-shot hash's hex, not createHash's digest: 1.0 ms a page of 1,000 that way, 0.4 ms this way
    at = parseInt(hash("md5", key, "hex").slice(0, 12), 16);
    if (placed.size >= PLACED_MAX) placed.clear();
    placed.set(key, at);
  }
  return at;
}

/**
 * Consistent hashing as Ironic's hash_ring (over tooz's HashRing): every member is placed at 2^exponent
 * points on a circle by MD5("member-i"); a key belongs to the first member clockwise of MD5(key). Removing
 * a member hands each of its keys to the next member clockwise, so only its own keys move; adding one
 * takes about 1/N of the keys, from every member. Pure.
 */
export class HashRing {
  private readonly points: number[];
  private readonly owners: string[];
  readonly members: readonly string[];

  constructor(members: Iterable<string>, partitionExponent = DEFAULT_PARTITION_EXPONENT) {
    this.members = [...new Set(members)].sort();
    const placed: [number, string][] = [];
    const perMember = 2 ** partitionExponent;
    for (const member of this.members) {
      for (let i = 0; i < perMember; i++) placed.push([position(`${member}-${i}`), member]);
    }
    // ties (astronomically rare) resolve by member name, so every conductor builds the same ring
    placed.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    this.points = placed.map((p) => p[0]);
    this.owners = placed.map((p) => p[1]);
  }

  /** Index of the first point at or after the key's position, wrapping to 0. */
  private partition(key: string): number {
    const at = position(key);
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.points[mid] as number) < at) lo = mid + 1;
      else hi = mid;
    }
    return lo === this.points.length ? 0 : lo;
  }

  /**
   * Up to `replicas` distinct members for the key, owner first; the second is who takes over when the owner
   * leaves. Empty for an empty ring.
   */
  lookup(key: string, replicas = 1): string[] {
    const found: string[] = [];
    if (this.points.length === 0) return found;
    // NOTE: one member owns every key: no hash needed. A lone conductor shows every node's `conductor` field
    // through here, and the MD5 was ~20 µs of each POST /v1/nodes (cpu profile, bench:api).
    if (this.members.length === 1) return [this.members[0] as string];
    const want = Math.min(replicas, this.members.length);
    for (let i = this.partition(key); found.length < want; i = (i + 1) % this.points.length) {
      const member = this.owners[i] as string;
      if (!found.includes(member)) found.push(member);
    }
    return found;
  }

  /** The key's owner (lookup's first, without its array), or undefined for an empty ring. */
  ownerOf(key: string): string | undefined {
    if (this.members.length <= 1) return this.members[0];
    return this.owners[this.partition(key)];
  }
}

/** One ring per conductor group (Ironic's conductor_group): a node is served only by its group's members. */
export class GroupedRings {
  private readonly rings: Map<string, HashRing>;

  constructor(membersByGroup: ReadonlyMap<string, readonly string[]>, partitionExponent?: number) {
    this.rings = new Map(
      [...membersByGroup].map(([group, members]) => [group, new HashRing(members, partitionExponent)]),
    );
  }

  /** The owner of a node in `group`, or undefined when no live conductor serves that group. */
  ownerOf(nodeUuid: string, group: string): string | undefined {
    return this.rings.get(group)?.ownerOf(nodeUuid);
  }

  groups(): string[] {
    return [...this.rings.keys()];
  }
}
