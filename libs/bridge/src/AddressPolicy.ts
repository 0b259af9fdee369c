/**
 * Which IP addresses outbound requests may reach: public unicast only, plus
 * the CIDRs a development setting (`EGRESS_ALLOW_PRIVATE`) names explicitly.
 *
 * Pure functions over address text; the egress Layer applies them to every
 * DNS answer and to literal-IP hosts before it connects.
 */
import { Either } from "effect"
import ipaddr from "ipaddr.js"

type Address = ipaddr.IPv4 | ipaddr.IPv6

/** A parsed CIDR block, with the text it came from (for logs and errors). */
export interface Cidr {
  readonly text: string
  readonly kind: "ipv4" | "ipv6"
  readonly network: Address
  readonly prefix: number
}

/** A range that is never reachable unless explicitly allowed. */
export interface BlockedRange {
  /** What the range is, for operators: "loopback", "private-use (RFC 1918)". */
  readonly name: string
  /** The range in CIDR notation. */
  readonly cidr: string
}

/** What the policy says about one address. */
export type AddressVerdict =
  | { readonly _tag: "Public"; readonly address: string }
  | { readonly _tag: "AllowedPrivate"; readonly address: string; readonly allowedBy: string }
  | { readonly _tag: "Blocked"; readonly address: string; readonly range: BlockedRange }
  | { readonly _tag: "Invalid"; readonly address: string }

/** The policy of one egress Layer. */
export interface AddressPolicy {
  /** The CIDRs this policy lets through despite being non-public. */
  readonly allowPrivate: ReadonlyArray<Cidr>
  /** Classifies one address (DNS answer or literal host, brackets optional). */
  readonly check: (address: string) => AddressVerdict
}

interface CompiledRange extends BlockedRange {
  readonly kind: "ipv4" | "ipv6"
  readonly network: Address
  readonly prefix: number
}

const compile = (name: string, cidr: string): CompiledRange => {
  const [network, prefix] = ipaddr.parseCIDR(cidr)
  return { name, cidr, kind: network.kind(), network, prefix }
}

const IPV4_ROWS: ReadonlyArray<CompiledRange> = [
  compile("\"this network\"", "0.0.0.0/8"),
  compile("private-use (RFC 1918)", "10.0.0.0/8"),
  compile("shared address space / carrier-grade NAT (RFC 6598)", "100.64.0.0/10"),
  compile("loopback", "127.0.0.0/8"),
  compile("link-local (includes the cloud metadata address 169.254.169.254)", "169.254.0.0/16"),
  compile("private-use (RFC 1918)", "172.16.0.0/12"),
  compile("IETF protocol assignments", "192.0.0.0/24"),
  compile("documentation (TEST-NET-1)", "192.0.2.0/24"),
  compile("deprecated 6to4 relay anycast", "192.88.99.0/24"),
  compile("private-use (RFC 1918)", "192.168.0.0/16"),
  compile("benchmarking", "198.18.0.0/15"),
  compile("documentation (TEST-NET-2)", "198.51.100.0/24"),
  compile("documentation (TEST-NET-3)", "203.0.113.0/24"),
  compile("multicast", "224.0.0.0/4"),
  compile("reserved (includes limited broadcast 255.255.255.255)", "240.0.0.0/4")
]

const IPV6_ROWS: ReadonlyArray<CompiledRange> = [
  compile("unspecified", "::/128"),
  compile("loopback", "::1/128"),
  compile("IPv4-compatible (deprecated)", "::/96"),
  compile("IPv4/IPv6 translation (NAT64)", "64:ff9b::/96"),
  compile("local-use IPv4/IPv6 translation", "64:ff9b:1::/48"),
  compile("discard-only", "100::/64"),
  compile("IETF protocol assignments (includes Teredo)", "2001::/23"),
  compile("documentation", "2001:db8::/32"),
  compile("6to4", "2002::/16"),
  compile("documentation", "3fff::/20"),
  compile("unique-local (includes the cloud metadata address fd00:ec2::254)", "fc00::/7"),
  compile("link-local", "fe80::/10"),
  compile("site-local (deprecated)", "fec0::/10"),
  compile("multicast", "ff00::/8")
]

// Everything outside global unicast is unallocated or special; refuse it even
// when no row above names it.
const GLOBAL_UNICAST = compile("global unicast", "2000::/3")
const OUTSIDE_GLOBAL_UNICAST: BlockedRange = { name: "outside IPv6 global unicast", cidr: "2000::/3" }

const inRange = (address: Address, range: { readonly kind: string; readonly network: Address; readonly prefix: number }) =>
  address.kind() === range.kind && address.match(range.network, range.prefix)

const describe = ({ name, cidr }: CompiledRange): BlockedRange => ({ name, cidr })

/** IPv4 ranges that are not publicly routable (IANA special-purpose registry). */
export const BLOCKED_IPV4: ReadonlyArray<BlockedRange> = IPV4_ROWS.map(describe)

/**
 * IPv6 ranges that are not publicly routable. IPv4-mapped addresses
 * (::ffff:0:0/96) are not listed: they are decoded and judged as IPv4.
 */
export const BLOCKED_IPV6: ReadonlyArray<BlockedRange> = IPV6_ROWS.map(describe)

const stripBrackets = (text: string) =>
  text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text

/** Parses an address; `undefined` when the text is not an IP address. */
export const parseAddress = (text: string): Address | undefined => {
  const bare = stripBrackets(text)
  if (bare.includes(":") && bare.includes(".")) {
    // ipaddr.js reads "::a.b.c.d" as ::ffff:a.b.c.d, but a socket reads it as the
    // IPv4-compatible ::a.b.c.d: let the WHATWG parser spell it in hex first.
    // (A zone index does not change the range, so it is dropped.)
    const hex = URL.parse(`http://[${bare.split("%")[0]}]`)?.hostname
    return hex === undefined ? undefined : ipaddr.parse(hex.slice(1, -1))
  }
  return ipaddr.isValid(bare) ? ipaddr.parse(bare) : undefined
}

/**
 * Parses one CIDR (`10.0.0.0/8`, `::1/128`); a bare address means that one
 * host (/32 or /128).
 */
export const parseCidr = (text: string): Either.Either<Cidr, string> => {
  const trimmed = text.trim()
  if (ipaddr.isValidCIDR(trimmed)) {
    const [network, prefix] = ipaddr.parseCIDR(trimmed)
    return Either.right({ text: trimmed, kind: network.kind(), network, prefix })
  }
  const address = parseAddress(trimmed)
  if (address !== undefined) {
    const prefix = address.kind() === "ipv4" ? 32 : 128
    return Either.right({ text: `${trimmed}/${prefix}`, kind: address.kind(), network: address, prefix })
  }
  return Either.left(`"${trimmed}" is not an IP address or CIDR block`)
}

/** Parses a comma-separated CIDR list; blank entries are ignored. */
export const parseCidrList = (text: string): Either.Either<ReadonlyArray<Cidr>, string> =>
  Either.all(
    text.split(",").filter((entry) => entry.trim().length > 0).map(parseCidr)
  )

const findBlocked = (address: Address): BlockedRange | undefined => {
  const row = (address.kind() === "ipv4" ? IPV4_ROWS : IPV6_ROWS).find((range) => inRange(address, range))
  if (row !== undefined) return describe(row)
  if (address.kind() === "ipv4") return undefined
  return inRange(address, GLOBAL_UNICAST) ? undefined : OUTSIDE_GLOBAL_UNICAST
}

// Names the IPv6 form of an IPv4 range, e.g. ::ffff:127.0.0.0/104.
const mapped = (range: BlockedRange): BlockedRange => {
  const [network, prefix] = range.cidr.split("/")
  return { name: `IPv4-mapped ${range.name}`, cidr: `::ffff:${network}/${Number(prefix) + 96}` }
}

/** Builds the policy that also lets `allowPrivate` through. */
export const make = (allowPrivate: ReadonlyArray<Cidr> = []): AddressPolicy => ({
  allowPrivate,
  check: (text) => {
    const parsed = parseAddress(text)
    if (parsed === undefined) return { _tag: "Invalid", address: text }
    // An IPv4-mapped IPv6 address reaches the embedded IPv4 address: judge that.
    const address = parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress() ? parsed.toIPv4Address() : parsed
    const allowed = allowPrivate.find((cidr) => inRange(address, cidr) || inRange(parsed, cidr))
    if (allowed !== undefined) return { _tag: "AllowedPrivate", address: text, allowedBy: allowed.text }
    const blocked = findBlocked(address)
    if (blocked === undefined) return { _tag: "Public", address: text }
    return {
      _tag: "Blocked",
      address: text,
      range: address === parsed ? blocked : mapped(blocked)
    }
  }
})

/** Whether the address `text` (brackets optional, IPv4-mapped judged as IPv4 too) is in one of `cidrs`. */
export const inList = (cidrs: ReadonlyArray<Cidr>, text: string): boolean => {
  const parsed = parseAddress(text)
  if (parsed === undefined) return false
  const address = parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress() ? parsed.toIPv4Address() : parsed
  return cidrs.some((cidr) => inRange(address, cidr) || inRange(parsed, cidr))
}

/** The production policy: public addresses only. */
export const publicOnly: AddressPolicy = make([])

/** Whether a verdict lets the connection proceed. */
export const isPermitted = (verdict: AddressVerdict): boolean =>
  verdict._tag === "Public" || verdict._tag === "AllowedPrivate"
