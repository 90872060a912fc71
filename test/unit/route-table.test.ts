import type { DescMethod } from "@bufbuild/protobuf";
import test from "ava";
import { ActivationService } from "../../gen/provision/v1/activation_pb.js";
import { CatalogService } from "../../gen/provision/v1/catalog_pb.js";
import { parsePathTemplate } from "../../src/server/rest/path-template.js";
import { type RestRoute, RouteTable, routesFromAnnotations } from "../../src/server/rest/route-table.js";
import { ALL_SERVICES } from "../../src/services.js";

const ROUTES = routesFromAnnotations(ALL_SERVICES);
const TABLE = new RouteTable(ROUTES);
const PRODUCTS = "/api/v1/provision/admin/assets/products";
const PRODUCT_ID = "3f1c9a2e-5b7d-4e8f-9a01-23456789abcd";

/** The RPC a request reaches, with its bound variables, or the kind of miss. */
function resolve(table: RouteTable, method: string, path: string) {
  const match = table.match(method, path);
  return match.kind === "found"
    ? { rpc: match.route.rpc.name, variables: match.variables }
    : match.kind === "method-not-allowed"
      ? { allowed: match.allowed }
      : "not-found";
}

test("every unary RPC of every service has at least one REST route", (t) => {
  const routed = new Set(ROUTES.map((route) => route.rpc));
  const unary = ALL_SERVICES.flatMap((service) => service.methods).filter((rpc) => rpc.methodKind === "unary");
  t.true(unary.length > 30);
  t.deepEqual(
    unary.filter((rpc) => !routed.has(rpc)).map((rpc) => `${rpc.parent.name}.${rpc.name}`),
    [],
  );
  t.is(TABLE.size, ROUTES.length);
});

test("ActivateLicense and ActivateJwt are each served at both paths of the spec", (t) => {
  const paths = (rpc: DescMethod) =>
    ROUTES.filter((route) => route.rpc === rpc)
      .map((route) => `${route.httpMethod} ${route.template.text}`)
      .sort();
  t.deepEqual(paths(ActivationService.method.activateLicense), [
    "POST /api/v1/activations/license",
    "POST /api/v1/provision/activations/license",
  ]);
  t.deepEqual(paths(ActivationService.method.activateJwt), [
    "POST /api/v1/activations/jwt",
    "POST /api/v1/provision/activations/jwt",
  ]);
  for (const path of ["/api/v1/activations/license", "/api/v1/provision/activations/license"]) {
    t.like(resolve(TABLE, "POST", path), { rpc: "ActivateLicense", variables: {} });
  }
  for (const path of ["/api/v1/activations/jwt", "/api/v1/provision/activations/jwt"]) {
    t.like(resolve(TABLE, "POST", path), { rpc: "ActivateJwt", variables: {} });
  }
});

test("no two routes share a method and a path template, whatever their variables are called", (t) => {
  const keys = ROUTES.map((route) => `${route.httpMethod} ${route.template.text.replace(/\{[^}]+\}/g, "{}")}`);
  const duplicates = keys.filter((key, index) => keys.indexOf(key) !== index);
  t.deepEqual(duplicates, []);
});

test("POST .../products/import reaches ImportProducts, not a product id", (t) => {
  t.deepEqual(resolve(TABLE, "POST", `${PRODUCTS}/import`), { rpc: "ImportProducts", variables: {} });
  t.deepEqual(resolve(TABLE, "POST", PRODUCTS), { rpc: "CreateProduct", variables: {} });
});

test("GET .../products/<uuid> reaches GetProduct with the id bound", (t) => {
  t.deepEqual(resolve(TABLE, "GET", `${PRODUCTS}/${PRODUCT_ID}`), {
    rpc: "GetProduct",
    variables: { product_id: PRODUCT_ID },
  });
  t.deepEqual(resolve(TABLE, "PUT", `${PRODUCTS}/${PRODUCT_ID}/features/f-1`), {
    rpc: "UpdateFeature",
    variables: { product_id: PRODUCT_ID, feature_id: "f-1" },
  });
});

// The literal `import` only claims its own method: for any other method the path is an ordinary
// `{product_id}`, so PUT .../products/import is an update of a product whose id is "import" (which the
// service then refuses as not a UUID), and only methods with no route at all are 405.
test("PUT and GET .../products/import bind product_id to 'import'; DELETE there is 405 listing all three", (t) => {
  t.deepEqual(resolve(TABLE, "PUT", `${PRODUCTS}/import`), {
    rpc: "UpdateProduct",
    variables: { product_id: "import" },
  });
  t.deepEqual(resolve(TABLE, "GET", `${PRODUCTS}/import`), { rpc: "GetProduct", variables: { product_id: "import" } });
  t.deepEqual(resolve(TABLE, "DELETE", `${PRODUCTS}/import`), { allowed: ["GET", "POST", "PUT"] });
});

test("DELETE .../products is method-not-allowed with allowed GET and POST", (t) => {
  t.deepEqual(resolve(TABLE, "DELETE", PRODUCTS), { allowed: ["GET", "POST"] });
  t.deepEqual(resolve(TABLE, "PATCH", `${PRODUCTS}/${PRODUCT_ID}`), { allowed: ["GET", "PUT"] });
});

test("a path no template matches is not found, including a trailing slash or an empty segment", (t) => {
  t.is(resolve(TABLE, "GET", "/api/v1/provision/admin/nothing"), "not-found");
  t.is(resolve(TABLE, "GET", "/"), "not-found");
  t.is(resolve(TABLE, "GET", `${PRODUCTS}/`), "not-found");
  t.is(resolve(TABLE, "GET", `${PRODUCTS}//features`), "not-found");
  t.is(resolve(TABLE, "GET", `${PRODUCTS}/${PRODUCT_ID}/extra/segments`), "not-found");
  t.is(resolve(TABLE, "GET", PRODUCTS.toUpperCase()), "not-found", "literals are case-sensitive");
});

test("path variables are URL-decoded, an encoded slash staying inside its segment", (t) => {
  t.deepEqual(resolve(TABLE, "GET", `${PRODUCTS}/a%20b%2Fc%C3%A9`), {
    rpc: "GetProduct",
    variables: { product_id: "a b/cé" },
  });
  t.deepEqual(resolve(TABLE, "POST", "/api/v1/provision/usage/try-preallocate/s%3A1/api%2Bcalls"), {
    rpc: "TryPreallocate",
    variables: { session_id: "s:1", metric: "api+calls" },
  });
  t.is(resolve(TABLE, "GET", `${PRODUCTS}/%E0%A4%A`), "not-found", "a malformed escape binds nothing");
});

/** A route to an arbitrary catalog RPC at `template`, for tables built by hand. */
function route(httpMethod: string, template: string, rpc: DescMethod): RestRoute {
  return { httpMethod, template: parsePathTemplate(template), rpc, body: "", responseBody: "" };
}

function permutations<T>(items: T[]): T[][] {
  if (items.length <= 1) return [items];
  return items.flatMap((item, index) =>
    permutations([...items.slice(0, index), ...items.slice(index + 1)]).map((rest) => [item, ...rest]),
  );
}

test("a literal segment wins over a variable whatever order the routes are listed in", (t) => {
  const literal = route("POST", "/p/import", CatalogService.method.importProducts);
  const variable = route("POST", "/p/{id}", CatalogService.method.updateProduct);
  const other = route("GET", "/p", CatalogService.method.listProducts);
  for (const order of permutations([literal, variable, other])) {
    const listed = order.map((entry) => `${entry.httpMethod} ${entry.template.text}`).join(", ");
    const table = new RouteTable(order);
    t.like(resolve(table, "POST", "/p/import"), { rpc: "ImportProducts" }, `listed as ${listed}`);
    t.like(resolve(table, "POST", "/p/42"), { rpc: "UpdateProduct", variables: { id: "42" } }, `listed as ${listed}`);
  }
});

test("the spec's table matches the same whatever order its routes are listed in", (t) => {
  const reversed = new RouteTable([...ROUTES].reverse());
  for (const [method, path] of [
    ["POST", `${PRODUCTS}/import`],
    ["GET", `${PRODUCTS}/import`],
    ["PUT", `${PRODUCTS}/${PRODUCT_ID}/features/f-1`],
    ["POST", "/api/v1/provision/activations/license"],
    ["POST", "/api/v1/provision/activations/abc/renew"],
    ["DELETE", PRODUCTS],
  ]) {
    t.deepEqual(resolve(reversed, method, path), resolve(TABLE, method, path), `${method} ${path}`);
  }
});
