import { newNode } from "../../conductor/operations/node-record.ts";
import type { AgentControl } from "../../conductor/drivers/agent-control.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { driverRegistry, type HardwareType } from "../../conductor/drivers/hardware-type.ts";
import type { DeployInterface } from "../../conductor/drivers/interfaces.ts";
import { fakeRaid } from "../../conductor/drivers/raid/fake.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import type { Step } from "../../conductor/drivers/step.ts";
import { Provisioner } from "../../conductor/operations/provisioner.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { silentLogger } from "../../shared/log.ts";

/** An agent double: connected or not, records calls, answers get_*_steps with a configurable list. */
export class FakeAgents implements AgentControl {
  readonly connected = new Set<string>();
  readonly calls: { name: string; args: unknown; id?: string }[] = [];
  reported: unknown = { clean_steps: [] };
  /** Commands that never answer (their conductor dies before the agent's result comes). */
  readonly stalled = new Set<string>();

  isConnected(uuid: string): boolean {
    return this.connected.has(uuid);
  }

  async call(
    _uuid: string,
    command: { name: string; args: unknown },
    options: { id?: string } = {},
  ): Promise<unknown> {
    this.calls.push({ ...command, ...(options.id === undefined ? {} : { id: options.id }) });
    if (command.name.startsWith("get_") && command.name.endsWith("_steps")) return this.reported;
    if (this.stalled.has(command.name)) return new Promise(() => undefined);
    return { answered: command.name };
  }
}

/**
 * A provisioner over an in-memory SQLite store and a hardware type whose deploy interface declares the given
 * steps (fake power, management, boot; fake RAID beside them). `restart()` builds a new provisioner on the
 * same store, as a conductor restart would.
 */
export function stepHarness(options: { steps: Step[]; inBand?: boolean; fastTrack?: boolean }) {
  const config = defaultConfig({ fakeDelayMs: 0, agent: { fastTrack: options.fastTrack ?? false } });
  const store = new SqliteStore(":memory:");
  const agents = new FakeAgents();
  const events: { type: string; [key: string]: unknown }[] = [];
  const deploy: DeployInterface = { name: "fake", inBand: options.inBand ?? false, steps: options.steps };
  const hw: HardwareType = { ...fakeHardware(config), deploy: [deploy], raid: [fakeRaid] };
  const build = (): Provisioner =>
    new Provisioner(
      {
        store,
        holder: "test-conductor",
        logger: silentLogger,
        agents,
        config,
        publicUrl: () => "http://127.0.0.1:1",
        publish: (event) => events.push(event),
      },
      driverRegistry([hw]),
      () => "http://signed.invalid/",
    );
  const harness = {
    store,
    agents,
    events,
    provisioner: build(),
    /** A crash and a new start: the old provisioner's work is left hanging, as a dead process's would be. */
    restart(): Provisioner {
      harness.provisioner = build();
      return harness.provisioner;
    },
    async createNode(state: NodeRecord["provision_state"] = "manageable"): Promise<NodeRecord> {
      const node = newNode({ driver: "fake-hardware" }, hw);
      return store.createNode({ ...node, provision_state: state, power_state: "power off" });
    },
    async node(uuid: string): Promise<NodeRecord> {
      const node = await store.getNode(uuid);
      if (!node) throw new Error(`node ${uuid} vanished`);
      return node;
    },
  };
  return harness;
}
