import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";
import { partialUpdateContract } from "./partial-update.contract.ts";

let server: ThrowawayPostgres | undefined;
let url = "";

partialUpdateContract("PostgreSQL", {
  open: async () => {
    server = await startPostgres();
    url = await server.freshDatabase("partial");
    const store = new PgStore(url);
    await store.open();
    return store;
  },
  openSecond: async () => {
    const store = new PgStore(url);
    await store.open();
    return store;
  },
  teardown: async () => server?.stop(),
});
