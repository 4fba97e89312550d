import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import type { Store } from "../../conductor/db/store.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";

/**
 * How a contract suite gets its database: `open` a store on an empty one, `openSecond` another, independent
 * connection to the same database (another conductor), `teardown` what is left after both are closed.
 */
export interface StoreHarness {
  open(): Promise<Store>;
  openSecond(): Promise<Store>;
  teardown(): Promise<void>;
}

/** A SQLite file of its own; the second connection stands for another conductor process. */
export function sqliteHarness(name: string): StoreHarness {
  const dir = mkdtempSync(join(tmpdir(), `anvil-sqlite-${name}-`));
  const file = join(dir, "anvil.sqlite");
  return {
    open: async () => new SqliteStore(file),
    openSecond: async () => new SqliteStore(file),
    teardown: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A real PostgreSQL server from Debian's packages; if it cannot start, the suite fails with the reason. */
export function postgresHarness(name: string): StoreHarness {
  let server: ThrowawayPostgres | undefined;
  let url = "";
  const connect = async () => {
    const store = new PgStore(url);
    await store.open();
    return store;
  };
  return {
    open: async () => {
      server = await startPostgres();
      url = await server.freshDatabase(name);
      return connect();
    },
    openSecond: connect,
    teardown: async () => server?.stop(),
  };
}

/**
 * Opens the harness's stores before the enclosing describe block's tests and closes them after; `opened`
 * receives them (the second only when `second` is asked for).
 */
export function useStores(
  harness: StoreHarness,
  opened: (store: Store, second: Store | undefined) => void,
  options: { second?: boolean } = {},
): void {
  let stores: Store[] = [];
  beforeAll(async () => {
    const store = await harness.open();
    stores = [store];
    if (options.second !== false) stores.push(await harness.openSecond());
    opened(store, stores[1]);
  });
  afterAll(async () => {
    for (const store of stores.reverse()) await store.close();
    await harness.teardown();
  });
}
