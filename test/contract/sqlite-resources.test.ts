import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { resourcesContract } from "./resources.contract.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-sqlite-resources-"));

resourcesContract("SQLite", {
  open: async () => new SqliteStore(join(dir, "anvil.sqlite")),
  teardown: async () => rmSync(dir, { recursive: true, force: true }),
});
