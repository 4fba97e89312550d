import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";

/** The single list of the ramdisk's modules (images/ramdisk/build.sh reads it with awk; tests with this). */
export const DRIVERS_DOC = join(resolve(import.meta.dirname, "../.."), "images/ramdisk/drivers.md");

/** The modules drivers.md's table lists, in order: rows whose second cell is one backticked name. */
export function documentedModules(markdown: string): string[] {
  return markdown
    .split("\n")
    .map((line) => line.split("|").map((cell) => cell.trim()))
    .filter((cells) => cells.length >= 5 && cells[0] === "")
    .map((cells) => /^`([a-z0-9_-]+)`$/.exec(cells[2]!)?.[1])
    .filter((name): name is string => name !== undefined);
}

export async function readDocumentedModules(): Promise<string[]> {
  return documentedModules(await readFile(DRIVERS_DOC, "utf8"));
}
