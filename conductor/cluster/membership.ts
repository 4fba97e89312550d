import { randomBytes } from "node:crypto";
import { hostname as machineName } from "node:os";
import type { ConductorRecord } from "../../shared/resources.ts";
import type { Logger } from "../../shared/log.ts";
import type { Store } from "../db/store.ts";
import { GroupedRings } from "./hash-ring.ts";

export interface MembershipOptions {
  /** --name: Ironic's conductor hostname. */
  hostname: string;
  group: string;
  drivers: readonly string[];
  heartbeatIntervalS: number;
  /** A conductor whose last heartbeat is older than this is dead (Ironic: 60 s). */
  deadAfterS: number;
  partitionExponent?: number;
  logger: Logger;
  now?: () => number;
  /**
   * How this conductor serves (its TLS mode): a member registered under the other scheme is refused at join
   * and never owns nodes here, so no agent or forwarded call is sent to it in the clear. Default "http:".
   */
  scheme?: "http:" | "https:";
}

/** A live conductor of the cluster serves under the other TLS mode than this one (https vs http). */
export class ClusterTlsMismatch extends Error {
  constructor(scheme: string, others: readonly { hostname: string; url: string }[]) {
    super(
      `this conductor serves ${scheme.replace(":", "")} but the cluster's live members ${others
        .map((o) => `${o.hostname} (${o.url})`)
        .join(", ")} do not: every conductor of a cluster runs with TLS or none does; refusing to join`,
    );
    this.name = "ClusterTlsMismatch";
  }
}

/** The scheme of a registered URL ("http:", "https:"), or null for none or an unparsable one. */
function schemeOf(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).protocol;
  } catch {
    return null;
  }
}

/** Where a node lives on the ring: its uuid and conductor group. */
export interface RingKey {
  uuid: string;
  conductor_group: string;
}

/** Is a process on this machine still running? (signal 0 probes without signalling) */
function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error instanceof Error && "code" in error && error.code === "EPERM";
  }
}

/**
 * This conductor's place in the cluster: its unique identity (hostname + a random instance id, so two
 * processes never share one and a restart never inherits live locks), its heartbeat, the live members, and
 * the hash rings built from them (one per conductor group) that say which conductor owns which node.
 */
export class Membership {
  readonly identity: string;
  private readonly now: () => number;
  private rows: ConductorRecord[] = [];
  private rings = new GroupedRings(new Map());
  private ringShape = "";
  private liveShape = "";
  private liveGeneration = 0;
  /** Members already reported as serving under the other TLS mode (said once each). */
  private readonly refusedTls = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly options: MembershipOptions,
  ) {
    this.identity = `${options.hostname}/${randomBytes(4).toString("hex")}`;
    this.now = options.now ?? Date.now;
  }

  get hostname(): string {
    return this.options.hostname;
  }

  /**
   * Registers this process. A predecessor under the same name that crashed on this machine (its pid is gone)
   * is retired at once, so a restart takes over its locks without waiting for the heartbeat timeout.
   * @throws ConductorAlreadyRegistered while a live conductor has the same name
   */
  async join(url: string | null): Promise<void> {
    await this.refresh();
    const mismatched = this.alive().filter((r) => r.url !== null && !this.sameTlsMode(r));
    if (mismatched.length > 0)
      throw new ClusterTlsMismatch(this.scheme, mismatched as { hostname: string; url: string }[]);
    const here = machineName();
    const crashed = (await this.store.listConductors())
      .filter((r) => r.online && r.hostname === this.options.hostname)
      .filter((r) => r.machine === here && r.pid !== process.pid && !processRunning(r.pid))
      .map((r) => r.identity);
    const now = this.now();
    await this.store.registerConductor(
      {
        identity: this.identity,
        hostname: this.options.hostname,
        conductor_group: this.options.group,
        drivers: [...this.options.drivers],
        url,
        machine: here,
        pid: process.pid,
        created_at: new Date(now).toISOString(),
        heartbeat_at: now,
        online: true,
      },
      { staleBefore: now - this.options.deadAfterS * 1000, retire: crashed },
    );
    await this.refresh();
    // every start adds an identity: dead ones that hold no lock go (each name keeps its latest row)
    const pruned = await this.store.pruneConductors(this.deadIdentities());
    if (pruned.length > 0) {
      this.options.logger.info({ identities: pruned.length }, "removed dead conductors' registrations");
      await this.refresh();
    }
  }

  /** Heartbeat (with the URL other conductors forward to, once listening), then a fresh view of the members. */
  async heartbeat(url?: string): Promise<void> {
    if (!(await this.store.touchConductor(this.identity, this.now(), url))) {
      // Others may already have taken our nodes; our writes are still fenced by the reservations.
      this.options.logger.error(
        { identity: this.identity },
        "this conductor's registration is gone or offline",
      );
    }
    await this.refresh();
  }

  async leave(): Promise<void> {
    await this.store.retireConductor(this.identity);
  }

  isAlive(record: ConductorRecord): boolean {
    return record.online && this.now() - record.heartbeat_at < this.options.deadAfterS * 1000;
  }

  /**
   * Grows by one whenever the set of live identities changes (a conductor joined, died, or restarted under
   * the same name): work that only a death or a join can create (adopting boot files) looks again then.
   */
  get generation(): number {
    return this.liveGeneration;
  }

  /** Re-reads the members; rebuilds the rings when the live set changed. */
  async refresh(): Promise<void> {
    this.rows = await this.store.listConductors();
    const live = JSON.stringify(
      this.alive()
        .map((r) => r.identity)
        .sort(),
    );
    if (live !== this.liveShape) {
      this.liveShape = live;
      this.liveGeneration += 1;
    }
    const byGroup = new Map<string, string[]>();
    for (const row of this.alive()) {
      if (!this.sameTlsMode(row)) {
        if (this.refusedTls.has(row.identity)) continue;
        this.refusedTls.add(row.identity);
        this.options.logger.error(
          { conductor: row.hostname, url: row.url, scheme: this.scheme },
          "a live conductor serves under the other TLS mode: it owns no nodes here and gets no calls or agents",
        );
        continue;
      }
      byGroup.set(row.conductor_group, [...(byGroup.get(row.conductor_group) ?? []), row.hostname]);
    }
    const shape = JSON.stringify([...byGroup].sort());
    if (shape !== this.ringShape) {
      if (this.ringShape !== "")
        this.options.logger.info({ members: Object.fromEntries(byGroup) }, "ring changed");
      this.ringShape = shape;
      this.rings = new GroupedRings(byGroup, this.options.partitionExponent);
    }
  }

  private get scheme(): string {
    return this.options.scheme ?? "http:";
  }

  /**
   * Whether a member serves under this conductor's TLS mode. A member without a URL yet (it has not
   * finished starting) is given the benefit: it cannot be sent anything until it registers one.
   */
  sameTlsMode(record: ConductorRecord): boolean {
    return record.url === null || record.identity === this.identity || schemeOf(record.url) === this.scheme;
  }

  /** Every registered conductor as last read (online or not). */
  all(): readonly ConductorRecord[] {
    return this.rows;
  }

  /** The registered identities that are not alive (as last read): the only holders a lock can be orphaned by. */
  deadIdentities(): string[] {
    return this.rows.filter((r) => !this.isAlive(r)).map((r) => r.identity);
  }

  alive(): ConductorRecord[] {
    return this.rows.filter((r) => this.isAlive(r));
  }

  /** Is this identity (a reservation holder) a live conductor? Unknown identities are not. */
  isLiveIdentity(identity: string): boolean {
    return this.rows.some((r) => r.identity === identity && this.isAlive(r));
  }

  /** The live conductor that owns the node, or undefined when none serves its group. */
  ownerOf(node: RingKey): ConductorRecord | undefined {
    const hostname = this.rings.ownerOf(node.uuid, node.conductor_group);
    // the first live row of that name, as alive().find would give, without a new array per node
    return hostname === undefined
      ? undefined
      : this.rows.find((r) => r.hostname === hostname && this.isAlive(r));
  }

  /** Does this conductor own the node? */
  owns(node: RingKey): boolean {
    return this.rings.ownerOf(node.uuid, node.conductor_group) === this.options.hostname;
  }
}
