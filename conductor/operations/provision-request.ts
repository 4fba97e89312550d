import type { ConfigDriveContent, ProvisionBody } from "../../shared/api.ts";
import type { NodeInterfaces } from "../drivers/hardware-type.ts";
import { Invalid } from "../errors.ts";
import { bookkeeping } from "../flows/step-runner.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { Store } from "../db/store.ts";
import { vifNetworkData } from "../drivers/network/network-data.ts";
import { buildConfigDrive } from "../images/configdrive.ts";
import { declaredSteps, validateRequested } from "../tasks/step-plan.ts";

/**
 * A config drive as Ironic stores it: a string (base64 gzipped ISO, or a URL) as given, the JSON form built
 * into an ISO. A JSON form without network_data gets the node's attached VIFs (their ports' MACs) as its
 * network_data, as Ironic's network interface describes them; an explicit network_data is kept as given.
 * Read under the node's lock, so a VIF attached or detached meanwhile cannot be half in the drive.
 */
export async function configDriveOf(
  store: Store,
  node: NodeRecord,
  value: string | ConfigDriveContent,
): Promise<string> {
  if (typeof value === "string") return value;
  if (value.network_data !== undefined) return buildConfigDrive(value);
  const [ports, portgroups] = await Promise.all([
    store.listPorts({ node_uuid: node.uuid }, {}),
    store.listPortgroups({ node_uuid: node.uuid }, {}),
  ]);
  const network_data = vifNetworkData(ports, portgroups);
  return buildConfigDrive(network_data === null ? value : { ...value, network_data });
}

/**
 * The operator's steps of a provision request, validated against the node's interfaces before anything is
 * locked or changed (Ironic's rules: clean_steps only and always with `clean`, deploy_steps with
 * `active`/`rebuild`, service_steps only and always with `service`, disable_ramdisk with `clean` or `service`). Returns the driver_internal_info entries to record.
 * @throws Invalid (400)
 */
export function requestedSteps(
  interfaces: () => NodeInterfaces,
  body: ProvisionBody,
): Record<string, unknown> {
  const clean = bookkeeping("clean");
  const deploy = bookkeeping("deploy");
  const service = bookkeeping("service");
  if (body.clean_steps !== undefined && body.target !== "clean") {
    throw new Invalid('"clean_steps" is only valid when setting target provision state to clean');
  }
  if (body.deploy_steps !== undefined && body.target !== "active" && body.target !== "rebuild") {
    throw new Invalid(
      '"deploy_steps" is only valid when setting target provision state to active or rebuild',
    );
  }
  // Ironic tests the list's truth here: an empty one passes with any verb
  if (body.service_steps?.length && body.target !== "service") {
    throw new Invalid('"service_steps" is only valid when setting target provision state to service');
  }
  if (body.disable_ramdisk !== undefined && body.target !== "clean" && body.target !== "service") {
    throw new Invalid(
      '"disable_ramdisk" is only valid when setting target provision state to clean or service',
    );
  }
  switch (body.target) {
    case "clean": {
      if (body.clean_steps === undefined) {
        throw new Invalid('"clean_steps" is required when setting target provision state to clean');
      }
      const disableRamdisk = body.disable_ramdisk === true;
      const steps = validateRequested(body.clean_steps, declaredSteps(interfaces(), "clean"), {
        kind: "clean",
        disableRamdisk,
      });
      return { [clean.requested]: steps, [clean.disableRamdisk]: disableRamdisk };
    }
    case "active":
    case "rebuild": {
      const steps =
        body.deploy_steps === undefined
          ? undefined
          : validateRequested(body.deploy_steps, declaredSteps(interfaces(), "deploy"), { kind: "deploy" });
      return { [deploy.requested]: steps };
    }
    case "service": {
      if (body.service_steps === undefined || body.service_steps.length === 0) {
        throw new Invalid('"service_steps" is required when setting target provision state to service');
      }
      const disableRamdisk = body.disable_ramdisk === true;
      const steps = validateRequested(body.service_steps, declaredSteps(interfaces(), "service"), {
        kind: "service",
        disableRamdisk,
      });
      return { [service.requested]: steps, [service.disableRamdisk]: disableRamdisk };
    }
    case "provide":
    case "deleted":
      return { [clean.requested]: undefined, [clean.disableRamdisk]: undefined };
    case "manage":
    case "inspect":
    case "abort":
    case "rescue":
    case "unrescue":
    case "adopt":
    case "unhold":
      return {};
  }
}
