import { z } from "zod";

/** The conductor's settings; only main.ts reads them from flags and the environment. */
export const ConductorConfig = z.object({
  /** The name shown in reservations and the node's `conductor` field. */
  name: z.string().default("127.0.0.1"),
  host: z.string().default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(6385),
  /** SQLite file (":memory:" for throwaway runs), or a postgresql:// URL for a cluster of conductors. */
  databasePath: z.string().default(".anvil/anvil.sqlite"),
  /** Where boot files (iPXE scripts, kernels) live. */
  dataDir: z.string().default(".anvil"),
  /** The URL nodes use to reach this conductor (kernel command line, iPXE). */
  publicUrl: z.string().optional(),
  /** fake-hardware: how long each fake step takes (Ironic's [fake] delays); lets people watch states move. */
  fakeDelayMs: z.number().int().min(0).default(0),
  timeouts: z
    .object({
      inspectWaitS: z.number().positive().default(1800),
      cleanWaitS: z.number().positive().default(1800),
      deployWaitS: z.number().positive().default(1800),
      rescueWaitS: z.number().positive().default(1800),
      serviceWaitS: z.number().positive().default(1800),
    })
    .prefault({}),
  /** How often to look for timed-out wait states. */
  timeoutCheckIntervalS: z.number().positive().default(10),
  powerSync: z
    .object({
      intervalS: z.number().min(0).default(60),
      force: z.boolean().default(true),
      maxFailures: z.number().int().positive().default(3),
      concurrency: z.number().int().positive().default(8),
    })
    .prefault({}),
  agent: z
    .object({
      fastTrack: z.boolean().default(false),
      /** How long the conductor waits for one agent command (write_image can take a while). */
      commandTimeoutS: z.number().positive().default(3600),
      heartbeatTimeoutS: z.number().positive().default(30),
      maxFrameBytes: z
        .number()
        .int()
        .positive()
        .default(4 * 1024 * 1024),
    })
    .prefault({}),
  boot: z
    .object({
      kind: z.enum(["ipxe", "pxe"]).default("ipxe"),
      deployKernel: z.string().optional(),
      deployRamdisk: z.string().optional(),
    })
    .prefault({}),
  /** How image references that are not HTTP(S) become temporary URLs the agent can fetch. */
  images: z
    .object({
      /** file:// images under this directory are served by the conductor itself (small setups). */
      localRoot: z.string().optional(),
      /** Lifetime of generated temporary URLs. */
      urlExpiresS: z.number().int().positive().default(3600),
      swift: z
        .object({
          endpoint: z.string(),
          account: z.string(),
          tempUrlKey: z.string(),
          digest: z.enum(["sha1", "sha256", "sha512"]).default("sha256"),
        })
        .optional(),
      s3: z
        .object({
          endpoint: z.string(),
          region: z.string(),
          accessKeyId: z.string(),
          secretAccessKey: z.string(),
          pathStyle: z.boolean().default(true),
        })
        .optional(),
    })
    .prefault({}),
  /** Several conductors on one PostgreSQL database: membership, heartbeat and the hash ring. */
  cluster: z
    .object({
      /** Ironic's conductor_group: this conductor serves only nodes of the same group. */
      group: z.string().default(""),
      /** Ironic: heartbeat_interval 10 s, heartbeat_timeout 60 s. */
      heartbeatIntervalS: z.number().positive().default(10),
      deadAfterS: z.number().positive().default(60),
      /** 2^n ring points per conductor (Ironic's hash_partition_exponent is 5). */
      partitionExponent: z.number().int().min(0).max(12).default(7),
    })
    .prefault({}),
  logLevel: z.string().default("info"),
});
export type ConductorConfig = z.infer<typeof ConductorConfig>;

/**
 * The URL nodes reach this conductor at, without a trailing slash: --public-url, else the address it
 * listens on once it does (the port may be the OS's choice), else host and port as configured.
 */
export function publicUrlOf(config: ConductorConfig, listening?: string): string {
  return (config.publicUrl ?? listening ?? `http://${config.host}:${config.port}`).replace(/\/$/, "");
}

export function defaultConfig(overrides: z.input<typeof ConductorConfig> = {}): ConductorConfig {
  return ConductorConfig.parse(overrides);
}
