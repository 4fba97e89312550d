import { DriverError } from "../errors.ts";

/** A node asking for a burnin_network partner: its uuid and the address its partner reaches it at. */
export interface PairingMember {
  node: string;
  address: string;
}

/** What a paired node is told over its agent link: its first role and its partner. */
export interface Pairing {
  group: string;
  role: "writer" | "reader";
  /** The partner's address (fio's --hostname when this node reads). */
  partner: string;
  partner_node: string;
}

interface Waiter {
  member: PairingMember;
  resolve(pairing: Pairing): void;
  reject(error: Error): void;
}

/**
 * The conductor's meeting point for burnin_network's dynamic pairing (IPA meets in a tooz group): nodes of a
 * group are matched two by two in the order they ask. As in IPA, the first of a pair is the writer (it
 * listens first, so it is ready when the second starts to read) and the second the reader. One conductor's
 * nodes pair with each other; a node never pairs with itself (asking again replaces its earlier wait).
 */
export class NetworkBurninPairing {
  private readonly waiting = new Map<string, Waiter>();

  /**
   * Waits for a partner in `group`, at most `timeoutMs`.
   * @throws DriverError when no partner asks in time, or the node asked again elsewhere; the signal's
   *   reason when it aborts.
   */
  join(
    group: string,
    member: PairingMember,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<Pairing> {
    options.signal?.throwIfAborted();
    const first = this.waiting.get(group);
    if (first !== undefined && first.member.node !== member.node) {
      this.waiting.delete(group);
      first.resolve({ group, role: "writer", partner: member.address, partner_node: member.node });
      return Promise.resolve({
        group,
        role: "reader",
        partner: first.member.address,
        partner_node: first.member.node,
      });
    }
    if (first !== undefined) {
      this.waiting.delete(group);
      first.reject(new DriverError(`burnin_network: node ${member.node} asked again for a partner`));
    }
    return new Promise<Pairing>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        if (this.waiting.get(group) === waiter) this.waiting.delete(group);
      };
      const waiter: Waiter = {
        member,
        resolve: (pairing) => (done(), resolve(pairing)),
        reject: (error) => (done(), reject(error)),
      };
      const timer = setTimeout(() => {
        const seconds = Math.round(options.timeoutMs / 1000);
        waiter.reject(
          new DriverError(
            `burnin_network: no partner joined pairing group '${group}' within ${seconds} s ` +
              "(agent_burnin_fio_network_pairing_timeout): run it on an even number of nodes at once, " +
              "or set agent_burnin_fio_network_config",
          ),
        );
      }, options.timeoutMs);
      const onAbort = () => waiter.reject(options.signal?.reason as Error);
      options.signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.set(group, waiter);
    });
  }

  /** The groups with a node waiting now (for tests and status). */
  waitingGroups(): string[] {
    return [...this.waiting.keys()];
  }
}
