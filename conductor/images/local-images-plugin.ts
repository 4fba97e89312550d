import { createReadStream } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { sep } from "node:path";
import type { FastifyPluginAsync } from "fastify";

/** Serves file:// images from one directory, read-only, with single-range support (the agent resumes). */
export const localImagesPlugin: FastifyPluginAsync<{ root: string }> = async (app, options) => {
  const root = await realpath(options.root);
  app.get<{ Params: { "*": string } }>("/*", async (request, reply) => {
    const notFound = () => reply.code(404).type("text/plain").send("not found\n");
    const name = request.params["*"];
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
