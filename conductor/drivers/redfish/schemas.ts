import { z } from "zod";

/**
 * The Redfish resources Anvil reads, as zod schemas: only the fields it uses are named, every one optional
 * where DMTF allows a service to leave it out, unknown keys kept (looseObject) so a vendor's extra fields pass.
 * A BMC is outside input: nothing here trusts a shape without parsing it.
 */

const text = z.string().max(4096);
const link = z.looseObject({ "@odata.id": text });
const count = z.number().int().nonnegative().max(1e7);

export const ServiceRootSchema = z.looseObject({
  RedfishVersion: text.optional(),
  Systems: link.optional(),
  Managers: link.optional(),
  Chassis: link.optional(),
  SessionService: link.optional(),
  Links: z.looseObject({ Sessions: link.optional() }).optional(),
});
export type ServiceRoot = z.infer<typeof ServiceRootSchema>;

export const CollectionSchema = z.looseObject({
  Members: z.array(link).max(10_000),
});

const allowable = z.array(text).max(64);

export const BootSchema = z.looseObject({
  BootSourceOverrideTarget: text.nullable().optional(),
  BootSourceOverrideEnabled: text.nullable().optional(),
  BootSourceOverrideMode: text.nullable().optional(),
  "BootSourceOverrideTarget@Redfish.AllowableValues": allowable.optional(),
  "BootSourceOverrideMode@Redfish.AllowableValues": allowable.optional(),
});

export const ComputerSystemSchema = z.looseObject({
  Id: text.optional(),
  Name: text.nullable().optional(),
  Manufacturer: text.nullable().optional(),
  Model: text.nullable().optional(),
  SerialNumber: text.nullable().optional(),
  HostName: text.nullable().optional(),
  BiosVersion: text.nullable().optional(),
  PowerState: text.nullable().optional(),
  /** Status.Health: OK, Warning or Critical (Ironic 1.109's node health) */
  Status: z.looseObject({ Health: text.nullable().optional() }).optional(),
  IndicatorLED: text.nullable().optional(),
  LocationIndicatorActive: z.boolean().nullable().optional(),
  Boot: BootSchema.optional(),
  ProcessorSummary: z
    .looseObject({
      Count: count.nullable().optional(),
      LogicalProcessorCount: count.nullable().optional(),
      Model: text.nullable().optional(),
    })
    .optional(),
  MemorySummary: z
    .looseObject({ TotalSystemMemoryGiB: z.number().nonnegative().nullable().optional() })
    .optional(),
  Processors: link.optional(),
  Memory: link.optional(),
  Storage: link.optional(),
  SimpleStorage: link.optional(),
  EthernetInterfaces: link.optional(),
  SecureBoot: link.optional(),
  Actions: z
    .looseObject({
      "#ComputerSystem.Reset": z
        .looseObject({ target: text, "ResetType@Redfish.AllowableValues": allowable.optional() })
        .optional(),
    })
    .optional(),
});
export type ComputerSystem = z.infer<typeof ComputerSystemSchema>;

export const ProcessorSchema = z.looseObject({
  Id: text.optional(),
  ProcessorType: text.nullable().optional(),
  ProcessorArchitecture: text.nullable().optional(),
  InstructionSet: text.nullable().optional(),
  Model: text.nullable().optional(),
  MaxSpeedMHz: z.number().nonnegative().nullable().optional(),
  TotalCores: count.nullable().optional(),
  TotalThreads: count.nullable().optional(),
});
export type Processor = z.infer<typeof ProcessorSchema>;

export const MemoryModuleSchema = z.looseObject({
  CapacityMiB: z.number().nonnegative().max(1e9).nullable().optional(),
  Status: z.looseObject({ State: text.nullable().optional() }).optional(),
});

export const DriveSchema = z.looseObject({
  Id: text.optional(),
  Name: text.nullable().optional(),
  Model: text.nullable().optional(),
  Manufacturer: text.nullable().optional(),
  SerialNumber: text.nullable().optional(),
  CapacityBytes: z.number().int().nonnegative().nullable().optional(),
  MediaType: text.nullable().optional(),
  Protocol: text.nullable().optional(),
});
export type Drive = z.infer<typeof DriveSchema>;

export const StorageSchema = z.looseObject({
  Id: text.optional(),
  Drives: z.array(link).max(1024).optional(),
});

export const SimpleStorageSchema = z.looseObject({
  Id: text.optional(),
  Devices: z
    .array(
      z.looseObject({
        Name: text.nullable().optional(),
        Model: text.nullable().optional(),
        Manufacturer: text.nullable().optional(),
        CapacityBytes: z.number().int().nonnegative().nullable().optional(),
      }),
    )
    .max(1024)
    .optional(),
});

export const EthernetInterfaceSchema = z.looseObject({
  Id: text.optional(),
  Name: text.nullable().optional(),
  MACAddress: text.nullable().optional(),
  PermanentMACAddress: text.nullable().optional(),
  SpeedMbps: z.number().int().nonnegative().nullable().optional(),
  LinkStatus: text.nullable().optional(),
  IPv4Addresses: z
    .array(z.looseObject({ Address: text.nullable().optional() }))
    .max(256)
    .optional(),
  IPv6Addresses: z
    .array(z.looseObject({ Address: text.nullable().optional() }))
    .max(256)
    .optional(),
});
export type EthernetInterface = z.infer<typeof EthernetInterfaceSchema>;

export const SecureBootSchema = z.looseObject({
  SecureBootEnable: z.boolean().nullable().optional(),
  SecureBootCurrentBoot: text.nullable().optional(),
});

/** A Task (the monitor a 202 points at): TaskState tells whether the action finished. */
export const TaskSchema = z.looseObject({
  TaskState: text.optional(),
  TaskStatus: text.nullable().optional(),
  Messages: z
    .array(z.looseObject({ Message: text.optional() }))
    .max(64)
    .optional(),
});

/** Redfish's error body: {"error": {"code", "message", "@Message.ExtendedInfo": [...]}}. */
export const ErrorBodySchema = z.looseObject({
  error: z.looseObject({
    code: text.optional(),
    message: text.optional(),
    "@Message.ExtendedInfo": z
      .array(z.looseObject({ MessageId: text.optional(), Message: text.optional() }))
      .max(64)
      .optional(),
  }),
});

/** The MessageIds of an error answer: `error.code` and every `@Message.ExtendedInfo` entry's. */
export function messageIdsOf(body: unknown): string[] {
  const parsed = ErrorBodySchema.safeParse(body);
  if (!parsed.success) return [];
  const extended = (parsed.data.error["@Message.ExtendedInfo"] ?? []).map((info) => info.MessageId ?? "");
  return [parsed.data.error.code ?? "", ...extended].filter((id) => id.length > 0);
}

/** The BMC's own words for an error body, for last_error; "" when it has none we can read. */
export function errorMessageOf(body: unknown): string {
  const parsed = ErrorBodySchema.safeParse(body);
  if (!parsed.success) return "";
  const { code, message } = parsed.data.error;
  const extended = (parsed.data.error["@Message.ExtendedInfo"] ?? [])
    .map((info) => [info.MessageId, info.Message].filter(Boolean).join(": "))
    .filter((line) => line.length > 0);
  return [...extended, message ?? code ?? ""].filter((line) => line.length > 0).join("; ");
}
