import { z } from "zod";

/**
 * IPA's burn-in steps (ironic_python_agent/burnin.py): their command arguments, with IPA's defaults, and the
 * node's driver_info knobs (`agent_burnin_*`) the conductor reads them from. The agent runs Debian's
 * stress-ng (cpu, memory) and fio (disk, network), or e2fsprogs' badblocks for disks where there is no fio
 * (the arm64 ramdisk), and reports figures parsed from their output.
 */

/** One day, IPA's default for the cpu and memory stressors. */
export const BURNIN_DEFAULT_TIMEOUT_S = 86_400;
/** Seconds a burn-in may be asked to run: up to 30 days. */
const Seconds = z
  .number()
  .int()
  .min(1)
  .max(30 * 86_400);
const Workers = z.number().int().min(0).max(4096);
const DiskList = z.array(z.string().min(1).max(4096)).max(256);
/** stress-ng's --vm-bytes: N bytes, N with a k/m/g suffix, or N% of the memory. */
export const VmBytesSchema = z
  .string()
  .max(32)
  .regex(/^(?:\d{1,15}[bkmgt]?|(?:100|\d{1,2}(?:\.\d{1,3})?)%)$/i, "bytes (k/m/g suffix) or a percentage");
/** A partner's host name or address (an argv element for fio: no leading dash). */
const HostSchema = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[A-Za-z0-9_.:[\]-]+$/)
  .refine((host) => !host.startsWith("-"), "a host name does not start with '-'");

export const BurninCpuArgs = z
  .object({
    timeout: Seconds.optional().describe("Seconds to run (agent_burnin_cpu_timeout; default 86400)"),
    cpu: Workers.optional().describe(
      "stress-ng cpu workers, 0 = one per CPU (agent_burnin_cpu_cpu; default 0)",
    ),
  })
  .strict();

export const BurninMemoryArgs = z
  .object({
    timeout: Seconds.optional().describe("Seconds to run (agent_burnin_vm_timeout; default 86400)"),
    vm: Workers.optional().describe("stress-ng vm workers, 0 = one per CPU (agent_burnin_vm_vm; default 0)"),
    vm_bytes: VmBytesSchema.optional().describe(
      "Memory per worker set (agent_burnin_vm_vm-bytes; default 98%)",
    ),
  })
  .strict();

/**
 * burnin_disk's stall bound: a disk or controller that stops answering shows no completed I/O for this long.
 * A SCSI command's default timeout is 30 s with 5 retries, so a dying but answering disk stays well under it.
 */
export const BURNIN_DISK_STALL_DEFAULT_S = 600;

export const BurninDiskArgs = z
  .object({
    loops: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .optional()
      .describe("fio loops, or badblocks patterns (agent_burnin_fio_disk_loops; default 4)"),
    runtime: z
      .number()
      .int()
      .min(0)
      .max(30 * 86_400)
      .optional()
      .describe(
        "fio runtime in seconds, or when badblocks stops, 0 = no limit (agent_burnin_fio_disk_runtime; default 0)",
      ),
    devices: DiskList.optional().describe("Only these disks (paths); default: every disk"),
    stall_timeout: z
      .number()
      .int()
      .min(1)
      .max(86_400)
      .optional()
      .describe(
        "Seconds with no I/O completed on any of the disks before fio is stopped and the step fails " +
          `(agent_burnin_fio_disk_stall_timeout; default ${BURNIN_DISK_STALL_DEFAULT_S}; Anvil's, IPA waits forever)`,
      ),
  })
  .strict();

export const NETWORK_BURNIN_ROLES = ["writer", "reader"] as const;

export const BurninNetworkArgs = z
  .object({
    role: z
      .enum(NETWORK_BURNIN_ROLES)
      .describe("This node's first role (agent_burnin_fio_network_config.role)"),
    partner: HostSchema.describe("The partner node's address (agent_burnin_fio_network_config.partner)"),
    runtime: Seconds.optional().describe(
      "Seconds per direction (agent_burnin_fio_network_runtime; default 21600)",
    ),
    port: z.number().int().min(1).max(65_535).optional().describe("TCP port (default 9000, IPA's)"),
    retry_interval: z
      .number()
      .int()
      .min(1)
      .max(300)
      .optional()
      .describe("Seconds a reader waits for its writer between attempts (default 30, IPA's)"),
  })
  .strict();

/** One stress-ng stressor's metrics line (`--metrics-brief`). */
export const StressMetricsSchema = z.object({
  stressor: z.string(),
  bogo_ops: z.number().nonnegative(),
  real_time_s: z.number().nonnegative(),
  bogo_ops_per_s: z.number().nonnegative(),
});
export type StressMetrics = z.infer<typeof StressMetricsSchema>;

/** What burnin_cpu and burnin_memory report. */
export interface StressResult {
  tool: "stress-ng";
  stressor: "cpu" | "vm";
  timeout_s: number;
  metrics: StressMetrics[];
}

/** One fio job's figures (a disk, or a network direction). */
export interface FioJobResult {
  name: string;
  read_bytes: number;
  write_bytes: number;
  /** MB/s (10^6 bytes) over the job's run time. */
  read_mb_s: number;
  write_mb_s: number;
  read_iops: number;
  write_iops: number;
  runtime_ms: number;
  /** fio's job error (errno) and its count of I/O and verify errors. */
  error: number;
  total_errors: number;
}

/** The driver_info knobs of each burn-in step, as IPA reads them (`info.get(key, default)`). */
export const BURNIN_DRIVER_INFO = {
  burnin_cpu: { timeout: "agent_burnin_cpu_timeout", cpu: "agent_burnin_cpu_cpu" },
  burnin_memory: {
    timeout: "agent_burnin_vm_timeout",
    vm: "agent_burnin_vm_vm",
    vm_bytes: "agent_burnin_vm_vm-bytes",
  },
  burnin_disk: {
    loops: "agent_burnin_fio_disk_loops",
    runtime: "agent_burnin_fio_disk_runtime",
    stall_timeout: "agent_burnin_fio_disk_stall_timeout",
  },
  burnin_network: { runtime: "agent_burnin_fio_network_runtime" },
} as const;

export type BurninStep = keyof typeof BURNIN_DRIVER_INFO;

/** Integers given as strings in driver_info (the CLI's `--driver-info k=v` sends strings) become numbers. */
function knobValue(value: unknown): unknown {
  if (typeof value === "string" && /^\d{1,12}$/.test(value)) return Number(value);
  return value;
}

/**
 * A burn-in step's command arguments: the node's driver_info knobs, overridden by the step's own args.
 * burnin_network's role and partner come from `agent_burnin_fio_network_config` (IPA's static pairing);
 * without it the conductor pairs the node with another (burninPairingSettings). The caller parses the result
 * with the command's schema, which names any bad knob.
 */
export function burninArgs(
  step: BurninStep,
  driverInfo: Readonly<Record<string, unknown>>,
  stepArgs: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const [arg, key] of Object.entries(BURNIN_DRIVER_INFO[step])) {
    if (Object.hasOwn(driverInfo, key) && driverInfo[key] !== null) args[arg] = knobValue(driverInfo[key]);
  }
  if (step === "burnin_network") {
    const config = driverInfo.agent_burnin_fio_network_config;
    let parsed: unknown = config;
    if (typeof config === "string") {
      try {
        parsed = JSON.parse(config);
      } catch {
        parsed = undefined;
      }
    }
    if (typeof parsed === "object" && parsed !== null) {
      const { role, partner } = parsed as { role?: unknown; partner?: unknown };
      if (role !== undefined) args.role = role;
      if (partner !== undefined) args.partner = partner;
    }
  }
  return { ...args, ...stepArgs };
}

/** IPA's default pairing group (agent_burnin_fio_network_pairing_group_name). */
export const BURNIN_PAIRING_GROUP = "ironic.network-burnin";

/**
 * IPA's dynamic pairing knobs, for burnin_network without `agent_burnin_fio_network_config`: nodes in the same
 * group are paired two by two, each waiting up to `timeout` seconds for a partner. IPA meets in a tooz backend
 * (`backend_url`, which it requires); Anvil's conductor is the meeting point, so the URL is accepted and unused.
 */
export const BurninPairingSettings = z
  .object({
    timeout: z.number().int().min(1).max(86_400).default(900),
    group_name: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[\x21-\x7e]+$/, "printable ASCII without spaces")
      .default(BURNIN_PAIRING_GROUP),
    backend_url: z.string().max(2048).optional(),
  })
  .strict();
export type BurninPairingSettings = z.infer<typeof BurninPairingSettings>;

const PAIRING_KEYS = {
  timeout: "agent_burnin_fio_network_pairing_timeout",
  group_name: "agent_burnin_fio_network_pairing_group_name",
  backend_url: "agent_burnin_fio_network_pairing_backend_url",
} as const;

/**
 * The node's pairing knobs (numbers given as strings too), IPA's defaults for the missing ones. Never throws:
 * a bad knob comes back as the schema's issues, named by driver_info key.
 */
export function burninPairingSettings(
  driverInfo: Readonly<Record<string, unknown>>,
): { ok: true; settings: BurninPairingSettings } | { ok: false; problems: string[] } {
  const raw: Record<string, unknown> = {};
  for (const [field, key] of Object.entries(PAIRING_KEYS)) {
    if (Object.hasOwn(driverInfo, key) && driverInfo[key] !== null) raw[field] = knobValue(driverInfo[key]);
  }
  const parsed = BurninPairingSettings.safeParse(raw);
  if (parsed.success) return { ok: true, settings: parsed.data };
  return {
    ok: false,
    problems: parsed.error.issues.map((issue) => {
      const field = issue.path[0] as keyof typeof PAIRING_KEYS | undefined;
      return `${field === undefined ? "(pairing)" : PAIRING_KEYS[field]}: ${issue.message}`;
    }),
  };
}
