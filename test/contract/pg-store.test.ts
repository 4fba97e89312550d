import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";
import { storeContract } from "./store.contract.ts";

let server: ThrowawayPostgres | undefined;
let url = "";

// a real server from Debian's packages; if it cannot start, the suite fails with the reason
storeContract("PostgreSQL", {
  open: async () => {
    server = await startPostgres();
    url = await server.freshDatabase("contract");
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
