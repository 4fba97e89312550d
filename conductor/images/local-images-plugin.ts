import { createReadStream } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { sep } from "node:path";
import type { FastifyPluginAsync } from "fastify";
import type { ImageLinks } from "./signed-links.ts";

/**
 * Serves images from one directory, read-only, with single-range support (the agent resumes), and only
 * through signed, unexpired links: anything else is 403 before the file system is looked at, so a refusal
 * says nothing about which files exist.
 */
export const localImagesPlugin: FastifyPluginAsync<{
  root: string;
  links: ImageLinks;
  /** A subdirectory of root served without a link (the deploy kernel and ramdisk). */
  publicDir?: string;
  /** Told the file's name (relative to root) each time one is served. */
  onServe?: (name: string) => void;
}> = async (app, options) => {
  const root = await realpath(options.root);
  app.get<{ Params: { "*": string } }>("/*", async (request, reply) => {
    const name = request.params["*"];
    const open = options.publicDir !== undefined && name.startsWith(`${options.publicDir}/`);
    const verdict = open ? "ok" : options.links.check(request.url);
    if (verdict !== "ok") {
      return reply
        .code(403)
        .type("text/plain")
        .send(verdict === "expired" ? "link expired\n" : "forbidden\n");
    }
    const notFound = () => reply.code(404).type("text/plain").send("not found\n");
    if (!name || name.split("/").some((part) => part === "" || part === "." || part === ".."))
      return notFound();
    let file: string;
    try {
      file = await realpath(`${root}${sep}${name}`);
    } catch {
      return notFound();
    }
    if (!file.startsWith(root + sep)) return notFound();
    const info = await stat(file);
    if (!info.isFile()) return notFound();
    options.onServe?.(name);
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? "");
    reply.header("Accept-Ranges", "bytes").type("application/octet-stream");
    if (request.headers.range && range) {
      const start = Number(range[1]);
      const end = range[2] ? Math.min(Number(range[2]), info.size - 1) : info.size - 1;
      if (start > end) {
        return reply.code(416).header("Content-Range", `bytes */${info.size}`).send();
      }
      return reply
        .code(206)
        .header("Content-Range", `bytes ${start}-${end}/${info.size}`)
        .header("Content-Length", end - start + 1)
        .send(createReadStream(file, { start, end }));
    }
    return reply.header("Content-Length", info.size).send(createReadStream(file));
  });
};
