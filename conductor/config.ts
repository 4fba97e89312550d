import { z } from "zod";
import { LOG_FORMATS } from "../shared/log.ts";
import { EraseConfigSchema } from "../shared/erase.ts";
import { SWARM_PEER_TLS_MODES } from "../shared/swarm.ts";
import { isLoopback, parseListenAddress } from "./listen-address.ts";

/**
 * Ironic's cpu_arch name for the ways nodes and operators spell an architecture: Debian's and Go's arm64 is
 * the kernel's aarch64, amd64 (and Node's x64) is x86_64; anything else is kept, lower-cased.
 */
export function canonicalCpuArch(name: string): string {
  const lower = name.trim().toLowerCase();
  if (lower === "arm64") return "aarch64";
  if (lower === "amd64" || lower === "x64") return "x86_64";
  return lower;
}

/**
 * An oslo.config dict option as Ironic's *_by_arch settings take it: "aarch64:http://h/k,x86_64:http://h/j"
 * (each pair split at its first colon; keys made canonical). Null when a pair has no key or no value, or an
 * architecture is given twice.
 */
export function parseArchMap(text: string): Record<string, string> | null {
  const map: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const pair of text.split(",")) {
    const colon = pair.indexOf(":");
    if (colon < 0) return null;
    const key = pair.slice(0, colon).trim();
    const value = pair.slice(colon + 1).trim();
    if (!/^[A-Za-z0-9_]+$/.test(key) || value === "") return null;
    const arch = canonicalCpuArch(key);
    if (arch in map) return null;
    map[arch] = value;
  }
  return map;
}

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
  /** On stop (SIGTERM), how long running work may take to finish before it is cancelled and handed back. */
  stopGraceS: z.number().min(0).default(30),
  /**
   * Ironic's [conductor]node_locked_retry_attempts and node_locked_retry_interval: a request that finds its node
   * locked by another task tries again for up to (attempts − 1) × interval before it answers 409 NodeLocked.
   * Anvil tries again as soon as this conductor releases the node (every 100 ms for a holder elsewhere) rather
   * than after each whole interval. attempts 1: refused at once.
   */
  nodeLockedRetry: z
    .object({
      attempts: z.number().int().min(1).default(3),
      intervalS: z.number().min(0).default(1),
    })
    .prefault({}),
  /** How often to look for timed-out wait states. */
  timeoutCheckIntervalS: z.number().positive().default(10),
  powerSync: z
    .object({
      intervalS: z.number().min(0).default(60),
      force: z.boolean().default(true),
      maxFailures: z.number().int().positive().default(3),
      /** Workers a pass starts with (Ironic's sync_power_state_workers). */
      concurrency: z.number().int().positive().default(8),
      /** Workers a pass may grow to when its pace says it would not end within 80 % of the interval. */
      maxConcurrency: z.number().int().positive().default(32),
      /**
       * Ironic's [conductor]enable_health_monitoring: keep the BMC's health report (API 1.109) from the power
       * state's read, where the driver reports one (Redfish's Status.Health: no extra BMC call).
       */
      healthMonitoring: z.boolean().default(true),
    })
    .prefault({}),
  ipmi: z
    .object({
      /**
       * What reads power status for the ipmi hardware type (the power sync, GET states): "native" speaks
       * IPMI v2.0 (RMCP+, cipher suite 3) from the conductor over one UDP socket; "ipmitool" runs one ipmitool
       * per read. Power actions always use ipmitool; nodes whose ipmi_cipher_suite is not 3 read through it too.
       */
      statusClient: z.enum(["native", "ipmitool"]).default("native"),
    })
    .prefault({}),
  agent: z
    .object({
      fastTrack: z.boolean().default(false),
      /** How long the conductor waits for one agent command (write_image can take a while). */
      commandTimeoutS: z.number().positive().default(3600),
      heartbeatTimeoutS: z.number().positive().default(30),
      /** Largest frame from a welcomed agent (inventories and results need room). */
      maxFrameBytes: z
        .number()
        .int()
        .positive()
        .default(4 * 1024 * 1024),
      /** Bytes a connection may send before it is welcomed: a hello is under 4 KiB. */
      maxBytesBeforeHello: z
        .number()
        .int()
        .positive()
        .default(64 * 1024),
      /** A connection that has not said hello within this time is closed. */
      helloTimeoutS: z.number().positive().default(10),
      /** Agent connections in total and from one source address (refused at the upgrade with 503/429). */
      maxConnections: z.number().int().positive().default(4096),
      maxConnectionsPerSource: z.number().int().positive().default(64),
      /** Frames per second a connection may send on average (bursts of ten times that pass). */
      maxFramesPerSecond: z.number().positive().default(100),
    })
    .prefault({}),
  /** The event stream (GET /v1/events). */
  events: z
    .object({
      /** Concurrent subscribers; one more gets 503. */
      maxSubscribers: z.number().int().positive().default(256),
      /** Bytes queued for one subscriber that does not read; beyond it the subscriber is disconnected. */
      maxBufferedBytes: z
        .number()
        .int()
        .positive()
        .default(1024 * 1024),
    })
    .prefault({}),
  boot: z
    .object({
      kind: z.enum(["ipxe", "pxe"]).default("ipxe"),
      deployKernel: z.string().optional(),
      deployRamdisk: z.string().optional(),
      /**
       * Ironic's [conductor]deploy_kernel_by_arch: "aarch64:URL,x86_64:URL". A node without
       * driver_info.deploy_kernel boots the kernel of its properties.cpu_arch (arm64 and aarch64, amd64 and
       * x86_64 are one each), else deployKernel.
       */
      deployKernelByArch: z
        .string()
        .refine((s) => parseArchMap(s) !== null, 'expected "arch:location[,arch:location...]"')
        .optional(),
      /** Ironic's [conductor]deploy_ramdisk_by_arch, as deployKernelByArch. */
      deployRamdiskByArch: z
        .string()
        .refine((s) => parseArchMap(s) !== null, 'expected "arch:location[,arch:location...]"')
        .optional(),
      /**
       * "host:port" of a plain-HTTP listener serving only boot files (/boot/) and local images (/images/), for
       * firmware that cannot do TLS (iPXE trusts no lab CA) while the API and agents use HTTPS/WSS. Unset:
       * they are served on the API's listener.
       */
      httpListen: z
        .string()
        .refine((s) => parseListenAddress(s) !== null, "expected host:port (IPv6 in brackets)")
        .optional(),
    })
    .prefault({}),
  /** How image references that are not HTTP(S) become temporary URLs the agent can fetch. */
  images: z
    .object({
      /** file:// images under this directory are served by the conductor itself (small setups). */
      localRoot: z.string().optional(),
      /**
       * A subdirectory of localRoot served without a signed link: the deploy kernel and ramdisk firmware
       * fetches by a fixed URL (Ironic's http_root). Never put a tenant's image there.
       */
      publicDir: z
        .string()
        .regex(/^[A-Za-z0-9._-]+$/, "one directory name under the image root")
        .refine((s) => s !== "." && s !== "..", "one directory name under the image root")
        .optional(),
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
      /**
       * The rate an image server must keep up, averaged over each window of waiting for it: below it the
       * agent gives the download up and the deploy fails naming the rate (a server dripping bytes must not
       * hold a node forever). Each download also gets a deadline: its size at this rate plus 300 s.
       */
      downloadMinBytesPerSecond: z.number().int().positive().default(65_536),
      downloadRateWindowS: z.number().positive().max(3600).default(60),
      /**
       * Let instance_info.image_bootloader run the image's own grub-install in a chroot inside the ramdisk.
       * Off by default: that is code from the tenant's image running as root beside the agent's token.
       */
      allowImageBootloader: z.boolean().default(false),
      /**
       * The conductor's cache of Glance images it serves itself (no Swift behind Glance): one download per
       * image shared by every node deploying it, least recently used evicted beyond maxBytes (never one a
       * deploy is using). Default directory: <dataDir>/image-cache.
       */
      cache: z
        .object({
          dir: z.string().optional(),
          maxBytes: z
            .number()
            .int()
            .positive()
            .default(20 * 1024 ** 3),
        })
        .prefault({}),
    })
    .prefault({}),
  /**
   * Glance image sources (instance_info.image_source "glance://<uuid>" or a bare UUID), read with the
   * conductor's own service token; unset: such sources are refused.
   */
  glance: z
    .object({
      /** Glance's public endpoint, e.g. "http://192.0.2.10:9292" (the /v2 API is under it). */
      endpoint: z.string().url(),
      /** A static service token (else ANVIL_GLANCE_TOKEN); Keystone's service-token getter replaces it. */
      token: z.string().optional(),
      /** The conductor's own project: its private images may be deployed on any node (Ironic's rule). */
      serviceProject: z.string().optional(),
      /**
       * Headers sent with every Glance call, for a Glance in trusted-auth mode without Keystone (a lab):
       * e.g. { "X-Tenant-Id": "…", "X-Roles": "admin" }.
       */
      headers: z.record(z.string(), z.string()).default({}),
      /** Each metadata call's timeout (a download has none but the agent-side rate floor's analogue). */
      timeoutS: z.number().positive().default(30),
    })
    .optional(),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** auto: readable lines on a terminal, JSON lines when piped (journald, files, log shippers). */
  logFormat: z.enum(LOG_FORMATS).default("auto"),
  /** Bounds on what one API request may carry and store (hostile clients must not exhaust the process). */
  api: z
    .object({
      /** Largest request body, in bytes (Ironic's oslo.middleware default is 112 KiB; nodes with big `extra` need more). */
      maxBodyBytes: z
        .number()
        .int()
        .positive()
        .default(1024 * 1024),
      /** Largest body of PUT .../states/provision, which may carry a config drive (Ironic accepts 64 MiB). */
      maxProvisionBodyBytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024 * 1024),
      /** Deepest nesting of objects and arrays in a body or a stored JSON field. */
      maxJsonDepth: z.number().int().min(2).default(32),
      /** Largest serialised size of one free-form field (extra, properties, instance_info, driver_info, ...). */
      maxFieldBytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024),
    })
    .prefault({}),
  /** Who may call the API (Ironic's option names for the first two). */
  auth: z
    .object({
      /** noauth | http_basic | keystone; unset means noauth, allowed only while listening on loopback. */
      auth_strategy: z.enum(["noauth", "http_basic", "keystone"]).optional(),
      /** Apache htpasswd file with bcrypt entries (http_basic). */
      http_basic_auth_user_file: z.string().optional(),
      /** Roles and projects of the users (YAML); default: roles.yaml beside the htpasswd file, if present. */
      rolesFile: z.string().optional(),
      /** Lifetime (and upper bound) of bearer tokens issued by POST /v1/auth/tokens. */
      tokenTtlS: z.number().int().positive().default(3600),
      /** How long a verified user+password is trusted without another bcrypt (0: never cached). */
      credentialCacheTtlS: z.number().min(0).default(60),
      /** Failed logins per user name before 429s, within the window (a source address gets five times as many). */
      maxFailedLogins: z.number().int().positive().default(10),
      failedLoginWindowS: z.number().positive().default(300),
    })
    .prefault({}),
  /**
   * auth_strategy=keystone: where tokens are validated, and Anvil's own service credentials there (Ironic's
   * [keystone_authtoken]); the password is read from a file, never a flag or the environment.
   */
  keystone: z
    .object({
      /** Keystone's identity URL, e.g. http://keystone:5000/v3. */
      authUrl: z.string().url().optional(),
      /** What a 401's `WWW-Authenticate: Keystone uri="…"` names (Keystone's public URL); default authUrl. */
      wwwAuthenticateUri: z.string().url().optional(),
      username: z.string().min(1).default("anvil"),
      /** A file holding the service user's password (mode 600). */
      passwordFile: z.string().optional(),
      userDomainName: z.string().min(1).default("Default"),
      projectName: z.string().min(1).default("service"),
      projectDomainName: z.string().min(1).default("Default"),
      /** The project whose `service` role holders act as system members (Ironic's service_project_name). */
      serviceProjectName: z.string().min(1).default("service"),
      /**
       * How long a validated token is trusted without asking Keystone again (never past its expiry): a token
       * revoked in Keystone is refused here at most this long after, and cached tokens outlive an outage as long.
       */
      cacheWindowS: z.number().min(0).default(300),
      cacheMaxEntries: z.number().int().positive().default(10_000),
      /** Each call to Keystone (connect, headers, body) gives up after this long: 503 for the request. */
      timeoutS: z.number().positive().default(10),
      /** Connections to Keystone at most (pooled, kept alive). */
      maxConnections: z.number().int().positive().default(16),
    })
    .prefault({}),
  /** HTTPS for the API and WSS for agents; off unless cert and key are given. */
  tls: z
    .object({
      /** PEM server certificate (the chain after it, if any). */
      cert: z.string().optional(),
      key: z.string().optional(),
      /** PEM CA certificate that signed `cert`: agents pin it (else they pin `cert` itself). */
      ca: z.string().optional(),
      /** PEM CA bundle agents trust for https:// image URLs (instance_info.image_ca_cert overrides). */
      imageCa: z.string().optional(),
    })
    .prefault({}),
  /** Prometheus metrics. */
  metrics: z
    .object({
      /**
       * "host:port" of a separate plain-HTTP listener serving only /metrics, without authentication; the
       * API then stops serving /metrics. Unset: /metrics is on the API, for system readers.
       */
      listen: z
        .string()
        .refine((s) => parseListenAddress(s) !== null, "expected host:port (IPv6 in brackets)")
        .optional(),
      /** The metrics listener has no auth: a non-loopback `listen` is refused unless this is set. */
      allowNonLoopback: z.boolean().default(false),
    })
    .prefault({})
    .refine(
      (m) =>
        m.listen === undefined || m.allowNonLoopback || isLoopback(parseListenAddress(m.listen)?.host ?? ""),
      {
        message:
          "the metrics listener has no authentication: give a loopback address (127.0.0.1:9608, [::1]:9608), or set metrics.allow_non_loopback (--metrics-allow-non-loopback) to expose it anyway",
        path: ["listen"],
      },
    ),
  /**
   * Swarm deploys (Ironic's [deploy] section has no such thing): agents writing the same image at the same
   * time share its chunks, this conductor tracking who holds what, so the image store serves about one image
   * per wave. Off by default; a node opts out with driver_info.swarm = false.
   */
  deploy: z
    .object({
      swarm: z.boolean().default(false),
      /** How long an agent waits for a chunk's assignee before it takes the chunk from the store. */
      swarmAssigneeWaitS: z.number().positive().max(600).default(30),
      /** A peer that sends nothing for this long is given up for the chunk (the store or another peer next). */
      swarmPeerStallS: z.number().positive().max(300).default(10),
      /** Bytes of chunks each agent keeps to serve its peers. */
      swarmCacheBytes: z
        .number()
        .int()
        .positive()
        .default(256 * 1024 * 1024),
      /** Seconds an agent keeps serving after its own write (while it installs the bootloader, reboots). */
      swarmLingerS: z.number().min(0).max(3600).default(60),
      /** Chunks each agent fetches at once. */
      swarmWindow: z.number().int().min(1).max(32).default(4),
      /** Uploads each agent serves at once. */
      swarmMaxUploads: z.number().int().min(1).max(64).default(4),
      /**
       * Peer links: "link" makes them TLS keyed by each wave's secret when the agent's link to the conductor is
       * TLS (and plain HTTP when it is plain); "off" keeps them plain HTTP whatever the link.
       */
      swarmPeerTls: z.enum(SWARM_PEER_TLS_MODES).default("link"),
      /**
       * A raw image's write reports a durable checkpoint each time this many more bytes are on the disk, so a
       * reboot mid-write resumes there instead of at byte 0.
       */
      resumeCheckpointBytes: z
        .number()
        .int()
        .min(1024 * 1024)
        .default(256 * 1024 * 1024),
      /** Reboots of the node during one write_image that are resumed; one more fails the deploy. */
      maxResumes: z.number().int().min(0).max(10).default(3),
    })
    .prefault({}),
  /** Disk erasing in cleaning (Ironic's [deploy] erase options), passed to the agent's erase_devices. */
  erase: EraseConfigSchema.prefault({}),
  /**
   * Software RAID in automated cleaning (Ironic's [deploy] options of the same names): a priority above 0 runs
   * raid.delete_configuration / raid.create_configuration in every automated clean of a node with the agent
   * RAID interface; unset, the agent's priority (0) keeps them to manual cleaning and the RAID survives.
   */
  raid: z
    .object({
      deleteConfigurationPriority: z.number().int().min(0).max(1000).optional(),
      createConfigurationPriority: z.number().int().min(0).max(1000).optional(),
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
      /**
       * A file of at least 32 random bytes (mode 600), the same on every conductor: forwarded calls carry the
       * client's identity under its MAC. Required with http_basic when several conductors share a database.
       */
      secretFile: z.string().optional(),
    })
    .prefault({}),
  /** Ironic's [inspection_rules]: rules applied after every inspection besides those of the API. */
  inspectionRules: z
    .object({
      /** A YAML file holding a list of rules (Ironic's built_in_rules), read at each inspection. */
      builtInRules: z.string().optional(),
      /** Whether rules see password, auth_token and bmc_password as "***" (Ironic's mask_secrets). */
      maskSecrets: z.enum(["always", "never", "sensitive"]).default("always"),
    })
    .prefault({}),
  /**
   * Ironic's [agent] deploy_logs_*: the deploy ramdisk's logs (the agent's own, the kernel's, the inventory)
   * collected when in-band work fails (on_failure), also when it succeeds (always), or never, and kept per
   * node under `dir` (default <dataDir>/deploy-logs), secrets masked. The API lists and serves them.
   */
  deployLogs: z
    .object({
      collect: z.enum(["always", "on_failure", "never"]).default("on_failure"),
      dir: z.string().optional(),
      /** Archives kept per node: the oldest go first. */
      maxPerNode: z.number().int().positive().default(10),
      /** Bytes kept per node (compressed archives): the oldest go first; the newest is always kept. */
      maxBytesPerNode: z
        .number()
        .int()
        .positive()
        .default(50 * 1024 * 1024),
      /** Bytes one archive may unpack to (an agent's archive is refused past it). */
      maxUnpackedBytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024 * 1024),
      /** How long the conductor waits for the agent to gather its logs. */
      timeoutS: z.number().positive().default(120),
    })
    .prefault({}),
  /**
   * Ironic's [auto_discovery]: an unknown machine whose ramdisk posts inspection data is enrolled with this
   * driver and inspected. Off by default: any machine reaching the callback would become a node.
   */
  autoDiscovery: z
    .object({
      enabled: z.boolean().default(false),
      driver: z.string().default("fake-hardware"),
    })
    .prefault({}),
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
