import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { partialUpdateContract } from "./partial-update.contract.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-sqlite-partial-"));
const file = join(dir, "anvil.sqlite");

partialUpdateContract("SQLite", {
  open: async () => new SqliteStore(file),
  openSecond: async () => new SqliteStore(file),
  teardown: async () => rmSync(dir, { recursive: true, force: true }),
});
