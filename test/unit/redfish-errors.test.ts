import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toHttpError } from "../../conductor/api/errors.ts";
import { RedfishClient, RedfishError, refusesRequest } from "../../conductor/drivers/redfish/client.ts";
import { parseRedfishDriverInfo } from "../../conductor/drivers/redfish/driver-info.ts";

// Error answers in the shapes BMCs send them (DMTF Base registry ids, with and without a version; the
// extended-info-only and code-only forms sushy's json_samples/error*.json carry)
const ANSWERS: Record<string, { status: number; body: unknown; api: number }> = {
  // a boot target the system does not list (iDRAC-style: versioned id in ExtendedInfo, generic code)
  "/bad-target": {
    status: 400,
    api: 400,
    body: {
      error: {
        code: "Base.1.12.GeneralError",
        message: "A general error has occurred. See ExtendedInfo for more information",
        "@Message.ExtendedInfo": [
          {
            MessageId: "Base.1.12.PropertyValueNotInList",
            Message:
              "The value 'Floppy' for the property BootSourceOverrideTarget is not in the list of acceptable values.",
          },
        ],
      },
    },
  },
  // a reset type the BMC does not allow (the id in `code`)
  "/bad-reset": {
    status: 400,
    api: 400,
    body: {
      error: {
        code: "Base.1.8.ActionParameterValueNotInList",
        message: "The value Nmi for the parameter ResetType is not in the list of acceptable values.",
      },
    },
  },
  // HPE iLO in POST: a 400 that is the BMC's state, not the request's (retried by its quirk; else 500)
  "/during-post": {
    status: 400,
    api: 500,
    body: {
      error: {
        code: "iLO.0.10.ExtendedInfo",
        message: "See @Message.ExtendedInfo for more information.",
        "@Message.ExtendedInfo": [{ MessageId: "iLO.2.14.UnableToModifyDuringSystemPOST" }],
      },
    },
  },
  // Dell's 409 on a power on too soon after an off: the BMC's state
  "/conflict": {
    status: 409,
    api: 500,
    body: { error: { code: "Base.1.12.ActionParameterValueConflict", message: "conflict" } },
  },
  // a BMC that broke: 500 with an internal error
  "/broken": {
    status: 500,
    api: 500,
    body: {
      error: { code: "Base.1.8.InternalError", message: "The request failed due to an internal error." },
    },
  },
  // a 400 without a registry id: nothing says the request was at fault
  "/bare-400": { status: 400, api: 500, body: "Bad Request" },
  "/unavailable": {
    status: 503,
    api: 503,
    body: { error: { code: "Base.1.8.ServiceTemporarilyUnavailable", message: "busy" } },
  },
};

let server: Server;
let client: RedfishClient;

beforeAll(async () => {
  server = createServer((request, response) => {
    const answer = ANSWERS[request.url ?? ""];
    response.writeHead(answer?.status ?? 404, { "content-type": "application/json" });
    response.end(JSON.stringify(answer?.body ?? {}));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  client = new RedfishClient(parseRedfishDriverInfo({ redfish_address: `http://127.0.0.1:${port}` }), {
    attempts: 2,
    backoffMs: 1,
  });
});
afterAll(async () => {
  await client.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("a BMC's error answer as the API answers it", () => {
  for (const [path, answer] of Object.entries(ANSWERS)) {
    it(`${path}: HTTP ${answer.status} from the BMC is ${answer.api} from the API`, async () => {
      const error = await client.request({ method: "PATCH", path, body: {} }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedfishError);
      expect((error as RedfishError).status).toBe(answer.status);
      const http = toHttpError(error);
      expect(http.status).toBe(answer.api);
      if (answer.api === 400) expect(http.message).toMatch(/not in the list of acceptable values/);
      else expect(http.message).toMatch(/^Driver operation failed: Redfish PATCH/);
    });
  }

  it("a connection refused is 503 (Ironic's TemporaryFailure), never 500", async () => {
    const gone = new RedfishClient(parseRedfishDriverInfo({ redfish_address: "http://127.0.0.1:1" }), {
      attempts: 1,
    });
    const error = await gone.request({ method: "GET", path: "/redfish/v1/" }).catch((e: unknown) => e);
    expect(toHttpError(error).status).toBe(503);
    await gone.close();
  });

  it("refusesRequest reads any body without throwing and only ever says so for a 400", () => {
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 599 }), fc.jsonValue(), (status, body) => {
        const refused = refusesRequest(status, body);
        expect(typeof refused).toBe("boolean");
        if (status !== 400) expect(refused).toBe(false);
      }),
    );
    fc.assert(
      fc.property(fc.constantFrom("PropertyUnknown", "ActionNotSupported"), fc.nat(20), (id, minor) => {
        expect(refusesRequest(400, { error: { code: `Base.1.${minor}.${id}` } })).toBe(true);
        expect(refusesRequest(400, { error: { code: `Base.1.${minor}.${id}Not` } })).toBe(false);
      }),
    );
  });
});
