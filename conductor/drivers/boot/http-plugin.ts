import { createReadStream } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { sep } from "node:path";
import type { FastifyPluginAsync } from "fastify";
import { pathInside } from "./boot-files.ts";

export interface BootFilesPluginOptions {
  /** The directory to serve read-only (IpxeBoot's root). */
  root: string;
}

const CONTENT_TYPES: Record<string, string> = {
  ipxe: "text/plain; charset=utf-8",
  cfg: "text/plain; charset=utf-8",
};

/** A request path we are willing to look up: plain segments, no dot segments, no hidden or temp files. */
function safeName(name: string): string | null {
  if (name === "" || name.includes("\0") || name.includes("\\")) return null;
  const segments = name.split("/");
  if (segments.some((segment) => segment === "" || segment.startsWith("."))) return null;
  if (name.endsWith(".tmp")) return null; // an atomic write in progress
  return name;
}

/**
 * Serves the boot root read-only (GET and HEAD), e.g. registered with { prefix: "/boot" }.
 * Anything outside the root (dot segments, encoded or not, and symlinks pointing out) is a 404.
 */
export const bootFilesPlugin: FastifyPluginAsync<BootFilesPluginOptions> = async (app, options) => {
  const root = await realpath(options.root);
  app.get<{ Params: { "*": string } }>("/*", async (request, reply) => {
    const name = safeName(request.params["*"]);
    const notFound = (): unknown => reply.code(404).type("text/plain").send("not found\n");
    if (name === null) return notFound();
    let file: string;
    try {
      file = await realpath(pathInside(root, name));
    } catch {
      return notFound();
    }
    if (!file.startsWith(root + sep)) return notFound();
    const info = await stat(file).catch(() => null);
    if (info === null || !info.isFile()) return notFound();
    const extension = file.split(".").pop() ?? "";
    return reply
      .type(CONTENT_TYPES[extension] ?? "application/octet-stream")
      .header("content-length", info.size)
      .header("cache-control", "no-store")
      .send(createReadStream(file));
  });
};
