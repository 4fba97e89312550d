import { randomBytes } from "node:crypto";
import { readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { agentEndpointOf } from "../../conductor/agents/endpoint.ts";
import { recordingLogger, sampleInventory } from "./agent.ts";
import { api, provisionThrough } from "./conductor.ts";
import { sha256 } from "./disk.ts";
import type { HttpImageServer } from "./http-image-server.ts";

const MiB = 1024 * 1024;

/**
 * A fake-hardware node deploying `image` (served at `path`, with its block map at `bmapPath` if given) with
 * the direct interface onto a new 64 MiB disk file, its port `mac`, taken through `url` to "wait call-back".
 * @returns the node's uuid
 */
export async function directDeployWaiting(options: {
  url: string;
  images: HttpImageServer;
  path: string;
  image: Buffer;
  disk: string;
  mac: string;
  uuid?: string;
  bmapPath?: string;
}): Promise<string> {
  const { url, images, path, image, disk, mac, bmapPath } = options;
  await writeFile(disk, "");
  await truncate(disk, 64 * MiB);
  const created = await api(`${url}/v1/nodes`, {
    method: "POST",
    body: {
      ...(options.uuid ? { uuid: options.uuid } : {}),
      driver: "fake-hardware",
      deploy_interface: "direct",
      automated_clean: false,
      instance_info: {
        image_source: `${images.url}${path}`,
        image_os_hash_algo: "sha256",
        image_os_hash_value: sha256(image),
        ...(bmapPath === undefined ? {} : { image_bmap: `${images.url}${bmapPath}` }),
      },
    },
  });
  expect(created.status).toBe(201);
  const uuid = (created.body as { uuid: string }).uuid;
  const port = await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: mac } });
  expect(port.status).toBe(201);
  await provisionThrough(url, uuid, [
    ["manage", "manageable"],
    ["provide", "available"],
    ["active", "wait call-back"],
  ]);
  return uuid;
}

/**
 * A direct-deploy node on a simulated machine whose 8 MiB image stops half-way until `resume()`, taken
 * through `url` to "wait call-back". `boot` starts its agent (in this process) dialling `conductors` in order;
 * `writing` resolves with the write_image command id once the agent is caught mid-write; `expectWrittenOnce`
 * checks that the image went over the wire once, was written by one write_image run, and is on the disk.
 */
export async function nodeCaughtMidWrite(options: {
  url: string;
  dir: string;
  images: HttpImageServer;
  mac: string;
  uuid?: string;
}) {
  const { url, dir, images, mac } = options;
  const path = `/mid-write-${mac.replaceAll(":", "")}.raw`;
  const image = randomBytes(8 * MiB);
  await writeFile(join(dir, path), image);
  let resume = (): void => undefined;
  images.serve(path, join(dir, path), {
    pauseAfterBytes: 4 * MiB,
    resumeWhen: new Promise<void>((r) => (resume = r)),
  });
  const disk = join(dir, `${path}.disk`);
  const uuid = await directDeployWaiting({
    url,
    images,
    path,
    image,
    disk,
    mac,
    ...(options.uuid ? { uuid: options.uuid } : {}),
  });

  const agentLog = recordingLogger();
  let link: AgentLink | undefined;
  const writeRuns = () =>
    agentLog.lines.filter((l) => l.includes('"command started"') && l.includes('"write_image"'));
  return {
    uuid,
    resume: () => resume(),
    boot(conductors: string[]): AgentLink {
      const [first, ...others] = conductors.map(agentEndpointOf);
      link = new AgentLink({
        url: first!,
        otherUrls: others,
        backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [mac], diskFile: disk }) }),
        commands: COMMANDS,
        logger: agentLog,
        agentVersion: "test",
        backoff: { initialMs: 100, maxMs: 500 },
      });
      link.start();
      return link;
    },
    /** The write_image id the node recorded, once the agent has started it and the transfer has begun. */
    async writing(): Promise<string> {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const node = (await api(`${url}/v1/nodes/${uuid}`)).body as {
          deploy_step: { step?: string };
          driver_internal_info: { agent_commands_in_flight?: { ids?: Record<string, string> } };
        };
        const id = node.driver_internal_info.agent_commands_in_flight?.ids?.write_image;
        if (node.deploy_step.step === "write_image" && id !== undefined && writeRuns().length > 0) return id;
        if (Date.now() > deadline) throw new Error("timed out waiting for the agent to be writing the image");
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async expectWrittenOnce(id: string): Promise<void> {
      expect(images.requests.filter((r) => r.path === path)).toHaveLength(1);
      const runs = writeRuns();
      expect(runs).toHaveLength(1);
      expect(runs[0]).toContain(id);
      expect(agentLog.lines.filter((l) => l.includes("CANCELLED"))).toEqual([]);
      expect(sha256((await readFile(disk)).subarray(0, image.length))).toBe(sha256(image));
    },
    stop: () => link?.stop() ?? Promise.resolve(),
  };
}
