import type { Logger } from "../../shared/log.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { ConductorConfig } from "../config.ts";
import type { Store } from "../db/store.ts";
import type { ImageSources } from "../images/glance-source.ts";
import type { UrlSigner } from "../images/image-request.ts";
import type { VmediaImages } from "../images/vmedia-images.ts";
import type { DeployLogStore } from "../history/deploy-logs.ts";
import type { AgentControl } from "./agent-control.ts";
import type { NetworkBurninPairing } from "./deploy/burnin-pairing.ts";
import type { BootInterface, DriverNode, ManagementInterface, PowerInterface } from "./out-of-band.ts";

/** Everything a flow may use while it holds a node's lock. */
export interface TaskDeps {
  store: Store;
  holder: string;
  logger: Logger;
  agents: AgentControl;
  config: ConductorConfig;
  /** SHA-256 the deploy ramdisk pins the conductor's certificate chain to (TLS on). */
  caFingerprint?: string;
  /** PEM CA(s) agents trust for https:// images unless instance_info.image_ca_cert names its own (tls.imageCa). */
  imageCa?: string;
  /** The URL nodes reach this conductor at (see publicUrlOf). */
  publicUrl(): string;
  /** The public URLs of the other live conductors of this one's group (a cluster); none when alone. */
  peerUrls?(): string[];
  /** Publishes a change for the event stream (GET /v1/events). */
  publish(event: { type: string; node: string; [key: string]: unknown }): void;
  /** Turns swift://, s3:// and file:// image references into temporary HTTP(S) URLs. */
  sign: UrlSigner;
  /** Resolves Glance image sources (Ironic's glance://<uuid> or a bare UUID); unset: they are refused. */
  imageSources?: ImageSources;
  /** Downloads and serves operators' virtual media images (image_download_source local); unset: refused. */
  vmediaImages?: VmediaImages;
  /** Where the deploy ramdisk's logs are kept (config deployLogs); unset: none are collected. */
  deployLogs?: DeployLogStore;
  /** Where burnin_network's dynamic pairing meets (one per conductor); unset: one made for these deps. */
  burninPairing?: NetworkBurninPairing;
}

/** The power changes a task makes on its own (an operator's soft variants go through the power operation). */
export type TaskPowerTarget = "power on" | "power off" | "reboot";

/**
 * What a driver's step sees of the task running it (Ironic's `task` argument): a node held under its lock.
 * The conductor's Task implements it; declared here so drivers never import the layer that runs them.
 */
export interface DriverTask {
  node: NodeRecord;
  readonly hw: { power: PowerInterface; management: ManagementInterface; boot: BootInterface };
  readonly deps: TaskDeps;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** The plan step running now (`<kind>:<index>`), set by the step runner. */
  runningStep: string | undefined;
  /** Writes node fields; fails unless this conductor still holds the node's reservation. */
  update(patch: Partial<NodeRecord>): Promise<NodeRecord>;
  /**
   * Merges keys into driver_internal_info in the database (an undefined value removes its key) without
   * rewriting the node document; fails as update does.
   */
  mergeInternalInfo(changes: Readonly<Record<string, unknown>>): Promise<NodeRecord>;
  /** A snapshot for driver calls, with the node's ports. */
  driverNode(): Promise<DriverNode>;
  /** Powers the node through the one power path and records the state it reached. */
  setPower(target: TaskPowerTarget): Promise<void>;
}
