import test from "ava";
import { ConfigError, loadConfig, type ProxyTrust } from "../../src/platform/config.js";
import { addressBucket, resolveClientAddress } from "../../src/server/client-address.js";

/** Trusted: the load balancers of 10.0.0.0/8, the local host, and the IPv6 proxies of fd00::/8. */
function trustedProxies(): ProxyTrust {
  const trust = loadConfig({ TRUSTED_PROXIES: "10.0.0.0/8, 127.0.0.1, fd00::/8" }).trustedProxies;
  if (!trust) throw new Error("TRUSTED_PROXIES gave no trust");
  return trust;
}

// resolveClientAddress

test("without trusted proxies the peer is the client, whatever X-Forwarded-For says", (t) => {
  t.is(resolveClientAddress("192.0.2.10", undefined, undefined), "192.0.2.10");
  t.is(resolveClientAddress("192.0.2.10", "203.0.113.7", undefined), "192.0.2.10");
  t.is(resolveClientAddress("2001:db8::1", "203.0.113.7", undefined), "2001:db8::1");
});

test("a peer that is no address is unknown", (t) => {
  t.is(resolveClientAddress(undefined, undefined, undefined), "unknown");
  t.is(resolveClientAddress("", "203.0.113.7", trustedProxies()), "unknown");
  t.is(resolveClientAddress("not-an-address", "203.0.113.7", trustedProxies()), "unknown");
});

test("a trusted peer's X-Forwarded-For names the client", (t) => {
  t.is(resolveClientAddress("10.1.2.3", "203.0.113.7", trustedProxies()), "203.0.113.7");
  t.is(resolveClientAddress("127.0.0.1", " 203.0.113.7 ", trustedProxies()), "203.0.113.7");
  t.is(resolveClientAddress("10.1.2.3", undefined, trustedProxies()), "10.1.2.3", "no header: the peer");
});

test("the chain is walked right to left while the hop in hand is trusted", (t) => {
  const list = trustedProxies();
  t.is(resolveClientAddress("10.0.0.2", "203.0.113.7, 10.0.0.5", list), "203.0.113.7", "through a second proxy");
  t.is(
    resolveClientAddress("10.0.0.2", "198.51.100.1, 203.0.113.7, 10.0.0.5", list),
    "203.0.113.7",
    "what the client wrote left of its own address is not believed",
  );
  t.is(resolveClientAddress("10.0.0.2", "10.0.0.9, 10.0.0.5", list), "10.0.0.9", "trusted all the way: the leftmost");
  t.is(resolveClientAddress("10.0.0.2", ["203.0.113.7", "10.0.0.5"], list), "203.0.113.7", "repeated headers");
  t.is(resolveClientAddress("10.0.0.2", ["198.51.100.1, 203.0.113.7", "10.0.0.5"], list), "203.0.113.7");
});

test("an untrusted peer's X-Forwarded-For is ignored", (t) => {
  const list = trustedProxies();
  t.is(resolveClientAddress("192.0.2.10", "203.0.113.7", list), "192.0.2.10");
  t.is(resolveClientAddress("192.0.2.10", "203.0.113.7, 10.0.0.5", list), "192.0.2.10");
  t.is(resolveClientAddress("127.0.0.2", "203.0.113.7", list), "127.0.0.2", "only 127.0.0.1 of loopback is trusted");
});

test("an entry that is no address stops the walk at the last good hop", (t) => {
  const list = trustedProxies();
  t.is(resolveClientAddress("10.0.0.2", "203.0.113.7, garbage", list), "10.0.0.2");
  t.is(resolveClientAddress("10.0.0.2", "203.0.113.7, bogus, 10.0.0.5", list), "10.0.0.5");
  t.is(resolveClientAddress("10.0.0.2", "203.0.113.7:4711", list), "10.0.0.2", "an address with a port");
  t.is(resolveClientAddress("10.0.0.2", "", list), "10.0.0.2", "an empty header");
  t.is(resolveClientAddress("10.0.0.2", " , ", list), "10.0.0.2", "only empty entries");
});

test("empty entries are skipped, as proxy-addr reads the header", (t) => {
  const list = trustedProxies();
  t.is(resolveClientAddress("10.0.0.2", "203.0.113.7, ", list), "203.0.113.7");
  t.is(resolveClientAddress("10.0.0.2", "203.0.113.7,,10.0.0.5", list), "203.0.113.7");
});

test("a trusted hop is asked about with its distance from the server", (t) => {
  const asked: Array<[string, number]> = [];
  const trust: ProxyTrust = (address, hop) => {
    asked.push([address, hop]);
    return hop < 2;
  };
  t.is(resolveClientAddress("192.0.2.1", "198.51.100.9, 203.0.113.7, 192.0.2.2", trust), "203.0.113.7");
  t.deepEqual(asked, [
    ["192.0.2.1", 0],
    ["192.0.2.2", 1],
    ["203.0.113.7", 2],
  ]);
});

test("IPv4-mapped IPv6 addresses become IPv4, for the peer and for hops", (t) => {
  const list = trustedProxies();
  t.is(resolveClientAddress("::ffff:192.0.2.10", undefined, undefined), "192.0.2.10");
  t.is(resolveClientAddress("::FFFF:192.0.2.10", undefined, undefined), "192.0.2.10");
  t.is(resolveClientAddress("::ffff:10.1.2.3", "203.0.113.7", list), "203.0.113.7", "a mapped peer is trusted as IPv4");
  t.is(resolveClientAddress("::ffff:127.0.0.1", "::ffff:203.0.113.7", list), "203.0.113.7");
  t.is(resolveClientAddress("::ffff:192.0.2.10", "203.0.113.7", list), "192.0.2.10", "mapped and untrusted");
});

test("IPv6 peers and hops are trusted by their own list and given in lower case", (t) => {
  const list = trustedProxies();
  t.is(resolveClientAddress("FD00::1", "2001:DB8::5", list), "2001:db8::5");
  t.is(resolveClientAddress("2001:DB8::1", "203.0.113.7", list), "2001:db8::1");
  t.is(resolveClientAddress("fd00::1", "203.0.113.7, 10.0.0.5", list), "203.0.113.7", "mixed families");
});

// addressBucket

test("IPv4 addresses are their own bucket", (t) => {
  t.is(addressBucket("203.0.113.7"), "203.0.113.7");
  t.not(addressBucket("203.0.113.7"), addressBucket("203.0.113.8"));
  t.is(addressBucket("unknown"), "unknown");
});

test("IPv6 addresses are bucketed by their /64", (t) => {
  t.is(addressBucket("2001:db8::1"), addressBucket("2001:db8:0:0:ffff::2"));
  t.is(addressBucket("2001:db8::1"), addressBucket("2001:0db8:0000:0000:1234:5678:9abc:def0"));
  t.is(addressBucket("2001:db8::1"), addressBucket("2001:db8::"));
  t.not(addressBucket("2001:db8::1"), addressBucket("2001:db8:0:1::1"), "the next /64");
  t.not(addressBucket("2001:db8::1"), addressBucket("2001:db9::1"));
  t.regex(addressBucket("2001:db8::1"), /\/64$/);
  t.is(addressBucket("2001:db8:1:2:3:4:5:6"), addressBucket("2001:db8:1:2::"));
  t.is(addressBucket("::1"), addressBucket("::2"));
  t.is(addressBucket("64:ff9b::192.0.2.1"), addressBucket("64:ff9b::198.51.100.1"), "embedded IPv4 in the host part");
});

// TRUSTED_PROXIES

test("TRUSTED_PROXIES accepts addresses and CIDR networks of both families", (t) => {
  const trust = loadConfig({ TRUSTED_PROXIES: " 127.0.0.1, 10.0.0.0/8 ,::1, fd00::/8,192.0.2.0/24" }).trustedProxies;
  if (!trust) return t.fail("TRUSTED_PROXIES gave no trust");
  const trusted = (address: string) => trust(address, 0);
  t.true(trusted("127.0.0.1"));
  t.false(trusted("127.0.0.2"));
  t.true(trusted("10.255.1.2"));
  t.false(trusted("11.0.0.1"));
  t.true(trusted("192.0.2.200"));
  t.false(trusted("192.0.3.1"));
  t.true(trusted("::1"));
  t.true(trusted("fd12:3456::1"));
  t.false(trusted("2001:db8::1"));
  t.true(trusted("::ffff:10.1.2.3"), "an IPv4-mapped address is trusted as its IPv4 address");
  t.false(trusted("::ffff:11.0.0.1"));
  t.false(trusted("not-an-address"));
});

test("TRUSTED_PROXIES unset or blank trusts nobody", (t) => {
  t.is(loadConfig({}).trustedProxies, undefined);
  t.is(loadConfig({ TRUSTED_PROXIES: "  " }).trustedProxies, undefined);
  t.is(loadConfig({ TRUSTED_PROXIES: " , " }).trustedProxies, undefined);
});

for (const value of [
  "10.0.0.0/33",
  "nonsense",
  "127.0.0.1, nonsense",
  "::/129",
  "10.0.0.0/-1",
  "10.0.0.0/8/8",
  "10.0.0.0/eight",
  "10.0.0.256",
  "example.com",
  "127.1",
  "loopback",
  "10.0.0.0/255.0.0.0",
  "0.0.0.0/0",
  "::/0",
]) {
  test(`TRUSTED_PROXIES=${value} is refused with a ConfigError naming TRUSTED_PROXIES`, (t) => {
    const error = t.throws(() => loadConfig({ TRUSTED_PROXIES: value }), { instanceOf: ConfigError });
    t.regex(error?.message ?? "", /\bTRUSTED_PROXIES\b/);
  });
}

test("TRUSTED_PROXIES=10.0.0.0/ (no prefix length) is refused, not read as /0", (t) => {
  const error = t.throws(() => loadConfig({ TRUSTED_PROXIES: "10.0.0.0/" }), { instanceOf: ConfigError });
  t.regex(error?.message ?? "", /\bTRUSTED_PROXIES\b/);
});
