import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { DISK_BUSES, NIC_MODELS, type DiskBus, type NicModel } from "./vm-args.ts";

export const LabNode = z.object({
  name: z.string(),
  dir: z.string(),
  mac: z.string(),
  bmcPort: z.number().int(),
  bmcPid: z.number().int(),
  username: z.string(),
  /** The BMC password's file (0600): never printed, never in argv. */
  passwordFile: z.string(),
  vcpus: z.number().int(),
  memoryMb: z.number().int(),
  disks: z.array(
    z.object({
      file: z.string(),
      bus: z.enum(Object.keys(DISK_BUSES) as [DiskBus, ...DiskBus[]]),
      serial: z.string(),
      sizeGb: z.number(),
    }),
  ),
  /** The NIC QEMU emulates; states written before NIC models were virtio. */
  nicModel: z.enum(Object.keys(NIC_MODELS) as [NicModel, ...NicModel[]]).default("virtio"),
  /** The node's second NIC, cabled to the lab's LLDP switch (its MAC), or null. */
  switchNicMac: z.string().nullable().default(null),
});
export type LabNode = z.infer<typeof LabNode>;

export const LabState = z.object({
  dir: z.string(),
  conductor: z
    .object({
      pid: z.number().int(),
      port: z.number().int(),
      /** The API as the host sees it. */
      url: z.string(),
      /** The conductor as the VMs see it. */
      guestUrl: z.string(),
      log: z.string(),
    })
    .nullable(),
  /** Served by the conductor at /images/. */
  imageRoot: z.string(),
  conductorPort: z.number().int(),
  conductorArgs: z.array(z.string()),
  deployKernel: z.string(),
  deployRamdisk: z.string(),
  nodes: z.array(LabNode),
  /** TLS on the conductor's API and agent link (the lab's CA), or null for plain HTTP. */
  tls: z
    .object({
      caCert: z.string(),
      cert: z.string(),
      key: z.string(),
      /** SHA-256 of the CA: what the ramdisk's agent pins. */
      caFingerprint: z.string(),
    })
    .nullable()
    .default(null),
  /** http_basic on the API: the lab's administrator (password in a 0600 file, never in argv). */
  auth: z
    .object({ userFile: z.string(), username: z.string(), passwordFile: z.string() })
    .nullable()
    .default(null),
  /** With TLS, boot files go over plain HTTP on this port (iPXE cannot check the lab CA). */
  bootPort: z.number().int().nullable().default(null),
  /** The lab's LLDP switch (lldpd on one tap per node), or null. */
  lldp: z
    .object({
      pid: z.number().int(),
      socket: z.string(),
      log: z.string(),
      systemName: z.string(),
      ports: z.array(
        z.object({ tap: z.string(), mac: z.string(), portId: z.string(), description: z.string() }),
      ),
    })
    .nullable()
    .default(null),
});
export type LabState = z.infer<typeof LabState>;

export const stateFile = (dir: string): string => join(dir, "lab.json");

export async function readLabState(dir: string): Promise<LabState | null> {
  const text = await readFile(stateFile(dir), "utf8").catch(() => null);
  return text === null ? null : LabState.parse(JSON.parse(text));
}

export async function writeLabState(state: LabState): Promise<void> {
  const path = stateFile(state.dir);
  await writeFile(`${path}.tmp`, JSON.stringify(state, null, 2) + "\n");
  await rename(`${path}.tmp`, path);
}
