/**
 * The hostile-address table shared by the policy and egress tests: every
 * non-public range the issue names, each row naming the range that refuses it.
 */

/** A hostile address and the range (CIDR) that must refuse it. */
export interface HostileRow {
  readonly address: string
  readonly cidr: string
  readonly range: string
}

/** Every non-public range the issue names, with addresses at its edges and well-known members. */
export const HOSTILE: ReadonlyArray<HostileRow> = [
  { address: "0.0.0.0", cidr: "0.0.0.0/8", range: "\"this network\"" },
  { address: "0.255.255.255", cidr: "0.0.0.0/8", range: "\"this network\"" },
  { address: "10.0.0.1", cidr: "10.0.0.0/8", range: "private-use" },
  { address: "10.255.255.255", cidr: "10.0.0.0/8", range: "private-use" },
  { address: "100.64.0.1", cidr: "100.64.0.0/10", range: "carrier-grade NAT" },
  { address: "100.127.255.255", cidr: "100.64.0.0/10", range: "carrier-grade NAT" },
  { address: "127.0.0.1", cidr: "127.0.0.0/8", range: "loopback" },
  { address: "127.255.255.254", cidr: "127.0.0.0/8", range: "loopback" },
  { address: "169.254.169.254", cidr: "169.254.0.0/16", range: "link-local" },
  { address: "172.16.0.1", cidr: "172.16.0.0/12", range: "private-use" },
  { address: "172.31.255.255", cidr: "172.16.0.0/12", range: "private-use" },
  { address: "192.0.0.8", cidr: "192.0.0.0/24", range: "IETF protocol assignments" },
  { address: "192.0.2.1", cidr: "192.0.2.0/24", range: "TEST-NET-1" },
  { address: "192.88.99.1", cidr: "192.88.99.0/24", range: "6to4 relay" },
  { address: "192.168.1.1", cidr: "192.168.0.0/16", range: "private-use" },
  { address: "198.18.0.1", cidr: "198.18.0.0/15", range: "benchmarking" },
  { address: "198.19.255.255", cidr: "198.18.0.0/15", range: "benchmarking" },
  { address: "198.51.100.7", cidr: "198.51.100.0/24", range: "TEST-NET-2" },
  { address: "203.0.113.9", cidr: "203.0.113.0/24", range: "TEST-NET-3" },
  { address: "224.0.0.1", cidr: "224.0.0.0/4", range: "multicast" },
  { address: "239.255.255.250", cidr: "224.0.0.0/4", range: "multicast" },
  { address: "240.0.0.1", cidr: "240.0.0.0/4", range: "reserved" },
  { address: "255.255.255.255", cidr: "240.0.0.0/4", range: "limited broadcast" },
  { address: "::", cidr: "::/128", range: "unspecified" },
  { address: "::1", cidr: "::1/128", range: "loopback" },
  { address: "::ffff:127.0.0.1", cidr: "::ffff:127.0.0.0/104", range: "IPv4-mapped loopback" },
  { address: "::ffff:7f00:1", cidr: "::ffff:127.0.0.0/104", range: "IPv4-mapped loopback" },
  { address: "::ffff:10.1.2.3", cidr: "::ffff:10.0.0.0/104", range: "IPv4-mapped private-use" },
  { address: "::ffff:169.254.169.254", cidr: "::ffff:169.254.0.0/112", range: "IPv4-mapped link-local" },
  { address: "::127.0.0.1", cidr: "::/96", range: "IPv4-compatible" },
  { address: "::808:808", cidr: "::/96", range: "IPv4-compatible" },
  { address: "::8.8.8.8", cidr: "::/96", range: "IPv4-compatible" },
  { address: "64:ff9b::808:808", cidr: "64:ff9b::/96", range: "NAT64" },
  { address: "64:ff9b::a00:1", cidr: "64:ff9b::/96", range: "NAT64" },
  { address: "64:ff9b::10.0.0.1", cidr: "64:ff9b::/96", range: "NAT64" },
  { address: "64:ff9b:1::1", cidr: "64:ff9b:1::/48", range: "local-use IPv4/IPv6 translation" },
  { address: "100::1", cidr: "100::/64", range: "discard-only" },
  { address: "2001::1", cidr: "2001::/23", range: "Teredo" },
  { address: "2001:1ff::1", cidr: "2001::/23", range: "IETF protocol assignments" },
  { address: "2001:db8::1", cidr: "2001:db8::/32", range: "documentation" },
  { address: "2002:7f00:1::1", cidr: "2002::/16", range: "6to4" },
  { address: "fc00::1", cidr: "fc00::/7", range: "unique-local" },
  { address: "fd00:ec2::254", cidr: "fc00::/7", range: "unique-local" },
  { address: "fe80::1", cidr: "fe80::/10", range: "link-local" },
  { address: "fe80::1%eth0", cidr: "fe80::/10", range: "link-local" },
  { address: "fec0::1", cidr: "fec0::/10", range: "site-local" },
  { address: "ff02::1", cidr: "ff00::/8", range: "multicast" },
  { address: "4000::1", cidr: "2000::/3", range: "outside IPv6 global unicast" },
  { address: "::ffff:0:7f00:1", cidr: "2000::/3", range: "outside IPv6 global unicast" },
  // Odd IPv4 spellings (URL parsing turns them into 127.0.0.1; the policy reads them too).
  { address: "2130706433", cidr: "127.0.0.0/8", range: "loopback" },
  { address: "0x7f.1", cidr: "127.0.0.0/8", range: "loopback" },
  { address: "127.1", cidr: "127.0.0.0/8", range: "loopback" },
  { address: "017700000001", cidr: "127.0.0.0/8", range: "loopback" },
  { address: "[::1]", cidr: "::1/128", range: "loopback" }
]

/** Public addresses, several just outside a refused range. */
export const PUBLIC: ReadonlyArray<string> = [
  "8.8.8.8",
  "1.1.1.1",
  "9.255.255.255",
  "11.0.0.0",
  "100.63.255.255",
  "100.128.0.0",
  "172.15.255.255",
  "172.32.0.0",
  "192.0.1.255",
  "192.169.0.0",
  "198.17.255.255",
  "198.20.0.0",
  "223.255.255.255",
  "2606:4700:4700::1111",
  "2001:4860:4860::8888",
  "2001:200::1",
  "::ffff:8.8.8.8",
  "[2606:4700:4700::1111]"
]
