import type { AgentDirectory, AgentNode } from "./directory.ts";

/** An AgentDirectory over a Map: for tests, benchmarks and the demo. Counts writes so tests can prove none happened. */
export class MemoryAgentDirectory implements AgentDirectory {
  readonly tokens = new Map<string, { digest: string; bootId: string }>();
  saveCount = 0;
  private readonly byMac = new Map<string, AgentNode>();

  /** Registers a node as expecting an agent. */
  addNode(node: { uuid: string; macs: string[]; fastTrack?: boolean; conductorGroup?: string }): void {
    for (const mac of node.macs)
      this.byMac.set(mac.toLowerCase(), {
        uuid: node.uuid,
        fastTrack: node.fastTrack ?? false,
        conductorGroup: node.conductorGroup ?? "",
      });
  }

  async lookupByMacs(macs: string[]): Promise<AgentNode | null> {
    for (const mac of macs) {
      const node = this.byMac.get(mac.toLowerCase());
      if (node) return node;
    }
    return null;
  }

  async tokenRecord(uuid: string): Promise<{ digest: string; bootId: string } | null> {
    return this.tokens.get(uuid) ?? null;
  }

  /** What the conductor does when it boots the node into the ramdisk: the next boot's hello gets a fresh token. */
  clearToken(uuid: string): void {
    const retired = this.tokens.get(uuid)?.bootId;
    this.tokens.delete(uuid);
    if (retired === undefined) return;
    for (const [mac, node] of this.byMac)
      if (node.uuid === uuid) this.byMac.set(mac, { ...node, retiredBootId: retired });
  }

  async saveToken(uuid: string, record: { digest: string; bootId: string }): Promise<void> {
    this.saveCount += 1;
    this.tokens.set(uuid, { ...record });
  }
}
