import { z } from "zod";
import { BurninCpuArgs, BurninDiskArgs, BurninMemoryArgs, BurninNetworkArgs } from "./burnin.ts";
import { EraseMetadataOptionsSchema, EraseOptionsSchema } from "./erase.ts";
import { WriteImageRequestSchema } from "./image.ts";
import { LogicalDiskSchema, RaidConfigSchema } from "./raid.ts";
import { RootDeviceHintsSchema } from "./root-device.ts";
import type { StepDescriptor, StepInterface } from "./steps.ts";

/**
 * The one catalogue of agent commands and the steps they serve (IPA's `@async_command(name, validator)` and
 * Ironic's `@clean_step(priority=…, argsinfo=…)` in one declaration). The wire protocol's command list and
 * argument schemas, the agent's get_clean_steps / get_deploy_steps answer and the conductor's in-band step
 * descriptors are all derived from it, so they cannot disagree. The agent binds a handler to each name.
 */

export type ArgsSchema = z.ZodObject<z.ZodRawShape>;

/** A clean, deploy or service step an agent command serves. */
export interface AgentStepDeclaration {
  kind: "clean" | "deploy" | "service";
  interface: StepInterface;
  step: string;
  /** The default priority; 0 runs only when asked for (manual cleaning, deploy_steps). */
  priority: number;
  /** Whether an abort may interrupt it while it runs. */
  abortable?: boolean;
  /**
   * The step's own arguments (an operator's `args`), from which argsinfo is derived. Absent: the step takes
   * the command's arguments as they are, and the conductor forwards them to the command.
   */
  args?: ArgsSchema;
  /** Step arguments the step accepts, for documentation; a unit test parses it. */
  example: Record<string, unknown>;
}

/** One agent command: its wire arguments, whether it only reads, and the steps it serves. */
export interface AgentCommandDeclaration {
  args: z.ZodType;
  /** Read-only commands may run while a mutating one is in flight. */
  readOnly: boolean;
  /** Arguments the command accepts, for documentation; a unit test parses it. */
  example: unknown;
  steps: readonly AgentStepDeclaration[];
}

const NoArgs = z.object({}).strict();
const BootModeArg = z.enum(["uefi", "bios"]);
const WithRootDevice = z.object({ root_device: RootDeviceHintsSchema.nullable().optional() });
const DiskList = z.array(z.string().min(1).max(4096)).max(256);

/** Ironic's create_configuration arguments. */
export const CreateConfigurationArgs = z
  .object({
    create_root_volume: z.boolean().optional().describe("Create the root volume (default true)"),
    create_nonroot_volumes: z.boolean().optional().describe("Create the non-root volumes (default true)"),
    delete_existing: z.boolean().optional().describe("Delete the existing volumes first"),
  })
  .strict();

/** Ironic's apply_configuration (a deploy step) arguments. */
export const ApplyConfigurationArgs = z
  .object({
    raid_config: RaidConfigSchema.describe("The RAID configuration to apply"),
    delete_existing: z.boolean().optional().describe("Delete the existing volumes first"),
  })
  .strict();

/** The install_bootloader deploy step's arguments (what an operator may pass in deploy_steps). */
export const InstallBootloaderStepArgs = z
  .object({
    boot_mode: BootModeArg.optional().describe("uefi or bios; default: the node's boot mode"),
    force: z.boolean().optional().describe("install even onto a whole-disk image without software RAID"),
  })
  .strict();

/** smart_check's arguments: which disks, and the sector counts over which a disk fails. */
export const SmartCheckArgs = z
  .object({
    devices: DiskList.optional().describe("Only these disks (paths); default: every disk"),
    max_reallocated_sectors: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Fail a disk with more reallocated sectors (ATA attribute 5) than this; default 100"),
    max_pending_sectors: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Fail a disk with more pending sectors (ATA attribute 197) than this; default 0"),
  })
  .strict();

const EXAMPLE_DISK = { size_gb: 10, raid_level: "1", controller: "software" } as const;

export const AGENT_COMMANDS = {
  get_inventory: { args: NoArgs, readOnly: true, example: {}, steps: [] },
  // IPA's inspection collectors beside the inventory (lldp, pci-devices, numa-topology): Ironic's plugin_data
  get_inspection_data: { args: NoArgs, readOnly: true, example: {}, steps: [] },
  get_clean_steps: { args: NoArgs, readOnly: true, example: {}, steps: [] },
  get_deploy_steps: { args: NoArgs, readOnly: true, example: {}, steps: [] },
  erase_devices: {
    args: EraseOptionsSchema,
    readOnly: false,
    example: { devices: ["/dev/sda"], enable_nvme_secure_erase: false },
    // The conductor fills the command's options from its [deploy] settings; the steps take none.
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "erase_devices",
        priority: 0,
        abortable: true,
        args: NoArgs,
        example: {},
      },
      {
        kind: "clean",
        interface: "deploy",
        step: "erase_devices_express",
        priority: 0,
        abortable: true,
        args: NoArgs,
        example: {},
      },
    ],
  },
  erase_devices_metadata: {
    args: EraseMetadataOptionsSchema,
    readOnly: false,
    example: { devices: ["/dev/sda", "/dev/sdb"] },
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "erase_devices_metadata",
        priority: 99,
        abortable: true,
        args: NoArgs,
        example: {},
      },
    ],
  },
  create_raid: {
    args: z
      .object({
        logical_disks: z.array(LogicalDiskSchema).min(1).max(64),
        /** Which boot partition every holder gets; default: the mode the ramdisk booted in. */
        boot_mode: BootModeArg.optional(),
      })
      .strict(),
    readOnly: false,
    example: { logical_disks: [EXAMPLE_DISK], boot_mode: "uefi" },
    steps: [
      {
        kind: "clean",
        interface: "raid",
        step: "create_configuration",
        priority: 0,
        args: CreateConfigurationArgs,
        example: { create_nonroot_volumes: false },
      },
      {
        kind: "deploy",
        interface: "raid",
        step: "apply_configuration",
        priority: 0,
        args: ApplyConfigurationArgs,
        example: { raid_config: { logical_disks: [EXAMPLE_DISK] }, delete_existing: true },
      },
    ],
  },
  delete_raid: {
    args: NoArgs,
    readOnly: false,
    example: {},
    steps: [
      {
        kind: "clean",
        interface: "raid",
        step: "delete_configuration",
        priority: 0,
        args: NoArgs,
        example: {},
      },
    ],
  },
  write_image: {
    /** The image pipeline's write request plus the hints that pick the target disk. */
    args: WriteImageRequestSchema.extend({
      root_device: RootDeviceHintsSchema.nullable().optional(),
    }).strict(),
    readOnly: false,
    example: {
      image: { url: "http://192.0.2.1:8080/images/disk.raw", image_type: "whole-disk" },
      root_device: { serial: "S1" },
    },
    // Ironic's deploy.write_image (priority 80); the conductor builds the request from instance_info.
    steps: [
      {
        kind: "deploy",
        interface: "deploy",
        step: "write_image",
        priority: 80,
        args: NoArgs,
        example: {},
      },
    ],
  },
  install_bootloader: {
    args: WithRootDevice.extend({
      /** Default: the mode the ramdisk booted in. */
      boot_mode: BootModeArg.optional(),
      /** The root filesystem's UUID or PARTUUID (Ironic's root_uuid); default: the first Linux filesystem found. */
      root_uuid: z.string().min(1).max(64).optional(),
      /** Run the image's own grub-install in a chroot (an operator's opt-in: tenant code as root). */
      image_bootloader: z.boolean().optional(),
    }).strict(),
    readOnly: false,
    example: { boot_mode: "bios", root_uuid: "0b2a7c3e-1f3c-4d5e-8f9a-0b1c2d3e4f50" },
    // NOTE: Ironic has no step of this name: its deploy.prepare_instance_boot (priority 60, after
    // write_image at 80, before tear_down_agent at 40) calls the agent's image.install_bootloader, for a
    // partition image or software RAID. Priority 60 keeps that slot.
    steps: [
      {
        kind: "deploy",
        interface: "deploy",
        step: "install_bootloader",
        priority: 60,
        args: InstallBootloaderStepArgs,
        example: { boot_mode: "uefi", force: true },
      },
    ],
  },
  write_configdrive: {
    args: WithRootDevice.extend({ configdrive: z.string().min(1) }).strict(),
    readOnly: false,
    example: { configdrive: "H4sIAAAAAAAAA+3BMQEAAADCoPVPbQwfoAAAAAAAAAAAAAAAAAAA" },
    steps: [],
  },
  set_boot: {
    args: z.object({ device: z.enum(["disk", "pxe"]), persistent: z.boolean().optional() }).strict(),
    readOnly: false,
    example: { device: "disk", persistent: true },
    steps: [],
  },
  sync: { args: NoArgs, readOnly: false, example: {}, steps: [] },
  reboot: { args: NoArgs, readOnly: false, example: {}, steps: [] },
  power_off: { args: NoArgs, readOnly: false, example: {}, steps: [] },
  collect_logs: { args: NoArgs, readOnly: true, example: {}, steps: [] },
  smart_check: {
    args: SmartCheckArgs,
    readOnly: true,
    example: { devices: ["/dev/sda"], max_reallocated_sectors: 100, max_pending_sectors: 0 },
    // The name; a burn-in style check (as MAAS's smartctl-validate): only when asked for, so priority 0.
    // It was check_smart_health before: one name, so GET …/steps lists it once.
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "smart_check",
        priority: 0,
        abortable: true,
        example: { devices: ["/dev/sda", "/dev/nvme0n1"] },
      },
      // the same check on a deployed node (1.87 servicing), as IPA's burn-in steps serve servicing too
      {
        kind: "service",
        interface: "deploy",
        step: "smart_check",
        priority: 0,
        abortable: true,
        example: { devices: ["/dev/sda"] },
      },
    ],
  },
  // IPA's burn-in steps (hardware.py: priority 0, abortable, interface deploy). The conductor fills the
  // command's arguments from the node's driver_info (agent_burnin_*); the step's own args override them.
  burnin_cpu: {
    args: BurninCpuArgs,
    readOnly: false,
    example: { timeout: 60, cpu: 0 },
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "burnin_cpu",
        priority: 0,
        abortable: true,
        example: { timeout: 60 },
      },
      { kind: "service", interface: "deploy", step: "burnin_cpu", priority: 0, abortable: true, example: {} },
    ],
  },
  burnin_memory: {
    args: BurninMemoryArgs,
    readOnly: false,
    example: { timeout: 60, vm: 1, vm_bytes: "50%" },
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "burnin_memory",
        priority: 0,
        abortable: true,
        example: { timeout: 60 },
      },
      {
        kind: "service",
        interface: "deploy",
        step: "burnin_memory",
        priority: 0,
        abortable: true,
        example: {},
      },
    ],
  },
  // not a service step: it overwrites the disks (IPA leaves it out of servicing for that reason)
  burnin_disk: {
    args: BurninDiskArgs,
    readOnly: false,
    example: { loops: 1, runtime: 60, devices: ["/dev/sdb"] },
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "burnin_disk",
        priority: 0,
        abortable: true,
        example: { loops: 1 },
      },
    ],
  },
  burnin_network: {
    args: BurninNetworkArgs,
    readOnly: false,
    example: { role: "writer", partner: "192.0.2.12", runtime: 60 },
    steps: [
      {
        kind: "clean",
        interface: "deploy",
        step: "burnin_network",
        priority: 0,
        abortable: true,
        // role and partner usually come from driver_info's agent_burnin_fio_network_config
        args: BurninNetworkArgs.partial(),
        example: { runtime: 60 },
      },
      {
        kind: "service",
        interface: "deploy",
        step: "burnin_network",
        priority: 0,
        abortable: true,
        args: BurninNetworkArgs.partial(),
        example: {},
      },
    ],
  },
} as const satisfies Record<string, AgentCommandDeclaration>;

export type CommandName = keyof typeof AGENT_COMMANDS;
export type CommandArgs<N extends CommandName> = z.infer<(typeof AGENT_COMMANDS)[N]["args"]>;

/** Every command name, in catalogue order. */
export const COMMAND_NAMES = Object.keys(AGENT_COMMANDS) as [CommandName, ...CommandName[]];

/** A step of the catalogue with the command that serves it and its argument schema resolved. */
export interface AgentStep extends Omit<AgentStepDeclaration, "args"> {
  command: CommandName;
  args: ArgsSchema;
}

function stepsOf(name: CommandName): AgentStep[] {
  const command: AgentCommandDeclaration = AGENT_COMMANDS[name];
  return command.steps.map((step) => ({
    ...step,
    command: name,
    args: step.args ?? (command.args as ArgsSchema),
  }));
}

/** Every step the agent's commands serve, in catalogue order. */
export const AGENT_STEPS: readonly AgentStep[] = COMMAND_NAMES.flatMap(stepsOf);

/** Argument descriptions as Ironic shows them (argsinfo), from a zod object's `.describe()` texts. */
export function argsinfoOf(schema: ArgsSchema): StepDescriptor["argsinfo"] {
  const argsinfo: NonNullable<StepDescriptor["argsinfo"]> = {};
  for (const [name, field] of Object.entries(schema.shape)) {
    const type = field as z.ZodType;
    argsinfo[name] = { description: type.description ?? name, required: !type.safeParse(undefined).success };
  }
  return Object.keys(argsinfo).length ? argsinfo : null;
}

/** A catalogue step as get_clean_steps / get_deploy_steps report it (and GET …/steps shows it). */
export function agentStepDescriptor(step: AgentStep): StepDescriptor {
  return {
    interface: step.interface,
    step: step.step,
    priority: step.priority,
    argsinfo: argsinfoOf(step.args),
    abortable: step.abortable ?? false,
    reboot_requested: false,
    requires_ramdisk: true,
  };
}

/** The steps of one kind whose command `implemented` accepts (an agent offers only what it can run). */
export function agentStepDescriptors(
  kind: AgentStepDeclaration["kind"],
  implemented: (name: CommandName) => boolean = () => true,
): StepDescriptor[] {
  return AGENT_STEPS.filter((s) => s.kind === kind && implemented(s.command)).map(agentStepDescriptor);
}

/** The catalogue step serving `interface.step`, if any. */
export function findAgentStep(wanted: { interface: string; step: string }): AgentStep | undefined {
  return AGENT_STEPS.find((s) => s.interface === wanted.interface && s.step === wanted.step);
}
