import { hasUserinfo } from "../../../shared/secrets.ts";
import { canonicalCpuArch, parseArchMap } from "../../config.ts";
import { Invalid } from "../../errors.ts";
import { InvalidDriverInfo } from "../errors.ts";
import type { DriverNode } from "../interfaces.ts";

export interface DeployImages {
  kernel: string;
  ramdisk: string;
}

/** The conductor's deploy images: one default pair, and per architecture (keys canonical cpu_arch names). */
export interface DeployImageDefaults extends Partial<DeployImages> {
  kernelByArch?: Readonly<Record<string, string>>;
  ramdiskByArch?: Readonly<Record<string, string>>;
}

/** The defaults from the conductor's boot settings (the *ByArch strings were checked when loaded). */
export function deployImageDefaultsOf(boot: {
  deployKernel?: string;
  deployRamdisk?: string;
  deployKernelByArch?: string;
  deployRamdiskByArch?: string;
}): DeployImageDefaults {
  const byArch = (text: string | undefined): Record<string, string> =>
    text === undefined ? {} : (parseArchMap(text) ?? {});
  return {
    kernel: boot.deployKernel,
    ramdisk: boot.deployRamdisk,
    kernelByArch: byArch(boot.deployKernelByArch),
    ramdiskByArch: byArch(boot.deployRamdiskByArch),
  };
}

/** The node's properties.cpu_arch in Ironic's spelling (aarch64, x86_64), or undefined when unset. */
export function cpuArchOf(node: Pick<DriverNode, "properties">): string | undefined {
  const arch = node.properties.cpu_arch;
  return typeof arch === "string" && arch.trim() !== "" ? canonicalCpuArch(arch) : undefined;
}

// URLs (or TFTP paths) that go into boot scripts verbatim: no whitespace, quotes or "$" expansions.
const SAFE_LOCATION = /^[\x21-\x7e]+$/;
const UNSAFE = /["'\\$`;]/;

function pick(
  node: Pick<DriverNode, "driver_info">,
  field: "deploy_kernel" | "deploy_ramdisk",
  fallback: string | undefined,
): string {
  const value = node.driver_info[field] ?? fallback;
  if (value === undefined || value === "") {
    throw new InvalidDriverInfo(`driver_info.${field} is required (no default is configured)`);
  }
  if (typeof value !== "string" || !SAFE_LOCATION.test(value) || UNSAFE.test(value)) {
    throw new InvalidDriverInfo(`driver_info.${field} is invalid: ${JSON.stringify(value).slice(0, 80)}`);
  }
  // NOTE: the iPXE script is served in plain text to anything on the provisioning network
  if (hasUserinfo(value)) throw new InvalidDriverInfo(credentialsMessage(field));
  return value;
}

const DEPLOY_IMAGE_FIELDS = ["deploy_kernel", "deploy_ramdisk"] as const;
const credentialsMessage = (field: string): string =>
  `Invalid driver_info/${field}: a URL with credentials (user:password@) is not allowed; it would be written in plain text into the node's boot script.`;

/**
 * Refuses a deploy kernel or ramdisk URL that carries credentials, at create and patch (they would be
 * written verbatim into the plain-text iPXE script). @throws Invalid (400)
 */
export function refuseDeployImageCredentials(driverInfo: Record<string, unknown>): void {
  for (const field of DEPLOY_IMAGE_FIELDS) {
    const value = driverInfo[field];
    if (typeof value === "string" && hasUserinfo(value)) throw new Invalid(credentialsMessage(field));
  }
}

/**
 * The deploy kernel and ramdisk for a node, as Ironic picks them: driver_info.deploy_kernel/deploy_ramdisk,
 * else the conductor's for the node's properties.cpu_arch (deploy_kernel_by_arch), else its default.
 * @throws InvalidDriverInfo when none is set or a value could break a boot script.
 */
export function deployImagesFor(
  node: Pick<DriverNode, "driver_info" | "properties">,
  defaults: DeployImageDefaults = {},
): DeployImages {
  const arch = cpuArchOf(node);
  const forArch = (map: Readonly<Record<string, string>> | undefined): string | undefined =>
    arch === undefined || map === undefined || !Object.hasOwn(map, arch) ? undefined : map[arch];
  return {
    kernel: pick(node, "deploy_kernel", forArch(defaults.kernelByArch) ?? defaults.kernel),
    ramdisk: pick(node, "deploy_ramdisk", forArch(defaults.ramdiskByArch) ?? defaults.ramdisk),
  };
}

/** @throws InvalidDriverInfo unless the location is an http(s) URL (iPXE fetches it). */
export function requireHttpUrl(location: string, field: string): string {
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    throw new InvalidDriverInfo(
      `${field} must be an http(s) URL, got ${JSON.stringify(location).slice(0, 80)}`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new InvalidDriverInfo(`${field} must be an http(s) URL, got ${url.protocol}`);
  }
  return location;
}
