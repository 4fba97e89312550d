import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { storeContract } from "./store.contract.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-sqlite-contract-"));
const file = join(dir, "anvil.sqlite");

// two connections to one real file: the second stands for another conductor process
storeContract("SQLite", {
  open: async () => new SqliteStore(file),
  openSecond: async () => new SqliteStore(file),
  teardown: async () => rmSync(dir, { recursive: true, force: true }),
});
