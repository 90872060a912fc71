import test from "ava";
import { type HostLookup, resolveTarget } from "../../src/webhooks/safe-resolve.js";
import {
  checkAddresses,
  checkWebhookUrl,
  isPublicAddress,
  isRefusal,
  isTrustedAddress,
  parseTrustedTargets,
  type TrustedTargets,
  type WebhookTarget,
} from "../../src/webhooks/target-policy.js";

// Pure classification: nothing here connects anywhere, so any address may be named.

const NONE = parseTrustedTargets(undefined);

function target(url: string, trusted: TrustedTargets = NONE): WebhookTarget {
  const checked = checkWebhookUrl(url, trusted);
  if (isRefusal(checked)) throw new Error(`${url} refused: ${checked.refusal}`);
  return checked;
}

function refusalOf(url: string, trusted: TrustedTargets = NONE): string | undefined {
  const checked = checkWebhookUrl(url, trusted);
  return isRefusal(checked) ? checked.refusal : undefined;
}

/** A lookup answering from a table, counting the names asked. */
function fakeLookup(answers: Record<string, string[]>): HostLookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (hostname: string) => {
    asked.push(hostname);
    const found = answers[hostname];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return found;
  };
  return Object.assign(lookup, { asked });
}

// isPublicAddress

const NON_PUBLIC = [
  ["0.0.0.0", "this network"],
  ["0.255.255.255", "this network, last"],
  ["10.0.0.1", "private"],
  ["10.255.255.255", "private, last"],
  ["100.64.0.0", "carrier-grade NAT"],
  ["100.127.255.255", "carrier-grade NAT, last"],
  ["127.0.0.1", "loopback"],
  ["127.0.0.2", "loopback"],
  ["127.255.255.254", "loopback"],
  ["169.254.169.254", "link-local (cloud metadata)"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private, last"],
  ["192.0.0.8", "IETF protocol assignments"],
  ["192.0.2.1", "documentation"],
  ["192.88.99.1", "6to4 relay"],
  ["192.168.1.1", "private"],
  ["198.18.0.1", "benchmarking"],
  ["198.19.255.255", "benchmarking, last"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.9", "documentation"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "broadcast"],
  ["::", "unspecified"],
  ["::1", "loopback"],
  ["0:0:0:0:0:0:0:1", "loopback, long form"],
  ["::7f00:2", "IPv4-compatible (deprecated)"],
  ["fc00::1", "unique local"],
  ["fd12:3456::1", "unique local"],
  ["fe80::1", "link-local"],
  ["fe80::1%eth0", "link-local with a zone"],
  ["febf:ffff::1", "link-local, last"],
  ["fec0::1", "site-local"],
  ["ff02::1", "multicast"],
  ["100::1", "discard-only"],
  ["2001::1", "Teredo"],
  ["2001:1ff::1", "IETF protocol assignments, last"],
  ["2001:db8::1", "documentation"],
  ["3fff::1", "documentation"],
  ["2002:7f00:1::1", "6to4"],
  ["64:ff9b:1::1", "local-use NAT64"],
  ["::ffff:127.0.0.2", "IPv4-mapped loopback"],
  ["::ffff:7f00:2", "IPv4-mapped loopback, hex"],
  ["0:0:0:0:0:ffff:a00:1", "IPv4-mapped private, long form"],
  ["::ffff:169.254.169.254", "IPv4-mapped link-local"],
  ["::ffff:0.0.0.0", "IPv4-mapped this network"],
  ["64:ff9b::127.0.0.1", "NAT64 of loopback"],
  ["64:ff9b::a00:1", "NAT64 of private"],
  ["64:ff9b::c0a8:101", "NAT64 of private"],
] as const;

const PUBLIC = [
  ["8.8.8.8", "a public resolver"],
  ["1.1.1.1", "a public resolver"],
  ["9.255.255.255", "just below 10/8"],
  ["11.0.0.0", "just above 10/8"],
  ["100.63.255.255", "just below 100.64/10"],
  ["100.128.0.0", "just above 100.64/10"],
  ["126.255.255.255", "just below 127/8"],
  ["128.0.0.0", "just above 127/8"],
  ["172.15.255.255", "just below 172.16/12"],
  ["172.32.0.0", "just above 172.16/12"],
  ["192.0.1.1", "between 192.0.0/24 and 192.0.2/24"],
  ["192.169.0.0", "just above 192.168/16"],
  ["198.17.255.255", "just below 198.18/15"],
  ["198.20.0.0", "just above 198.18/15"],
  ["223.255.255.255", "just below multicast"],
  ["2606:4700:4700::1111", "a public resolver"],
  ["2a00:1450:4001::1", "global unicast"],
  ["2001:200::1", "just above 2001::/23"],
  ["2003::1", "just above 6to4"],
  ["::ffff:8.8.8.8", "IPv4-mapped public"],
  ["::ffff:808:808", "IPv4-mapped public, hex"],
  ["64:ff9b::8.8.8.8", "NAT64 of public"],
  ["64:ff9b::808:808", "NAT64 of public, hex"],
] as const;

for (const [address, what] of NON_PUBLIC) {
  test(`${address} is not public: ${what}`, (t) => {
    t.false(isPublicAddress(address));
  });
}

for (const [address, what] of PUBLIC) {
  test(`${address} is public: ${what}`, (t) => {
    t.true(isPublicAddress(address));
  });
}

test("what is no IP address is not public", (t) => {
  for (const text of ["", "example.com", "127.1", "2130706434", "[::1]", "8.8.8.8/32", "::ffff:8.8.8"]) {
    t.false(isPublicAddress(text), text);
  }
});

// parseTrustedTargets

test("trusted targets: names, addresses and networks, trimmed, empty entries skipped", (t) => {
  const trusted = parseTrustedTargets(" 127.0.0.1 , Hooks.Internal.Example. ,, 10.0.0.0/8, fd00::/8, ::1 ");
  t.false(trusted.isEmpty);
  t.deepEqual([...trusted.names], ["hooks.internal.example"]);
  for (const address of ["127.0.0.1", "10.1.2.3", "fd00::5", "::1", "::ffff:127.0.0.1", "::ffff:a01:203"]) {
    t.true(isTrustedAddress(address, trusted), address);
  }
  for (const address of ["127.0.0.2", "11.0.0.1", "fe80::1", "::2", "::ffff:127.0.0.2", "64:ff9b::7f00:1"]) {
    t.false(isTrustedAddress(address, trusted), address);
  }
});

test("no trusted targets", (t) => {
  for (const text of [undefined, "", " , "]) {
    const trusted = parseTrustedTargets(text);
    t.true(trusted.isEmpty);
    t.is(trusted.names.size, 0);
    t.false(isTrustedAddress("127.0.0.1", trusted));
  }
});

test("a bad trusted target is named in the error", (t) => {
  const bad = [
    "127.1", // short IPv4 form, read as an address by URLs
    "2130706434",
    "10.0.0.0/0",
    "10.0.0.0/33",
    "::/0",
    "::1/129",
    "10.0.0.0/8/8",
    "10.0.0.0/x",
    "[::1]",
    "fe80::1%eth0",
    "http://hooks.example",
    "hooks.example:8080",
    "*.example.com",
    "under_score.example",
    "-leading.example",
    "a..b",
    "example.0x7f",
    `${"a".repeat(64)}.example`,
  ];
  for (const entry of bad) {
    const error = t.throws(() => parseTrustedTargets(`127.0.0.1,${entry}`), undefined, entry);
    t.true(error?.message.includes(JSON.stringify(entry)), `${entry}: ${error?.message}`);
  }
});

// checkWebhookUrl

test("an https URL becomes a target with host name and port", (t) => {
  const plain = target("https://Hooks.Example.com/in?x=1#frag");
  t.is(plain.hostname, "hooks.example.com");
  t.is(plain.port, 443);
  t.false(plain.trustedName);
  t.is(plain.url.href, "https://hooks.example.com/in?x=1", "fragment dropped");
  t.is(target("https://hooks.example.com.:8443/").hostname, "hooks.example.com", "trailing dot dropped");
  t.is(target("https://hooks.example.com.:8443/").port, 8443);
  t.is(target("https://[2606:4700::1]/").hostname, "2606:4700::1", "brackets stripped");
});

test("the URL parser's forms of IPv4 become dotted addresses", (t) => {
  const trusted = parseTrustedTargets("127.0.0.1");
  for (const url of [
    "http://2130706434:8080/",
    "http://0x7f.0.0.2:8080/",
    "http://127.2:8080/",
    "http://0177.0.0.2:8080/",
  ]) {
    t.is(target(url, trusted).hostname, "127.0.0.2", url);
  }
  t.is(target("http://[::ffff:127.0.0.2]:8080/", trusted).hostname, "::ffff:7f00:2");
});

test("URL forms that are refused", (t) => {
  const trusted = parseTrustedTargets("127.0.0.1");
  const refused: [string, RegExp][] = [
    ["not a url", /absolute/],
    ["/relative/path", /absolute/],
    ["ftp://hooks.example.com/", /scheme ftp:/],
    ["file:///etc/passwd", /scheme file:/],
    ["gopher://127.0.0.1:70/", /scheme gopher:/],
    ["javascript:alert(1)", /scheme javascript:/],
    ["https://user:pw@hooks.example.com/", /user name or password/],
    ["http://u:p@127.0.0.1:8080/", /user name or password/],
    ["https://user@hooks.example.com/", /user name or password/],
    ["https://hooks.example.com:0/", /port 0/],
    ["http://localhost:8080/", /localhost/],
    ["https://localhost/", /localhost/],
    ["https://api.localhost/", /localhost/],
  ];
  for (const [url, reason] of refused) {
    t.regex(refusalOf(url, trusted) ?? "accepted", reason, url);
  }
});

test("plain http is refused at once when nothing is trusted", (t) => {
  t.regex(refusalOf("http://hooks.example.com/") ?? "accepted", /http is allowed only/);
  t.regex(refusalOf("http://127.0.0.1:8080/") ?? "accepted", /http is allowed only/);
  t.is(refusalOf("http://hooks.example.com/", parseTrustedTargets("10.0.0.0/8")), undefined, "decided by addresses");
});

test("a host trusted by name is marked, localhost included", (t) => {
  const trusted = parseTrustedTargets("hooks.internal,localhost");
  t.true(target("http://HOOKS.internal./x", trusted).trustedName);
  t.true(target("http://localhost:8080/", trusted).trustedName);
  t.false(target("https://other.internal/", trusted).trustedName);
  t.false(target("https://sub.hooks.internal/", trusted).trustedName, "names are exact, not suffixes");
});

// checkAddresses

test("https: every address must be public or trusted", (t) => {
  const trusted = parseTrustedTargets("127.0.0.1,10.0.0.0/8");
  t.is(checkAddresses(["8.8.8.8", "2606:4700::1"], NONE, "https:"), undefined);
  t.is(checkAddresses(["8.8.8.8", "127.0.0.1", "10.9.9.9"], trusted, "https:"), undefined);
  t.deepEqual(checkAddresses(["8.8.8.8", "127.0.0.2"], trusted, "https:"), {
    refusal: "address not allowed: 127.0.0.2",
  });
  t.deepEqual(checkAddresses(["::1"], trusted, "https:"), { refusal: "address not allowed: ::1" });
  t.deepEqual(checkAddresses(["0.0.0.0"], trusted, "https:"), { refusal: "address not allowed: 0.0.0.0" });
  t.deepEqual(checkAddresses(["127.0.0.1"], NONE, "https:"), { refusal: "address not allowed: 127.0.0.1" });
});

test("http: every address must be trusted, public ones too", (t) => {
  const trusted = parseTrustedTargets("127.0.0.1,10.0.0.0/8");
  t.is(checkAddresses(["127.0.0.1", "10.0.0.7", "::ffff:127.0.0.1"], trusted, "http:"), undefined);
  t.deepEqual(checkAddresses(["127.0.0.1", "8.8.8.8"], trusted, "http:"), {
    refusal: "http not allowed: 8.8.8.8 is not a trusted target",
  });
  t.deepEqual(checkAddresses(["::ffff:127.0.0.2"], trusted, "http:"), {
    refusal: "address not allowed: ::ffff:127.0.0.2",
  });
});

// resolveTarget (with a fake lookup: no DNS)

test("an IP literal is its own address and is not looked up", async (t) => {
  const trusted = parseTrustedTargets("127.0.0.1");
  const lookup = fakeLookup({});
  t.deepEqual(await resolveTarget(target("http://127.0.0.1:8080/", trusted), trusted, lookup), {
    address: "127.0.0.1",
    addresses: ["127.0.0.1"],
  });
  const refused = [
    ["http://127.0.0.2:8080/", "127.0.0.2"],
    ["http://2130706434:8080/", "127.0.0.2"],
    ["http://0.0.0.0:8080/", "0.0.0.0"],
    ["http://[::ffff:127.0.0.2]:8080/", "::ffff:7f00:2"],
  ];
  for (const [url, address] of refused) {
    t.deepEqual(await resolveTarget(target(url, trusted), trusted, lookup), {
      refusal: `address not allowed: ${address}`,
    });
  }
  t.deepEqual(await resolveTarget(target("http://[::1]:8080/", trusted), trusted, lookup), {
    refusal: "address not allowed: ::1",
  });
  t.deepEqual(lookup.asked, []);
});

test("a name: every address it resolves to is checked", async (t) => {
  const trusted = parseTrustedTargets("127.0.0.1");
  const lookup = fakeLookup({
    "public.example": ["8.8.8.8", "2606:4700::1111"],
    "mixed.example": ["8.8.8.8", "10.0.0.1"],
    "loopback.example": ["127.0.0.1"],
    "rebound.example": ["127.0.0.2"],
    "empty.example": [],
  });
  t.deepEqual(await resolveTarget(target("https://public.example/", trusted), trusted, lookup), {
    address: "8.8.8.8",
    addresses: ["8.8.8.8", "2606:4700::1111"],
  });
  t.deepEqual(await resolveTarget(target("https://mixed.example/", trusted), trusted, lookup), {
    refusal: "address not allowed: 10.0.0.1",
  });
  t.deepEqual(await resolveTarget(target("http://public.example/", trusted), trusted, lookup), {
    refusal: "http not allowed: 8.8.8.8 is not a trusted target",
  });
  t.deepEqual(await resolveTarget(target("http://loopback.example:8080/", trusted), trusted, lookup), {
    address: "127.0.0.1",
    addresses: ["127.0.0.1"],
  });
  t.deepEqual(await resolveTarget(target("http://rebound.example:8080/", trusted), trusted, lookup), {
    refusal: "address not allowed: 127.0.0.2",
  });
  t.deepEqual(await resolveTarget(target("https://empty.example/", trusted), trusted, lookup), {
    refusal: "dns: no address for empty.example",
  });
  t.deepEqual(await resolveTarget(target("https://missing.example/", trusted), trusted, lookup), {
    refusal: "dns: ENOTFOUND resolving missing.example",
  });
});

test("a name trusted by name is resolved and exempt", async (t) => {
  const trusted = parseTrustedTargets("hooks.internal");
  const lookup = fakeLookup({ "hooks.internal": ["10.1.1.1", "10.1.1.1", "fd00::1"] });
  t.deepEqual(await resolveTarget(target("http://hooks.internal/", trusted), trusted, lookup), {
    address: "10.1.1.1",
    addresses: ["10.1.1.1", "fd00::1"],
  });
  t.deepEqual(lookup.asked, ["hooks.internal"]);
});

test("each resolution asks again: a name that moves to a refused address is refused", async (t) => {
  const trusted = parseTrustedTargets("127.0.0.1");
  const answers = [["127.0.0.1"], ["127.0.0.2"]];
  const lookup: HostLookup = async () => answers.shift() ?? [];
  const rebinding = target("http://rebinding.example:8080/", trusted);
  t.deepEqual(await resolveTarget(rebinding, trusted, lookup), { address: "127.0.0.1", addresses: ["127.0.0.1"] });
  t.deepEqual(await resolveTarget(rebinding, trusted, lookup), { refusal: "address not allowed: 127.0.0.2" });
});

test("a lookup that never answers is a dns time-out", async (t) => {
  const never: HostLookup = () => new Promise(() => {});
  const started = Date.now();
  t.deepEqual(await resolveTarget(target("https://slow.example/"), NONE, never, 50), {
    refusal: "dns: time-out resolving slow.example",
  });
  t.true(Date.now() - started < 2000);
});
