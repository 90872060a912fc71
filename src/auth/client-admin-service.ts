import type { ServiceImpl } from "@connectrpc/connect";
import type { ClientAdminService } from "../../gen/provision/v1/client_admin_pb.js";
import * as clients from "./client-admin-calls.js";
import type { ClientAdminDependencies } from "./client-admin-dependencies.js";

/** ClientAdminService: each RPC handed to its named function. */
export function createClientAdminService(deps: ClientAdminDependencies): ServiceImpl<typeof ClientAdminService> {
  return {
    createClient: (request, context) => clients.createClient(deps, request, context),
    listClients: (request, context) => clients.listClients(deps, request, context),
    getClient: (request, context) => clients.getClient(deps, request, context),
    rotateClientSecret: (request, context) => clients.rotateClientSecret(deps, request, context),
    setClientEnabled: (request, context) => clients.setClientEnabled(deps, request, context),
    deleteClient: (request, context) => clients.deleteClient(deps, request, context),
  };
}
